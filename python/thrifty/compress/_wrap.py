"""`stac_r` wraps the selected ``nn.Linear`` layers of a model in :class:`CompressedLinear`; `unwrap` undoes it."""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Mapping
from typing import Any, TypeVar

from torch import nn

from thrifty.compress import _checks
from thrifty.compress._adapters import adapter_for
from thrifty.compress._lean import _is_tanh_gelu
from thrifty.compress._linear import CompressedLinear
from thrifty.compress._loss import has_lean_loss
from thrifty.compress._meter import has_data
from thrifty.compress._predict import SSPReport
from thrifty.compress._select import LayerSelector, select_layers

__all__ = ["stac_r", "unwrap"]

M = TypeVar("M", bound=nn.Module)
PerLayer = Any  # a value for every selected layer, or a Mapping from layer names/patterns to values

_EXPERT = ("rank", "residual_density", "residual_bits", "coef_dtype", "refresh_every", "compute_budget")


def stac_r(
    model: M,
    ratio: float | None = None,
    layers: LayerSelector = None,
    *,
    plan: Any = None,
    rank: PerLayer = None,
    residual_density: PerLayer = None,
    residual_bits: PerLayer = None,
    coef_dtype: PerLayer = None,
    refresh_every: PerLayer = None,
    compute_budget: PerLayer = None,
    exact: bool = False,
    stochastic: bool = False,
    inplace: bool = False,
    seed: int = 0,
) -> M:
    """Compress the saved inputs of a model's Linear layers with STAC-R.

    Every selected ``nn.Linear`` becomes a :class:`CompressedLinear` holding the same Parameters: its
    forward is unchanged, its backward computes the weight gradient from a tracked low-rank projection plus
    a sparse quantized residual of the input instead of the input itself.

    Parameters
    ----------
    model : torch.nn.Module
        The model. Not modified unless ``inplace=True``.
    ratio : float > 1, default=8
        Target stored-bytes ratio per layer (dense input bytes / stored bytes). Each layer plans rank,
        coefficient precision and residual from the spectrum of its first batch.
    plan : SSPReport, optional
        A report of :func:`~thrifty.compress.predict` on this model: wrap exactly the layers it accepts,
        with the ratio, layouts and bases it planned on its dry-run batch (no planning at the first step).
        Excludes ``layers`` and the expert overrides; ``ratio``, if given, must equal the report's.
    layers : None, str, iterable of str, or callable(name, module) -> bool, default=None
        Which layers: None = every Linear-like module (``nn.Linear``, transformers' ``Conv1D``, classes given
        to :func:`~thrifty.compress.register_linear`; except the output projection inside
        ``nn.MultiheadAttention``, whose forward is never called); names or ``fnmatch`` glob patterns
        (``"blocks.*.mlp.*"``) of modules; or a predicate. Every name/pattern must match something and
        every selected module must be Linear-like.
    rank, residual_density, residual_bits, coef_dtype, refresh_every, compute_budget : value or dict, optional
        Expert overrides (see :class:`CompressedLinear`), for all layers or per layer as a dict from module
        names or glob patterns to values (the first matching key wins; layers without a match are planned
        from the budget). ``rank`` must be smaller than the layer's ``in_features``. ``compute_budget``
        (default 0.25, ``math.inf`` = off) caps each planned rank at ``max(32, compute_budget * out_features)`` so
        the basis refresh costs a bounded share of the layer's own GEMMs, except where the capped layout would
        predict a gradient cosine below 0.94 on the first batch: that layer takes the cheapest layout in its
        byte budget predicting 0.97 (the cap's fidelity floor, see :class:`CompressedLinear`).
    exact : bool, default=False
        Keep the whole activation through the same code path (identity basis, fp32 coefficients, no
        residual): gradients equal the uncompressed model's. For testing the machinery, not for saving memory.
    stochastic : bool, default=False
        Stochastic (unbiased) rounding of the residual values, reproducible: keyed by (seed, step, layer).
    inplace : bool, default=False
        Modify ``model`` itself instead of a deep copy.
    seed : int, default=0
        Seeds stochastic rounding and the gradient monitor's row sampling.

    Returns
    -------
    The wrapped model (``model`` itself if ``inplace=True``, else a deep copy). Wrap before handing the
    model to ``DistributedDataParallel`` or ``torch.compile``. A layer shared by several parents is
    wrapped once and replaced everywhere.

    Raises
    ------
    TypeError
        ``model`` is not an ``nn.Module``, or is itself a bare Linear (wrap it with ``CompressedLinear``);
        wrong argument types; a selected module is not Linear-like
        (or is already compressed); a selected layer's weight is not float32, bfloat16 or float16.
    ValueError
        A name or pattern matches nothing; ``rank >= in_features``;
        ``residual_density`` outside (0, 1]; ``residual_bits`` not 4 or 8; unknown ``coef_dtype``; ``ratio <= 1``;
        a layer's parameters on different devices; a ``plan`` that counts the lean pieces (``config lean=True``)
        on a model without them (apply ``lean_loss(lean_activations(model))`` first). Nothing is modified when an
        error is raised.

    Examples
    --------
    >>> import torch
    >>> from thrifty.compress import stac_r, unwrap, CompressedLinear
    >>> model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))
    >>> small = stac_r(model, ratio=8, layers="0")
    >>> isinstance(small[0], CompressedLinear), isinstance(model[0], CompressedLinear)
    (True, False)
    >>> small(torch.randn(32, 64)).square().mean().backward()
    >>> type(unwrap(small)[0]).__name__
    'Linear'
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, CompressedLinear) or adapter_for(model) is not None:
        raise TypeError(
            f"model: is a bare {type(model).__name__}, not a model containing one; stac_r replaces layers "
            "inside a model (wrap a single layer with CompressedLinear(layer, ratio), or put it in an nn.Sequential)"
        )
    planned: dict[str, Any] = {}
    if plan is not None:
        layers, ratio, planned = _from_plan(model, plan, ratio, layers, rank, residual_density, residual_bits,
                                            coef_dtype, refresh_every, exact)  # fmt: skip
    ratio_value = _checks.check_ratio(8 if ratio is None else ratio)
    _checks.check_bool("exact", exact)
    _checks.check_bool("stochastic", stochastic)
    _checks.check_bool("inplace", inplace)
    seed_value = _checks.check_seed(seed)
    names = select_layers(model, layers)
    expert = {"rank": rank, "residual_density": residual_density, "residual_bits": residual_bits,
              "coef_dtype": coef_dtype, "refresh_every": refresh_every,
              "compute_budget": compute_budget}  # fmt: skip
    per_layer = {key: _resolve(key, value, names) for key, value in expert.items()}
    modules = dict(model.named_modules())
    # build every wrapper on the original layers first: all checks run before anything is modified
    for i, name in enumerate(names):
        kwargs = {key: per_layer[key][name] for key in _EXPERT}
        CompressedLinear(modules[name], ratio_value, exact=exact, stochastic=stochastic, seed=seed_value,
                         layer_index=i, name=name, **kwargs)  # fmt: skip
    target = model if inplace else copy.deepcopy(model)
    target_modules = dict(target.named_modules())
    for i, name in enumerate(names):
        kwargs = {key: per_layer[key][name] for key in _EXPERT}
        layer = target_modules[name]
        wrapped = CompressedLinear(layer, ratio_value, exact=exact, stochastic=stochastic, seed=seed_value,
                                   layer_index=i, name=name, **kwargs)  # fmt: skip
        wrapped.train(layer.training)
        if name in planned:  # the report's layout and basis, planned on its dry-run batch
            wrapped.codec.config = planned[name].config
            if has_data(planned[name].u):  # a meta run's plan: the layout; the basis from batch 1
                wrapped.codec.u = planned[name].u.clone()
        _replace(target, layer, wrapped)
    return target


def _from_plan(model: nn.Module, plan: Any, ratio: float | None, layers: LayerSelector, *expert: Any) -> tuple[list[str], float, dict[str, Any]]:
    """The layers, ratio and per-layer codecs of an SSPReport (``stac_r(plan=report)``)."""
    if not isinstance(plan, SSPReport):
        raise TypeError(f"plan: expected an SSPReport from thrifty.compress.predict, got {type(plan).__name__}")
    if layers is not None or any(v is not None and v is not False for v in expert):
        raise ValueError("plan: cannot be combined with layers, exact or the expert overrides (the report decides them)")
    if ratio is not None and float(ratio) != plan.config.ratio:
        raise ValueError(f"ratio: {ratio} differs from the plan's ratio {plan.config.ratio:g}")
    names = list(plan.accepted)
    if not names:
        raise ValueError("plan: the report accepts no layer (nothing would lower the peak); see print(report)")
    modules = dict(model.named_modules())
    for n in names:
        if adapter_for(modules.get(n)) is None:
            raise ValueError(f"plan: layer {n!r} of the report is not a Linear-like layer of this model")
    _check_lean_applied(model, plan)
    codecs = {n: c for n, c in plan._codecs.items() if n in names and c.config is not None and c.u is not None}
    return names, plan.config.ratio, codecs


def _check_lean_applied(model: nn.Module, plan: SSPReport) -> None:
    """A report that counts the lean pieces (config lean=True) is applied to a model that has them."""
    modules = dict(model.named_modules())
    missing = [r.name for r in plan.lean if r.name != "loss" and _is_tanh_gelu(modules.get(r.name))]
    if any(r.name == "loss" for r in plan.lean) and not has_lean_loss(model):
        missing.append("the loss (lean_loss)")
    if missing:
        raise ValueError(
            f"plan: counts the lean pieces (config lean=True) but the model still lacks {len(missing)} of them "
            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): apply "
            "lean_loss(lean_activations(model)) first"
        )


def unwrap(model: M, *, inplace: bool = False) -> M:
    """Replace every :class:`CompressedLinear` by a plain ``nn.Linear`` holding the same Parameters.

    Parameters
    ----------
    model : torch.nn.Module
        A model returned by :func:`stac_r` (a bare ``CompressedLinear`` is returned as an ``nn.Linear``).
    inplace : bool, default=False
        Modify ``model`` itself instead of a deep copy.

    Returns
    -------
    The model without compressed layers (its ``state_dict`` has the same keys and values).

    Raises
    ------
    TypeError
        ``model`` is not an ``nn.Module``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    _checks.check_bool("inplace", inplace)
    target = model if inplace else copy.deepcopy(model)
    if isinstance(target, CompressedLinear):
        return target.to_module()  # type: ignore[return-value]
    for module in list(target.modules()):
        if isinstance(module, CompressedLinear):
            _replace(target, module, module.to_module())
    return target


def _resolve(key: str, value: PerLayer, names: list[str]) -> dict[str, Any]:
    """Per-layer values of one expert option: a scalar for all, or a dict of names/patterns -> value."""
    if not isinstance(value, Mapping):
        return {n: value for n in names}
    out: dict[str, Any] = {n: None for n in names}
    for pattern in value:
        if not isinstance(pattern, str):
            raise TypeError(f"{key}: dict keys must be layer names or patterns, got {type(pattern).__name__}")
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            raise ValueError(f"{key}: {pattern!r} matches none of the selected layers")
    for n in names:
        for pattern, v in value.items():
            if fnmatch.fnmatchcase(n, pattern):
                out[n] = v
                break
    return out


def _replace(root: nn.Module, old: nn.Module, new: nn.Module) -> None:
    """Put ``new`` wherever ``old`` is a child (a module shared by several parents is replaced in all)."""
    for parent in list(root.modules()):
        for child_name, child in list(parent._modules.items()):  # named_children() skips repeats
            if child is old:
                setattr(parent, child_name, new)

