"""Linear-like modules STAC-R can wrap: how to read a module's weight (and its layout), bias and input.

A module is *Linear-like* when its forward computes ``y = x·Wᵀ + b`` of one input ``x`` (..., in_features) with
a 2-D weight Parameter and an optional bias Parameter. ``nn.Linear`` stores ``W`` as ``(out, in)``;
transformers' ``Conv1D`` (every GPT-2 projection) stores it as ``(in, out)`` and computes
``addmm(b, x.view(-1, in), W)``. Both are registered here; :func:`register_linear` adds another class.

The wrapped layer (:class:`~thrifty.compress.CompressedLinear`) holds the very Parameters under the module's
own attribute names, so ``state_dict`` keys and weight tying are kept, and :func:`~thrifty.compress.unwrap`
gives back the original module object.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from torch import Tensor, nn

__all__ = ["LinearAdapter", "adapter_for", "register_linear"]

Layout = Literal["out_in", "in_out"]
InputOf = Callable[[tuple[Any, ...], dict[str, Any]], Tensor]


def _first_argument(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
    if len(args) != 1 or kwargs:
        raise TypeError(
            f"forward: a compressed Linear takes exactly one input tensor, got {len(args)} positional and "
            f"keyword arguments {sorted(kwargs)}"
        )
    x: Tensor = args[0]
    return x


@dataclass(frozen=True)
class LinearAdapter:
    """How to read one Linear-like module class.

    Attributes
    ----------
    weight : str
        Attribute name of the 2-D weight Parameter.
    bias : str or None
        Attribute name of the bias Parameter (its value may be None), or None when the class has none.
    layout : {"out_in", "in_out"}
        ``"out_in"``: the weight is ``(out_features, in_features)`` as in ``nn.Linear``; ``"in_out"``: it is
        ``(in_features, out_features)`` as in transformers' ``Conv1D``.
    input : callable(args, kwargs) -> Tensor
        Picks the input ``x`` from the forward's arguments (default: the single positional argument).
    """

    weight: str = "weight"
    bias: str | None = "bias"
    layout: Layout = "out_in"
    input: InputOf = _first_argument

    def weight_of(self, module: nn.Module) -> Any:
        return getattr(module, self.weight, None)

    def bias_of(self, module: nn.Module) -> Any:
        return None if self.bias is None else getattr(module, self.bias, None)

    def features(self, module: nn.Module) -> tuple[int, int]:
        """``(in_features, out_features)`` read from the weight's shape and layout."""
        w = self.weight_of(module)
        a, b = int(w.shape[0]), int(w.shape[1])
        return (b, a) if self.layout == "out_in" else (a, b)


_REGISTRY: dict[type[nn.Module], LinearAdapter] = {nn.Linear: LinearAdapter()}
_CONV1D_MODULES = ("transformers.pytorch_utils", "transformers.modeling_utils")


def register_linear(
    cls: type[nn.Module],
    *,
    weight: str = "weight",
    bias: str | None = "bias",
    layout: Layout = "out_in",
    input: InputOf | None = None,  # noqa: A002 - the documented name of the accessor
) -> None:
    """Let :func:`~thrifty.compress.stac_r` and :func:`~thrifty.compress.predict` treat ``cls`` like ``nn.Linear``.

    The class's forward must compute ``y = x·Wᵀ + b`` (``W`` read in the given layout) of the input picked by
    ``input``; subclasses inherit the registration unless they override ``forward``.

    Parameters
    ----------
    cls : type of nn.Module
        The module class.
    weight : str, default="weight"
        Attribute holding the 2-D weight Parameter.
    bias : str or None, default="bias"
        Attribute holding the bias Parameter (or None when the class has no bias).
    layout : {"out_in", "in_out"}, default="out_in"
        ``(out_features, in_features)`` like ``nn.Linear``, or ``(in_features, out_features)`` like ``Conv1D``.
    input : callable(args, kwargs) -> Tensor, optional
        Picks the input from the forward's arguments (default: exactly one positional argument).

    Raises
    ------
    TypeError
        ``cls`` is not an ``nn.Module`` subclass, ``weight``/``bias`` not strings, ``input`` not callable.
    ValueError
        ``layout`` is not ``"out_in"`` or ``"in_out"``.

    Examples
    --------
    >>> import torch
    >>> from thrifty.compress import register_linear, stac_r, CompressedLinear
    >>> class Dense(torch.nn.Module):          # weight stored (in, out), y = x @ kernel + offset
    ...     def __init__(self, d: int, m: int) -> None:
    ...         super().__init__()
    ...         self.kernel = torch.nn.Parameter(torch.randn(d, m) / d**0.5)
    ...         self.offset = torch.nn.Parameter(torch.zeros(m))
    ...     def forward(self, x: torch.Tensor) -> torch.Tensor:
    ...         return x @ self.kernel + self.offset
    >>> register_linear(Dense, weight="kernel", bias="offset", layout="in_out")
    >>> model = torch.nn.Sequential(Dense(16, 32), torch.nn.GELU(), Dense(32, 4))
    >>> isinstance(stac_r(model, exact=True)[2], CompressedLinear)
    True
    """
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise TypeError(f"cls: expected a subclass of torch.nn.Module, got {cls!r}")
    if not isinstance(weight, str) or (bias is not None and not isinstance(bias, str)):
        raise TypeError("weight, bias: expected attribute names (str; bias may be None)")
    if layout not in ("out_in", "in_out"):
        raise ValueError(f"layout: must be 'out_in' or 'in_out', got {layout!r}")
    if input is not None and not callable(input):
        raise TypeError(f"input: expected a callable(args, kwargs) -> Tensor, got {type(input).__name__}")
    _REGISTRY[cls] = LinearAdapter(weight, bias, layout, _first_argument if input is None else input)


def _register_known() -> None:
    """transformers' Conv1D, once transformers is imported (never imported here)."""
    for mod_name in _CONV1D_MODULES:
        conv1d = getattr(sys.modules.get(mod_name), "Conv1D", None)
        if isinstance(conv1d, type) and conv1d not in _REGISTRY:
            _REGISTRY[conv1d] = LinearAdapter(layout="in_out")


def adapter_for(module: object) -> LinearAdapter | None:
    """The adapter of a Linear-like module: its class or a base class registered, ``forward`` not overridden.

    ``None`` for any other object (a subclass with its own forward is not Linear-like: its forward may do more).
    """
    if not isinstance(module, nn.Module):
        return None
    _register_known()
    cls = type(module)
    for base in cls.__mro__:
        adapter = _REGISTRY.get(base)
        if adapter is not None:
            return adapter if cls.forward is base.forward else None  # type: ignore[attr-defined]
    return None


def own_forward_base(module: object) -> type | None:
    """The registered base class of a subclass that overrides its forward (for the error message), else None."""
    if not isinstance(module, nn.Module):
        return None
    _register_known()
    cls = type(module)
    for base in cls.__mro__[1:]:
        if base in _REGISTRY and cls.forward is not base.forward:
            return base
    return None
