"""`CompressedLinear`: an ``nn.Linear`` whose saved input is STAC-R factors, and the op ``thrifty::stac_linear``.

A Linear layer ``y = x·Wᵀ + b`` needs its input ``X`` (n, d) in backward only for the weight gradient
``grad_W = Gᵀ·X``; ``grad_x = G·W`` and ``grad_b = Σ G`` do not use it. So instead of ``X`` the op saves

- ``C = X·U`` in a tracked basis ``U`` (d, r) (fp32, bf16, or int8 with per-row scales), and
- a sparse residual ``R`` of ``E = X − deq(C)·Uᵀ``: the ``k`` largest ``|E|`` per block of features, int8 or
  int4 with a per-row-per-block scale and uint8 in-block indices,

and computes ``grad_W = (Gᵀ·deq(C))·Uᵀ + Gᵀ·R`` straight from them (``_kernels.grad_weight``): the dense
activation is never rebuilt. The basis, its refresh schedule and the byte budget (rank, coefficient format,
residual density and bits) belong to the layer's :class:`~thrifty.compress._codec.LayerCodec`.

``thrifty::stac_linear`` is a ``torch.library.custom_op`` with a fake (meta) implementation and an autograd
registration. The module calls ``thrifty::stac_layer``: the same computation with the layer's host-side policy
(planning, basis refresh, step counting, the monitor) inside the op and the factors packed in one uint8 tensor,
so a compiled model has one opaque call per layer and no graph break; it works under ``torch.utils.checkpoint``
(a recomputed forward reuses the basis and rounding key), DDP and FSDP2 (rank 0's plan and basis are shared). With ``exact=True``
the same path runs with ``U = I``, fp32 coefficients and no residual, which reproduces ``Gᵀ·X`` exactly.

The gradient bridge: with ``Δ = ĝ − g = Gᵀ·E`` and ``ε = ‖Δ‖/‖g‖ < 1``, ``cos(ĝ, g) ≥ √(1 − ε²)``. Every
``monitor_every`` steps the layer keeps ``monitor_rows`` sampled rows of ``X`` and of ``E`` (a few rows) and
measures ``ε`` on them in backward with one small GEMM ``G_sᵀ·[X_s | E_s]``
(see :func:`~thrifty.compress.compression_report`).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import math
import pickle
import weakref
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from thrifty.compress import _checks, _kernels
from thrifty.compress._codec import LayerCodec, LayerConfig

__all__ = ["CompressedLinear", "LayerState"]

# user-facing names of the expert options -> the codec's override keys
_CODEC_KEYS = {"rank": "rank", "residual_density": "residual_density", "residual_bits": "bits",
               "coef_dtype": "coef", "refresh_every": "refresh_every"}  # fmt: skip
# Default compute cap: planned rank <= DEFAULT_COMPUTE_BUDGET * out_features. The per-step basis refresh and
# projection cost ~3·n·in·r FLOPs against the layer's own 3·n·in·out (forward + both backward GEMMs), so
# 0.25 keeps the codec's GEMMs at about a quarter of the layer's (plus a QR of (in, r)).
DEFAULT_COMPUTE_BUDGET = 0.25
# The cap never goes below this many columns: a narrow-output layer (a classifier head) is cheap in absolute
# terms, and a basis of a few columns would lose most of its gradient for no measurable time.
MIN_CAPPED_RANK = 32


def compute_cap(compute_budget: float, out_features: int) -> dict[str, int]:
    """The codec override of the compute cap for a layer with ``out_features`` outputs:
    ``{"max_rank": max(MIN_CAPPED_RANK, compute_budget · out_features)}``, or ``{}`` for ``math.inf`` (no cap).
    One definition for CompressedLinear, the predictor and the benchmarks, so they plan alike."""
    cap = compute_budget * out_features
    if not math.isfinite(cap):  # math.inf, or a budget so large that the cap itself overflows
        return {}
    return {"max_rank": max(MIN_CAPPED_RANK, int(cap))}


# --------------------------------------------------------------------------------------------------------
# the custom op


@torch.library.custom_op("thrifty::stac_linear", mutates_args=())
def stac_linear(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    u: Tensor,
    xu: Tensor | None,
    coef: str,
    block: int,
    k: int,
    bits: int,
    stochastic: bool,
    seed: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``y = x·Wᵀ + b`` and the STAC-R factors of ``x`` that backward uses instead of ``x``.

    Parameters
    ----------
    x : Tensor (n, d), float32 / bfloat16 / float16
        The Linear's input, flattened over leading dimensions.
    weight : Tensor (m, d), same dtype and device as ``x``
    bias : Tensor (m,) or None
    u : Tensor (d, r), float32
        Orthonormal basis (the identity for the exact mode).
    xu : Tensor (n, r) float32 or None
        ``x·u`` when already computed (by the basis refresh on this batch); computed here otherwise.
    coef, block, k, bits, stochastic, seed
        Storage format, see :func:`thrifty.compress._kernels.compress`.

    Returns
    -------
    ``(y, c, c_scale, vals, idx, scales)``: ``y`` (n, m) in ``x``'s dtype and the packed factors.
    """
    y = F.linear(x, weight, bias)
    c, c_scale, vals, idx, scales = _kernels.compress(
        x, u, coef=coef, block=block, k=k, bits=bits, stochastic=stochastic, seed=seed, xu=xu
    )
    return y, c, c_scale, vals, idx, scales


@stac_linear.register_fake
def _stac_linear_fake(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    u: Tensor,
    xu: Tensor | None,
    coef: str,
    block: int,
    k: int,
    bits: int,
    stochastic: bool,
    seed: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    if x.dim() != 2 or weight.dim() != 2 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"x: expected shape (n, {weight.shape[-1]}), got {tuple(x.shape)}")
    y = x.new_empty((x.shape[0], weight.shape[0]))
    c, c_scale, vals, idx, scales = _kernels.compress(  # shapes do not depend on the rounding key
        x, u, coef=coef, block=block, k=k, bits=bits, stochastic=stochastic, seed=0, xu=xu
    )
    return y, c, c_scale, vals, idx, scales


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, ...]) -> None:
    x, weight, bias, u, _xu, _coef, block, _k, bits, _stochastic, _seed = inputs
    _y, c, c_scale, vals, idx, scales = output
    ctx.save_for_backward(weight, u, c, c_scale, vals, idx, scales)  # the factors, never x
    ctx.d = x.shape[1]
    ctx.block = block
    ctx.bits = bits
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.mark_non_differentiable(c, c_scale, vals, idx, scales)


def _backward(ctx: Any, grad_y: Tensor, *_unused: Any) -> tuple[Tensor | None, ...]:
    weight, u, c, c_scale, vals, idx, scales = ctx.saved_tensors
    grad_x = grad_w = grad_b = None
    with torch.autocast(grad_y.device.type, enabled=False):  # a CPU backward may run inside the user's autocast
        if ctx.needs_input_grad[0]:
            grad_x = grad_y.mm(weight.to(grad_y.dtype))
        if ctx.needs_input_grad[1]:
            gw = _kernels.grad_weight(
                grad_y, u, c, c_scale, vals, idx, scales, d=ctx.d, block=ctx.block, bits=ctx.bits
            )
            grad_w = gw.to(weight.dtype)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            grad_b = grad_y.sum(0, dtype=torch.float32).to(ctx.bias_dtype)
    return grad_x, grad_w, grad_b, None, None, None, None, None, None, None, None


stac_linear.register_autograd(_backward, setup_context=_setup_context)


# --------------------------------------------------------------------------------------------------------
# the layer op: one opaque call per CompressedLinear forward, the host-side policy inside it


# live layers by handle: the ops below take the layer's handle (an int, so the schema stays plain) and run its
# host-side policy (planning, basis refresh, step counting, accounting, the monitor) inside the op, where
# torch.compile does not look - so a compiled model has no graph break at its compressed layers
_LAYERS: weakref.WeakValueDictionary[int, CompressedLinear] = weakref.WeakValueDictionary()
_HANDLES = itertools.count(1)


def _layer(handle: int) -> CompressedLinear:
    layer = _LAYERS.get(handle)
    if layer is None:
        raise RuntimeError(f"thrifty::stac_layer: no live CompressedLinear has handle {handle}")
    return layer


@functools.lru_cache(maxsize=256)
def _factor_layout(n: int, d: int, cfg: LayerConfig) -> tuple[tuple[tuple[int, ...], torch.dtype], ...]:
    """Shapes and dtypes of the packed factors ``(c, c_scale, vals, idx, scales)`` of ``n`` rows, in packing
    order (larger elements first, so every part starts aligned for its dtype inside the uint8 buffer)."""
    x = torch.empty((n, d), device="meta")
    u = torch.empty((d, cfg.rank), device="meta")
    parts = _kernels.compress(x, u, coef=cfg.coef, block=cfg.block, k=cfg.k, bits=cfg.bits)
    return tuple((tuple(t.shape), t.dtype) for t in parts)


def _packing_order(layout: tuple[tuple[tuple[int, ...], torch.dtype], ...]) -> list[int]:
    return sorted(range(len(layout)), key=lambda i: -layout[i][1].itemsize)


def _pack(parts: tuple[Tensor, ...]) -> Tensor:
    """The factors in one uint8 tensor (their bytes, back to back: nothing added, so the meter counts alike)."""
    order = _packing_order(tuple((tuple(t.shape), t.dtype) for t in parts))
    return torch.cat([parts[i].contiguous().reshape(-1).view(torch.uint8) for i in order])


def _unpack(packed: Tensor, n: int, d: int, cfg: LayerConfig) -> tuple[Tensor, ...]:
    """Views of ``(c, c_scale, vals, idx, scales)`` into what :func:`_pack` made (no copy)."""
    layout = _factor_layout(n, d, cfg)
    parts: list[Tensor | None] = [None] * len(layout)
    offset = 0
    for i in _packing_order(layout):
        shape, dtype = layout[i]
        size = math.prod(shape) * dtype.itemsize
        parts[i] = packed[offset : offset + size].view(dtype).reshape(shape)
        offset += size
    if offset != packed.numel():
        raise RuntimeError(f"thrifty::stac_layer: {packed.numel()} packed bytes, the layout needs {offset}")
    return tuple(t for t in parts if t is not None)


@torch.library.custom_op("thrifty::stac_layer", mutates_args=())
def stac_layer(x: Tensor, weight: Tensor, bias: Tensor | None, handle: int) -> tuple[Tensor, Tensor, Tensor]:
    """One training forward of the :class:`CompressedLinear` with ``handle``: ``y = x·Wᵀ + b``, the basis ``u``
    the factors were taken in, and the factors packed into one uint8 tensor (what backward keeps of ``x``).

    ``x`` (n, d) and ``weight`` (m, d) in the compute dtype (autocast already applied); returns ``y`` (n, m) in
    that dtype, ``u`` (d, r) float32 and the packed factors (their bytes, nothing added).
    """
    return _layer(handle)._encode(x, weight, bias)


@stac_layer.register_fake
def _stac_layer_fake(x: Tensor, weight: Tensor, bias: Tensor | None, handle: int) -> tuple[Tensor, Tensor, Tensor]:
    layer = _layer(handle)
    d = layer.in_features
    if x.dim() != 2 or weight.dim() != 2 or weight.shape[1] != x.shape[1] or x.shape[1] != d:
        raise ValueError(f"x: expected shape (n, {d}), got {tuple(x.shape)}")
    y = x.new_empty((x.shape[0], weight.shape[0]))
    cfg = layer.codec.config
    if cfg is None:  # planned from the first batch at run time: sizes known only then
        ctx = torch.library.get_ctx()
        r, nbytes = ctx.new_dynamic_size(), ctx.new_dynamic_size()
        return y, x.new_empty((d, r), dtype=torch.float32), x.new_empty((nbytes,), dtype=torch.uint8)
    u = x.new_empty((d, cfg.rank), dtype=torch.float32)
    parts = _kernels.compress(x, u, coef=cfg.coef, block=cfg.block, k=cfg.k, bits=cfg.bits)
    size: Any = 0
    for t in parts:
        size = size + t.numel() * t.element_size()
    return y, u, x.new_empty((size,), dtype=torch.uint8)


@torch.library.custom_op("thrifty::stac_layer_grad_weight", mutates_args=())
def stac_layer_grad_weight(grad_y: Tensor, u: Tensor, packed: Tensor, handle: int) -> Tensor:
    """``grad_W`` (m, d) float32 of the layer with ``handle`` from its packed factors (and, when due, its
    gradient-error monitor)."""
    return _layer(handle)._grad_weight(grad_y, u, packed)


@stac_layer_grad_weight.register_fake
def _stac_layer_grad_weight_fake(grad_y: Tensor, u: Tensor, packed: Tensor, handle: int) -> Tensor:
    return grad_y.new_empty((grad_y.shape[1], u.shape[0]), dtype=torch.float32)


def _layer_setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, ...]) -> None:
    _x, weight, bias, handle = inputs
    _y, u, packed = output
    ctx.save_for_backward(weight, u, packed)  # the factors, never x
    ctx.handle = handle
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.mark_non_differentiable(u, packed)


def _layer_backward(ctx: Any, grad_y: Tensor, *_unused: Any) -> tuple[Tensor | None, ...]:
    weight, u, packed = ctx.saved_tensors
    grad_x = grad_w = grad_b = None
    with torch.autocast(grad_y.device.type, enabled=False):  # a CPU backward may run inside the user's autocast
        if ctx.needs_input_grad[0]:
            grad_x = grad_y.mm(weight.to(grad_y.dtype))
        if ctx.needs_input_grad[1]:
            grad_w = stac_layer_grad_weight(grad_y, u, packed, ctx.handle).to(weight.dtype)
        if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
            grad_b = grad_y.sum(0, dtype=torch.float32).to(ctx.bias_dtype)
    return grad_x, grad_w, grad_b, None


stac_layer.register_autograd(_layer_backward, setup_context=_layer_setup_context)


# --------------------------------------------------------------------------------------------------------
# the module


def _in_backward() -> bool:
    """True while autograd runs a backward pass (a checkpointed forward being recomputed)."""
    task_id = getattr(torch._C, "_current_graph_task_id", None)
    return task_id is not None and int(task_id()) != -1


def _world() -> int:
    """Processes in the default torch.distributed group (1 when it is not initialised)."""
    dist = torch.distributed
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _share_rank0_state(codec: LayerCodec) -> Tensor:
    """Make a codec's plan and basis those of rank 0 (called on every rank when a basis was planned or refreshed).

    Ranks see different shards of the batch, so each would plan and refresh a basis of its own: the layers
    would drift apart and a checkpoint written by rank 0 would describe no other rank. The refresh schedule is
    step-based and the step counters agree, so every rank calls this at the same steps (the collectives match).
    """
    dist = torch.distributed
    plan: list[Any] = [codec.config]
    dist.broadcast_object_list(plan, src=0)
    assert codec.u is not None
    u = codec.u
    if plan[0] != codec.config:  # another layout on rank 0: take it; the basis comes with the broadcast
        codec.config = plan[0]
        u = torch.empty((codec.d, plan[0].rank), dtype=torch.float32, device=u.device)
    u = u.clone()  # a new tensor on every rank: the refresh's X·U_new (rank 0's only) is not reused
    dist.broadcast(u, src=0)
    codec.u = u
    return u


@dataclass
class LayerState:
    """What the last forward/backward of one :class:`CompressedLinear` measured (read by the report).

    Attributes
    ----------
    step : int
        Forward passes seen (recomputations inside backward are not counted).
    rows : int
        Rows ``n`` of the last batch (the input flattened over leading dimensions).
    stored_bytes : int
        Bytes of the saved factors of the last batch (coefficients, scales, packed residual).
    dense_bytes : int
        Bytes the dense input of the last batch would have taken (``n·d·itemsize``).
    eps, cos_sample, captured_energy, rel_error : float
        From the last monitored step, on ``monitor_rows`` sampled rows: ``ε = ‖G_sᵀE_s‖/‖G_sᵀX_s‖``, the
        measured cosine between ``G_sᵀX̂_s`` and ``G_sᵀX_s``, ``‖X_s U‖²/‖X_s‖²`` and ``‖E_s‖/‖X_s‖``
        (NaN until measured).
    eps_step : int
        Step at which ``eps`` was measured (-1: never).
    """

    step: int = 0
    rows: int = 0
    stored_bytes: int = 0
    dense_bytes: int = 0
    eps: float = math.nan
    cos_sample: float = math.nan
    captured_energy: float = math.nan
    rel_error: float = math.nan
    eps_step: int = -1


class CompressedLinear(nn.Module):
    """A drop-in ``nn.Linear`` that saves its input for backward as STAC-R factors.

    Parameters
    ----------
    linear : torch.nn.Linear or a Linear-like module
        The layer to wrap: an ``nn.Linear``, transformers' ``Conv1D`` (weight ``(in, out)``) or a class given to
        :func:`~thrifty.compress.register_linear`. Its weight and bias Parameters are held as they are (the same
        objects, under the module's own attribute names), so optimizers, ``state_dict`` keys and weight tying
        keep working; :meth:`to_module` hands the original module back.
    ratio : float > 1, default=8
        Target stored-bytes ratio: dense input bytes / stored bytes. The codec spends the budget on rank,
        coefficient precision and residual from the spectrum of the first batch.
    rank, residual_density, residual_bits, coef_dtype, refresh_every : optional
        Expert overrides of the plan: basis rank (1 <= rank < in_features), kept share of residual entries
        per block in (0, 1], residual bits (4 or 8), coefficient format ("fp32", "bf16", "int8"), steps
        between basis refreshes (>= 1).
    compute_budget : float > 0, default=DEFAULT_COMPUTE_BUDGET (0.25)
        Compute cap of the plan: the planned rank is at most ``max(32, compute_budget * out_features)``,
        so the per-step basis refresh and projection (~3·n·in_features·r FLOPs) stay a fixed share of the
        layer's own GEMMs (3·n·in_features·out_features); the bytes the cap frees buy bf16 coefficients.
        Fidelity floor: a layer whose capped layout predicts a gradient cosine below 0.94 on its first
        batch (too flat a spectrum for the capped rank, e.g. BERT's FFN output and early q/k/v) has the cap
        lifted and takes the cheapest layout within the byte budget that predicts 0.97 - a higher rank, or
        a top-k residual where that is cheaper (see :func:`~thrifty.compress._codec.plan_layer`).
        ``math.inf`` turns the cap off (the byte budget alone sets the rank). Ignored when ``rank`` is
        pinned.
    exact : bool, default=False
        Keep the whole activation through the same path (``U = I``, fp32 coefficients, no residual): the
        gradients equal the uncompressed layer's.
    stochastic : bool, default=False
        Stochastic rounding of the residual values (unbiased; a counter-based generator keyed by
        ``(seed, step, layer_index)``, so runs are reproducible and a checkpointed recomputation rounds alike).
    seed : int, default=0
        Seeds stochastic rounding and the monitor's row sampling (with ``layer_index``).
    layer_index : int, default=0
        Index of the layer in its model (part of the rounding key).

    Attributes
    ----------
    weight, bias : Parameter
        The wrapped layer's parameters.
    codec : LayerCodec
        Basis, plan and refresh policy.
    monitor_rows : int, default=32
        Rows sampled for the gradient-error estimate (0 turns the monitor off).
    monitor_every : int, default=16
        Monitor every this many steps (steps 1, 1 + monitor_every, ...). Every step cost ~15% of a CPU
        training step of the benchmark GPT in small-tensor overhead (17 layers); ε drifts slowly.
    state : LayerState
        What the last step measured.
    weight_layout : {"out_in", "in_out"}
        How the wrapped module stores its weight (``"in_out"`` for ``Conv1D``); :meth:`weight_matrix` gives the
        ``(out_features, in_features)`` view either way.

    Notes
    -----
    Input: any shape ``(..., in_features)``, float32 / bfloat16 / float16 on the weight's device; under
    ``torch.autocast`` the layer computes in the autocast dtype like ``nn.Linear``. Raises TypeError for a
    non-float input and ValueError for a wrong last dimension or an input on another device than the weight.
    Under ``torch.compile`` each layer is one opaque op, ``thrifty::stac_layer`` (fake and autograd
    registrations; its backward another op, ``thrifty::stac_layer_grad_weight``): the host-side policy (planning,
    refresh, accounting, the monitor) runs inside it, so a planned layer adds no graph break (``fullgraph=True``
    works). The planning step (the first batch, unless ``stac_r(plan=...)`` planned it) runs eagerly, and the
    graph is recompiled once with the plan's static factor sizes.
    Under DDP or FSDP2 (``torch.distributed`` initialised, more than one process) each rank sees its own shard
    of the batch; whenever a layer plans or refreshes its basis, rank 0's plan and basis are broadcast to the
    others (one small collective per refresh), so every rank encodes alike and a checkpoint describes them all.
    Before its first training step the ``state_dict`` holds only ``weight`` and ``bias`` (the keys of the wrapped
    Linear). From then on it also holds ``_extra_state``: the STAC-R state (plan, tracked basis, step counters,
    the monitor's generator) as one uint8 tensor, so a checkpoint (``torch.save``, safetensors, transformers'
    ``Trainer``) resumes with the same next step. A state_dict without it loads too (also with ``strict=True``),
    leaving the layer's STAC-R state as it is (a fresh layer plans from its next batch).

    Examples
    --------
    >>> import torch
    >>> from thrifty.compress import CompressedLinear
    >>> _ = torch.manual_seed(0)
    >>> lin = torch.nn.Linear(64, 32)
    >>> layer = CompressedLinear(lin, exact=True)
    >>> x = torch.randn(4, 10, 64)
    >>> layer(x).sum().backward()
    >>> ref = x.reshape(-1, 64).t() @ torch.ones(40, 32)
    >>> bool(torch.allclose(lin.weight.grad, ref.t(), atol=1e-5))
    True
    >>> layer.weight is lin.weight
    True
    """

    in_features: int
    out_features: int
    weight: nn.Parameter  # under the wrapped module's own names (``weight``/``bias`` for nn.Linear and Conv1D)
    bias: nn.Parameter | None

    def __init__(
        self,
        linear: nn.Module,
        ratio: float = 8.0,
        *,
        rank: int | None = None,
        residual_density: float | None = None,
        residual_bits: int | None = None,
        coef_dtype: str | None = None,
        refresh_every: int | None = None,
        compute_budget: float | None = None,
        exact: bool = False,
        stochastic: bool = False,
        seed: int = 0,
        layer_index: int = 0,
        name: str = "linear",
    ) -> None:
        super().__init__()
        adapter = _checks.check_linear(name, linear)
        where = "" if name == "linear" else f" (layer {name!r})"
        d, m = adapter.features(linear)
        overrides: dict[str, Any] = {
            "rank": _checks.check_rank(rank, d, where),
            "residual_density": _checks.check_density(residual_density, where),
            "residual_bits": _checks.check_bits(residual_bits, where),
            "coef_dtype": _checks.check_coef_dtype(coef_dtype, where),
            "refresh_every": _checks.check_refresh_every(refresh_every, where),
        }
        overrides = {key: value for key, value in overrides.items() if value is not None}
        budget = _checks.check_compute_budget(compute_budget, where)
        self.compute_budget = DEFAULT_COMPUTE_BUDGET if budget is None else budget
        ratio_value = _checks.check_ratio(ratio)
        self.exact = _checks.check_bool("exact", exact)
        self.stochastic = _checks.check_bool("stochastic", stochastic)
        self.seed = _checks.check_seed(seed)
        if isinstance(layer_index, bool) or not isinstance(layer_index, int) or layer_index < 0:
            raise ValueError(f"layer_index: expected an int >= 0, got {layer_index!r}")
        if self.exact and overrides:
            raise ValueError(f"exact: cannot be combined with {', '.join(sorted(overrides))}{where}")
        self.in_features = d
        self.out_features = m
        self.weight_layout = adapter.layout
        self._adapter = adapter
        # the wrapped module's own Parameters under its own names: same state_dict keys, weight tying kept
        self.register_parameter(adapter.weight, adapter.weight_of(linear))
        if adapter.bias is not None:
            self.register_parameter(adapter.bias, adapter.bias_of(linear))
        self.__dict__["_original"] = linear  # not a submodule: unwrap() hands it back with these Parameters
        self.ratio = ratio_value
        self.overrides = overrides
        self.layer_index = layer_index
        codec_overrides: dict[str, Any] = {_CODEC_KEYS[key]: value for key, value in overrides.items()}
        if self.stochastic and not self.exact:
            codec_overrides["stochastic"] = True
        if not self.exact and "rank" not in overrides:
            codec_overrides.update(compute_cap(self.compute_budget, m))
        self.codec = LayerCodec(
            d, None, None if self.exact else ratio_value, seed=self.seed, layer_index=layer_index,
            overrides=codec_overrides, exact=self.exact,
        )  # fmt: skip
        self.monitor_rows = 32
        self.monitor_every = 16
        self.state = LayerState()
        self._sampler = torch.Generator().manual_seed(self.seed * 1_000_003 + layer_index)
        self._owed_step = False  # the last forward ran without grad (reentrant checkpointing's first pass)
        self._recomputing = False  # the current forward is a checkpointed rerun (no step, no accounting)
        self._pending: tuple[tuple[int, int], Any] | None = None  # the monitor's sample, awaiting its gradient
        self._register()

    def _register(self) -> None:
        """A handle of its own in the layer table the ops read (a copy or an unpickled layer gets a new one)."""
        self._handle = next(_HANDLES)
        _LAYERS[self._handle] = self

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # type: ignore[no-untyped-call]
        self._register()

    # ---- checkpoints: the STAC-R state rides in the state_dict as one uint8 tensor (safetensors-friendly) ----
    def get_extra_state(self) -> Tensor:
        """The layer's STAC-R state serialized into a uint8 tensor (see the Notes of the class)."""
        state = {
            "version": 1, "codec": self.codec.state(), "layer": dataclasses.asdict(self.state),
            "sampler": self._sampler.get_state(),
        }  # fmt: skip
        buf = io.BytesIO()
        torch.save(state, buf)
        return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)

    def set_extra_state(self, state: Any) -> None:
        """Restore what :meth:`get_extra_state` returned; ValueError for anything else."""
        if not isinstance(state, Tensor) or state.dtype != torch.uint8 or state.dim() != 1:
            raise ValueError("state_dict: '_extra_state' of a CompressedLinear must be the uint8 tensor it saved")
        try:
            data = torch.load(io.BytesIO(state.cpu().numpy().tobytes()), weights_only=True)
            if data.get("version") != 1:
                raise ValueError(f"unknown version {data.get('version')!r}")
            self.codec.load_state(data["codec"])
            self.state = LayerState(**data["layer"])
            self._sampler.set_state(data["sampler"])
        except (RuntimeError, KeyError, TypeError, AttributeError, EOFError, pickle.UnpicklingError) as exc:
            raise ValueError(f"state_dict: unreadable STAC-R state in '_extra_state' ({exc})") from exc

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self.state.step == 0:  # nothing learnt yet: the wrapped Linear's keys only
            destination.pop(prefix + "_extra_state", None)

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str]) -> None:  # fmt: skip
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
        key = prefix + "_extra_state"
        if key in missing_keys:  # a plain Linear's checkpoint (or one saved before training): the state stays
            missing_keys.remove(key)

    def extra_repr(self) -> str:
        mode = "exact" if self.exact else f"ratio={self.ratio:g}"
        kind = "" if type(self.__dict__["_original"]) is nn.Linear else f"{type(self.__dict__['_original']).__name__}, "
        return (f"{kind}in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self._bias() is not None}, {mode}")  # fmt: skip

    @property
    def config(self) -> LayerConfig | None:
        """The codec's current plan (None before the first forward in budget mode)."""
        cfg: LayerConfig | None = self.codec.config
        return cfg

    def to_module(self) -> nn.Module:
        """The wrapped module (an ``nn.Linear``, a ``Conv1D``, ...) holding this layer's Parameter objects."""
        original: nn.Module = self.__dict__["_original"]
        original.register_parameter(self._adapter.weight, self._weight())
        if self._adapter.bias is not None:
            original.register_parameter(self._adapter.bias, self._bias())
        original.train(self.training)
        return original

    def _weight(self) -> nn.Parameter:
        w: nn.Parameter = self._parameters[self._adapter.weight]  # type: ignore[assignment]
        return w

    def _bias(self) -> nn.Parameter | None:
        return None if self._adapter.bias is None else self._parameters[self._adapter.bias]

    def weight_matrix(self) -> Tensor:
        """The weight as an ``(out_features, in_features)`` tensor (a transposed view for ``in_out`` layouts)."""
        w = self._weight()
        return w if self.weight_layout == "out_in" else w.t()

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        """``y = x·Wᵀ + b`` for ``x`` (..., in_features); returns (..., out_features).

        ``x`` is the single positional argument (or what the registered adapter picks, see
        :func:`~thrifty.compress.register_linear`).
        """
        x = self._adapter.input(args, kwargs)
        weight: Tensor = self.weight_matrix()
        _checks.check_input(x, weight)
        lead = x.shape[:-1]
        x2d = x.reshape(-1, self.in_features)
        bias: Tensor | None = self._bias()
        dev = x.device.type
        if torch.is_autocast_enabled(dev):
            dt = torch.get_autocast_dtype(dev)
            x2d, weight = x2d.to(dt), weight.to(dt)
            bias = None if bias is None else bias.to(dt)
        elif x.dtype != weight.dtype:
            raise TypeError(
                f"x: dtype {_checks.dtype_name(x.dtype)} does not match the layer's weight dtype "
                f"{_checks.dtype_name(weight.dtype)} (cast the input or use torch.autocast)"
            )
        if x2d.shape[0] == 0 or not (torch.is_grad_enabled() and weight.requires_grad):
            # nothing to compress: no rows, or no weight gradient (inference, frozen weight) - which is the only
            # consumer of the saved input; the policy (steps, refreshes) does not advance either. A no-grad
            # forward of a trainable layer may be reentrant checkpointing's first pass: its recomputation in
            # backward is then this batch's only compressed forward and takes the step (see _prepare)
            self._owed_step = x2d.shape[0] > 0 and self._weight().requires_grad and not torch.is_grad_enabled()
            return F.linear(x2d, weight, bias).reshape(*lead, self.out_features)
        if self.codec.config is None:  # the first batch plans the layout: only then are the factor sizes known
            y2d = self._planning_forward(x2d, weight, bias)
        else:
            y2d = stac_layer(x2d, weight, bias, self._handle)[0]  # one op: no graph break under torch.compile
        assert isinstance(y2d, Tensor)
        return y2d.reshape(*lead, self.out_features)

    @torch.compiler.disable  # type: ignore[untyped-decorator]
    def _planning_forward(self, x2d: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """The planning step, eager even under torch.compile (the graph is recompiled once with the plan's
        static sizes; a plan from :func:`~thrifty.compress.predict` or one eager step avoids the break)."""
        y2d: Tensor = stac_layer(x2d, weight, bias, self._handle)[0]
        return y2d

    def _encode(self, x2d: Tensor, weight: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """The body of ``thrifty::stac_layer`` (eager, also under torch.compile): policy, encode, account."""
        with torch.autocast(x2d.device.type, enabled=False):  # the basis, planning and factors stay in fp32
            u, xu, seed = self._prepare(x2d)
            cfg = self.codec.config
            assert cfg is not None
            y = F.linear(x2d, weight, bias)
            parts = tuple(_kernels.compress(
                x2d, u, coef=cfg.coef, block=cfg.block, k=cfg.k, bits=cfg.bits, stochastic=cfg.stochastic,
                seed=seed, xu=xu,
            ))  # fmt: skip
            packed = _pack(parts)
            if not self._recomputing:
                self._account(x2d, parts)
                if self._monitor_due():
                    self._monitor(x2d, u, parts, cfg)
        return y, u, packed

    def _grad_weight(self, grad_y: Tensor, u: Tensor, packed: Tensor) -> Tensor:
        """The body of ``thrifty::stac_layer_grad_weight``: ``Gᵀ·X̂`` from the packed factors (+ the monitor)."""
        cfg = self.codec.config
        assert cfg is not None
        n = grad_y.shape[0]
        c, c_scale, vals, idx, scales = _unpack(packed, n, self.in_features, cfg)
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] == (u.data_ptr(), n):
            pending[1](grad_y)  # the monitored forward's gradient arrived
        else:
            self._pending = pending  # another forward's backward (the monitored one is still to come)
        return _kernels.grad_weight(
            grad_y, u, c, c_scale, vals, idx, scales, d=self.in_features, block=cfg.block, bits=cfg.bits
        )

    def _prepare(self, x2d: Tensor) -> tuple[Tensor, Tensor | None, int]:
        """Basis, reusable projection ``x·u`` and rounding key for this batch.

        Host-side policy (planning, refresh schedule, step counting), run inside ``thrifty::stac_layer``.
        A forward rerun inside backward (``torch.utils.checkpoint``) reuses the current basis without
        counting a step or refreshing, so the recomputed factors use the same basis and rounding key.
        """
        codec = self.codec
        # a rerun inside backward repeats a forward that already took its step - unless that forward ran
        # without grad (reentrant checkpointing), in which case this is the batch's step
        recompute = _in_backward() and not self._owed_step
        self._owed_step = False
        self._recomputing = recompute
        before = (codec.config, codec.u)
        u = codec.basis_for(x2d, advance=not recompute)
        if not recompute and (codec.config is not before[0] or codec.u is not before[1]) and _world() > 1:
            u = _share_rank0_state(codec)  # DDP/FSDP: every rank encodes with rank 0's plan and basis
        xu = codec.projection_for(x2d, u)  # X·U_new from this batch's refresh: saves the encoder's GEMM
        if not recompute:
            self.state.step += 1
        seed = codec.rounding_seed() if codec.stochastic else 0
        return u, xu, seed

    def _account(self, x2d: Tensor, parts: tuple[Tensor, ...]) -> None:
        st = self.state
        st.rows = int(x2d.shape[0])
        st.dense_bytes = st.rows * self.in_features * x2d.element_size()
        st.stored_bytes = sum(int(t.numel()) * t.element_size() for t in parts)

    def _monitor_due(self) -> bool:
        return self.monitor_rows > 0 and self.monitor_every > 0 and (self.state.step - 1) % self.monitor_every == 0

    def _monitor(self, x2d: Tensor, u: Tensor, parts: tuple[Tensor, ...], cfg: LayerConfig) -> None:
        """Keep ``s`` sampled rows of X and E = X − X̂; measure ε on them when the output's gradient arrives
        (in ``thrifty::stac_layer_grad_weight``)."""
        n, d = x2d.shape
        s = min(self.monitor_rows, n)
        rows = torch.randperm(n, generator=self._sampler)[:s].to(x2d.device)
        c, c_scale, vals, idx, scales = parts
        dev = x2d.device.type
        with torch.no_grad(), torch.autocast(dev, enabled=False):
            xs = x2d.index_select(0, rows).to(torch.float32)
            cs = c_scale.index_select(0, rows) if c_scale.numel() else c_scale
            xhat = _kernels.decompress(
                u, c.index_select(0, rows), cs, vals.index_select(0, rows), idx.index_select(0, rows),
                scales.index_select(0, rows), d=d, block=cfg.block, bits=cfg.bits,
            )  # fmt: skip
            es = xs - xhat
            # float64 norms: a finite but huge batch (|x| ~ 1e18) would overflow float32 squares
            total = torch.linalg.vector_norm(xs, dtype=torch.float64)
            captured = torch.linalg.vector_norm(xs @ u, dtype=torch.float64) ** 2 / torch.clamp(total**2, min=1e-300)
            rel = torch.linalg.vector_norm(es, dtype=torch.float64) / torch.clamp(total, min=1e-300)
        state = self.state
        step = state.step
        both = torch.cat([xs, es], dim=1).to(torch.float64)

        def measure(grad: Tensor) -> None:
            with torch.no_grad(), torch.autocast(dev, enabled=False):
                gs = grad.detach().index_select(0, rows).to(torch.float64)
                prod = gs.t() @ both  # one small GEMM: [G_sᵀX_s | G_sᵀE_s] (float64: ε and cos to ~1e-15)
                g, delta = prod[:, :d], prod[:, d:]
                gnorm = float(torch.linalg.vector_norm(g))
                ghat = g - delta
                if gnorm > 0.0:
                    state.eps = float(torch.linalg.vector_norm(delta)) / gnorm
                    hn = float(torch.linalg.vector_norm(ghat))
                    state.cos_sample = float((ghat * g).sum()) / (hn * gnorm) if hn > 0 else 0.0
                else:
                    state.eps, state.cos_sample = 0.0, 1.0
                state.captured_energy = float(captured)
                state.rel_error = float(rel)
                state.eps_step = step

        self._pending = ((u.data_ptr(), n), measure)

