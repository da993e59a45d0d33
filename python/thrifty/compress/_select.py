"""Which modules of a model :func:`~thrifty.compress.stac_r` and :func:`~thrifty.compress.predict` consider:
the ``layers=`` selector (None, names or glob patterns, or a predicate), every selected module checked."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable

from torch import nn

from thrifty.compress import _checks
from thrifty.compress._adapters import adapter_for
from thrifty.compress._linear import CompressedLinear

__all__ = ["LayerSelector", "select_layers"]

LayerSelector = str | Iterable[str] | Callable[[str, nn.Module], bool] | None


def select_layers(model: nn.Module, layers: LayerSelector) -> list[str]:
    """Names of the modules to wrap, in ``named_modules`` order; every selected one checked."""
    modules = dict(model.named_modules())
    if layers is None:
        skip = {f"{n}.out_proj" if n else "out_proj" for n, m in modules.items() if isinstance(m, nn.MultiheadAttention)}
        names = [n for n, m in modules.items() if adapter_for(m) is not None and n not in skip and n != ""]
        if not names:
            raise ValueError(
                "layers: the model has no torch.nn.Linear layer to compress (nor a Linear-like one: "
                "transformers' Conv1D, classes given to register_linear)"
            )
    elif callable(layers):
        names = [n for n, m in modules.items() if n != "" and layers(n, m)]
        if not names:
            raise ValueError("layers: the predicate selected no module")
    else:
        patterns = [layers] if isinstance(layers, str) else list(layers) if isinstance(layers, Iterable) else []
        if not patterns or not all(isinstance(p, str) for p in patterns):
            raise TypeError("layers: expected None, a name/pattern, a list of names/patterns or a predicate")
        chosen: set[str] = set()
        for pattern in patterns:
            hits = [n for n in modules if n != "" and fnmatch.fnmatchcase(n, pattern)]
            if not hits:
                raise ValueError(f"layers: {pattern!r} matches no module of the model")
            chosen.update(hits)
        names = [n for n in modules if n in chosen]
    for n in names:
        module = modules[n]
        if isinstance(module, CompressedLinear):
            raise TypeError(f"layers: {n!r} is already a CompressedLinear")
        _checks.check_linear(n, module)
        parent = n.rpartition(".")[0]
        if n.endswith("out_proj") and isinstance(modules.get(parent), nn.MultiheadAttention):
            raise ValueError(
                f"layers: {n!r} is the output projection of an nn.MultiheadAttention, which uses its weight "
                "without calling its forward; it cannot be compressed"
            )
    return names
