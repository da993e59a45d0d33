"""GaLore under STAC-R, and "Turbo": the two share the subspace work and the projected weight gradient.

GaLore (Zhao et al., ICML 2024) keeps a weight's optimizer state in a rank-``r`` projection of its gradient:
every ``update_proj_gap`` steps it takes the SVD of the full gradient ``grad_W`` (m, d) and keeps ``P``, the
top-``r`` right singular vectors (``P`` (r, d), ``low = grad_W·Pᵀ``, used when m >= d) or left singular
vectors (``P`` (m, r), ``low = Pᵀ·grad_W``, when m < d); Adam runs on ``low`` and the normalised update is
projected back (``·P`` or ``P·``) and scaled. :class:`GaLoreProjector` and :class:`GaLoreAdamW` reimplement
the authors' projector (``galore_torch/galore_projector.py``, ``proj_type="std"``, plus ``"left"`` and
``"right"``) and AdamW loop in this package, without depending on ``galore-torch``.

Under STAC-R the weight gradient of a compressed Linear is ``grad_W = (Gᵀ·deq(C))·Uᵀ + Gᵀ·R`` from the
saved factors (G (n, m) the output gradient, C (n, r_s) the coefficients in the tracked basis U (d, r_s), R
the sparse residual). GaLore only needs the *projection* of that gradient, which the factors give without
ever forming the (m, d) gradient:

- left projection ``Pᵀ·grad_W = (G·P)ᵀ·X̂``: project the output gradient first (n·m·r) and run the STAC-R
  weight-gradient kernel on the (n, r) result - an (r, d) product instead of an (m, d) one;
- right projection ``grad_W·Pᵀ = Gᵀ·(X̂·Pᵀ)`` with ``X̂·Pᵀ = deq(C)·(Uᵀ·Pᵀ) + R·Pᵀ``: a (r_s, r) product, a
  sparse gather of ``nnz(R)`` rows of ``Pᵀ`` and one (m, n)·(n, r) GEMM.

and the subspace refresh can reuse STAC-R's basis: since ``grad_W ≈ (Gᵀ·deq(C))·Uᵀ`` with orthonormal U,
the singular vectors of ``grad_W`` restricted to span(U) come from the SVD of the small (m, r_s) matrix
``Gᵀ·deq(C)`` (right: ``P = (U·V_r)ᵀ``; left: ``P = A_r``), taken in backward on the batch STAC-R just
compressed, instead of an SVD of the full (m, d) gradient (``refresh="shared"``; when STAC-R's rank r_s is
below GaLore's rank that layer's refresh falls back to the SVD of the gradient, formed in backward). ``refresh="svd"`` keeps
GaLore's own refresh exactly: on refresh steps the layer hands the full gradient to the optimizer, which
takes its SVD; between refreshes only the projection is formed (the two paths then give the same update).

:func:`galore_turbo` turns a model's :class:`CompressedLinear` layers into :class:`TurboLinear` layers (same
Parameters, same codec) and returns the :class:`GaLoreAdamW` optimizer that reads their projected gradients
from ``TurboLinear.low`` (a small leaf tensor whose ``.grad`` autograd accumulates). Eager mode only (the
Turbo backward is a ``torch.autograd.Function``).

Shared refresh schedule (``share_schedule``, default ``"auto"`` = ``"right"`` with ``refresh="shared"``):
a right-projected layer (m >= d) only ever hands Adam ``grad_W·Pᵀ = Gᵀ·(X·Pᵀ)``, and the shared refresh
puts ``Pᵀ = U·V_r`` inside span(U). If STAC-R's basis U is then kept until GaLore's next refresh (it is
refreshed in the forward of GaLore's refresh steps only), every batch in between is encoded in the very U
that P lies in, so ``X·Pᵀ = (X·U)·V_r``: the part of X outside span(U) - what ages as U gets older, and
what the residual R carries - contributes nothing to the projected gradient. The projection is exact up to
the coefficient quantisation however old U is, so such layers skip the per-batch subspace iteration and
store no residual (whose ``R·Pᵀ`` would only add its own quantisation noise); between refreshes they
even encode X in ``Pᵀ`` itself (r <= r_s coefficients: less compute, fewer bytes; the refresh steps, which
need ``Gᵀ·deq(C)`` in U for the new P, keep r_s). A left-projected layer (m < d) needs ``(G·P)ᵀ·X̂``,
the whole of X̂: an aged basis does lose fidelity there, so it keeps its codec's refresh (per batch by
default) and residual. A layer whose STAC-R rank is below GaLore's (P cannot lie in span(U)) also keeps
them. Measured (``benches/galore_turbo.py --fidelity``, GPT d=128, gap 50, 200 steps): cosine of the
projected gradient to the exact one (same P, uncompressed X), mean/min over steps - right-projected layers
0.99975/0.995 per-batch refresh vs 0.99999/0.9999 shared; left-projected 0.986/0.93 per batch vs
0.888/0.53 with the basis aged as well (``share_schedule="all"``).

Projection side (``galore_turbo(proj_type="auto")``, the default): GaLore's "std" rule projects a weight
with m < d (e.g. an MLP's down projection, d = 4·m) on the left, so Turbo would have to keep that layer's
per-batch STAC-R refresh (three (n, d)·(d, r_s) GEMMs and a QR in every forward: on GPT-2-medium-width CPU
runs ~16% of the Turbo step, the largest cost Turbo still paid, see ``benches/galore_turbo.py --profile``).
"auto" projects such a layer on the right instead when it can share (STAC-R rank >= GaLore rank) and the
right layout's optimizer state, Adam moments (m, r) + P (r, d), is within 1% of the left one's, moments
(r, d) + P (m, r) - for m < d it is smaller. The layer then gets the exact, refresh-free right projection
above. This changes GaLore's choice of side for those layers (galore_torch offers ``proj_type="right"``),
so the benchmark also compares with STAC-R + GaLore projecting them on the right (``unshared-right``).
Measured (``--fidelity``, gap 50): cosine to the exact projected gradient of the flipped layers, mean/min -
width 128, fc2: 1.00000/1.000 vs 0.986/0.932 for unshared STAC-R + GaLore (left); width 384, fc2 and head:
1.00000/1.000 vs 0.9955/0.982 and 0.9984/0.995; final validation losses within the data-order noise of
unshared (+0.0002 at width 128, -0.019 at 384, equal to ``unshared-right``'s).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from thrifty.compress import _kernels
from thrifty.compress._codec import residual_codes
from thrifty.compress._linear import CompressedLinear, _in_backward

__all__ = ["GaLoreAdamW", "GaLoreProjector", "TurboLinear", "galore_turbo"]

_PROJ_TYPES = ("std", "left", "right")
_REFRESH = ("svd", "shared")
_SCHEDULES = ("auto", "right", "all", "none")


def _check_int(name: str, v: object, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    if v < lo:
        raise ValueError(f"{name}: must be >= {lo}, got {v}")
    return v


def _check_grad(grad: object) -> Tensor:
    """``grad`` as given when it is a 2-D floating tensor; ``TypeError``/``ValueError`` naming it otherwise."""
    if not isinstance(grad, Tensor):
        raise TypeError(f"grad: expected a Tensor, got {type(grad).__name__}")
    if not grad.is_floating_point():
        raise TypeError(f"grad: expected a floating-point tensor, got {grad.dtype}")
    if grad.dim() != 2:
        raise ValueError(f"grad: GaLore projects 2-D (m, d) gradients, got shape {tuple(grad.shape)}")
    return grad


def _check_float(name: str, v: object, lo: float, hi: float = math.inf, *, open_hi: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name}: expected a number, got {type(v).__name__}")
    f = float(v)
    if not math.isfinite(f) or f < lo or (f >= hi if open_hi else f > hi):
        bound = f"[{lo}, {hi})" if open_hi else f"[{lo}, {hi}]"
        raise ValueError(f"{name}: must be in {bound}, got {v}")
    return f


class GaLoreProjector:
    """GaLore's gradient projector for one (m, d) weight (a faithful reimplementation of galore_torch's).

    Parameters
    ----------
    rank : int >= 1
        Projection rank r (clipped to min(m, d) at the first refresh).
    update_proj_gap : int >= 1, default=200
        Refresh (SVD of the gradient) when ``step % update_proj_gap == 0``.
    scale : float, default=1.0
        Multiplies the projected-back update.
    proj_type : {"std", "left", "right"}, default="std"
        "std": right projection when m >= d, left otherwise (GaLore's default); "left"/"right": always.

    Attributes
    ----------
    ortho : Tensor | None
        ``P``: (r, d) for a right projection, (m, r) for a left one (float32).
    side : {"left", "right"} | None
        The side chosen at the first projection.
    refreshes : int
        SVDs taken so far.
    """

    def __init__(self, rank: int, update_proj_gap: int = 200, scale: float = 1.0, proj_type: str = "std") -> None:
        self.rank = _check_int("rank", rank, 1)
        self.update_proj_gap = _check_int("update_proj_gap", update_proj_gap, 1)
        self.scale = _check_float("scale", scale, -math.inf)
        if proj_type not in _PROJ_TYPES:
            raise ValueError(f"proj_type: must be one of {_PROJ_TYPES}, got {proj_type!r}")
        self.proj_type = proj_type
        self.ortho: Tensor | None = None
        self.side: str | None = None
        self.refreshes = 0

    def side_for(self, m: int, d: int) -> str:
        """The projection side GaLore uses for an (m, d) gradient."""
        if self.proj_type == "std":
            return "right" if m >= d else "left"
        return self.proj_type

    def due(self, step: int) -> bool:
        """Whether the projector refreshes at ``step`` (GaLore: no basis yet, or ``step % gap == 0``)."""
        return self.ortho is None or step % self.update_proj_gap == 0

    @torch.no_grad()
    def refresh(self, grad: Tensor) -> None:
        """New ``P`` from the SVD of the full (m, d) gradient (float32); ``ValueError`` for NaN/inf."""
        g = _check_grad(grad).detach().to(torch.float32)
        if not bool(torch.isfinite(g).all()):
            raise ValueError("grad: contains NaN or infinity (the projector's SVD needs finite values)")
        side = self.side_for(g.shape[0], g.shape[1])
        u, _s, vh = torch.linalg.svd(g, full_matrices=False)
        r = min(self.rank, vh.shape[0])
        self.ortho = (vh[:r, :] if side == "right" else u[:, :r]).contiguous()
        self.side = side
        self.refreshes += 1

    def set_basis(self, ortho: Tensor, side: str) -> None:
        """Install ``P`` computed elsewhere (the shared refresh)."""
        self.ortho = ortho.detach().to(torch.float32).contiguous()
        self.side = side
        self.refreshes += 1

    def project(self, grad: Tensor, step: int) -> Tensor:
        """``low``: (m, r) = grad·Pᵀ (right) or (r, d) = Pᵀ·grad (left); refreshes P first when due.

        ``TypeError``/``ValueError`` naming ``grad`` (not a 2-D floating tensor, another shape than the
        basis was made for) or ``step`` (not an int >= 0)."""
        _check_grad(grad)
        if isinstance(step, bool) or not hasattr(step, "__index__"):
            raise TypeError(f"step: expected an int, got {type(step).__name__}")
        step = _check_int("step", operator.index(step), 0)  # NumPy and 0-d integer tensors too
        if self.due(step):
            self.refresh(grad)
        assert self.ortho is not None
        along = grad.shape[1] if self.side == "right" else grad.shape[0]
        if along != self.ortho.shape[1 if self.side == "right" else 0]:
            raise ValueError(
                f"grad: shape {tuple(grad.shape)} does not match the basis {tuple(self.ortho.shape)} made for "
                f"the {self.side} side"
            )
        g = grad.to(torch.float32)
        return g @ self.ortho.t() if self.side == "right" else self.ortho.t() @ g

    def project_back(self, low: Tensor) -> Tensor:
        """The full-shape update ``scale · (low·P)`` (right) or ``scale · (P·low)`` (left)."""
        if self.ortho is None:
            raise RuntimeError("project_back: project() was never called")
        full = low @ self.ortho if self.side == "right" else self.ortho @ low
        return full * self.scale


class GaLoreAdamW(torch.optim.Optimizer):
    """AdamW with GaLore projection for the parameter groups that carry ``rank`` (galore_torch's AdamW).

    Parameters
    ----------
    params : iterable of Parameters or of dicts (param groups)
        Groups with a ``"rank"`` key (and optional ``"update_proj_gap"``, ``"scale"``, ``"proj_type"``) are
        projected; their parameters must be 2-D. Others run plain AdamW.
    lr : float >= 0, default=1e-3
    betas : (float, float) in [0, 1), default=(0.9, 0.999)
    eps : float >= 0, default=1e-6
    weight_decay : float >= 0, default=0.0
        Decoupled: ``p -= lr · weight_decay · p`` after the update (as galore_torch).
    correct_bias : bool, default=True

    Notes
    -----
    Projected parameters of :class:`TurboLinear` layers (made by :func:`galore_turbo`) deliver their gradient
    already projected in ``layer.low.grad``; the optimizer uses it as GaLore's ``low`` and, on the layer's
    refresh steps, takes the full gradient from ``p.grad`` (``refresh="svd"``) or the basis the layer set in
    backward (``refresh="shared"``). The step is a Python loop over parameters (Ctrl-C interrupts it).

    Raises
    ------
    TypeError / ValueError naming the argument for bad hyper-parameters or a non-2-D projected parameter.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        correct_bias: bool = True,
    ) -> None:
        _check_float("lr", lr, 0.0)
        if not (isinstance(betas, tuple) and len(betas) == 2):
            raise TypeError(f"betas: expected a tuple of two floats, got {betas!r}")
        _check_float("betas[0]", betas[0], 0.0, 1.0, open_hi=True)
        _check_float("betas[1]", betas[1], 0.0, 1.0, open_hi=True)
        _check_float("eps", eps, 0.0)
        _check_float("weight_decay", weight_decay, 0.0)
        if not isinstance(correct_bias, bool):
            raise TypeError(f"correct_bias: expected a bool, got {type(correct_bias).__name__}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "correct_bias": correct_bias}
        super().__init__(params, defaults)
        self._turbo: dict[Tensor, TurboLinear] = {}
        for group in self.param_groups:
            if "rank" in group:
                _check_int("rank", group["rank"], 1)
                group.setdefault("update_proj_gap", 200)
                group.setdefault("scale", 1.0)
                group.setdefault("proj_type", "std")
                _check_int("update_proj_gap", group["update_proj_gap"], 1)
                for p in group["params"]:
                    if p.dim() != 2:
                        raise ValueError(f"params: GaLore groups need 2-D parameters, got shape {tuple(p.shape)}")

    def _projector(self, group: dict[str, Any], p: Tensor) -> GaLoreProjector:
        state = self.state[p]
        layer = self._turbo.get(p)
        if layer is not None:
            state["projector"] = layer.projector
        elif "projector" not in state:
            state["projector"] = GaLoreProjector(
                group["rank"], update_proj_gap=group["update_proj_gap"], scale=group["scale"],
                proj_type=group["proj_type"],
            )  # fmt: skip
        proj: GaLoreProjector = state["projector"]
        return proj

    def _low_grad(self, group: dict[str, Any], p: Tensor, step: int) -> Tensor | None:
        """GaLore's projected gradient of p at this step (None: no gradient)."""
        proj = self._projector(group, p)
        layer = self._turbo.get(p)
        if layer is None:
            return None if p.grad is None else proj.project(p.grad, step)
        if p.grad is not None:  # the layer handed the full gradient (refresh="svd" refresh step)
            low = proj.project(p.grad, step)
            if layer.low.grad is not None:
                raise RuntimeError("internal error: a TurboLinear produced both a full and a projected gradient")
            return low
        return None if layer.low.grad is None else layer.low.grad.to(torch.float32)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One optimisation step (GaLore projection for the groups with ``rank``)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                if "step" not in state:
                    state["step"] = 0
                if "rank" in group:
                    grad = self._low_grad(group, p, state["step"])
                else:
                    grad = None if p.grad is None else p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("GaLoreAdamW does not support sparse gradients")
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(grad)
                    state["exp_avg_sq"] = torch.zeros_like(grad)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                denom = exp_avg_sq.sqrt().add_(group["eps"])
                step_size = group["lr"]
                if group["correct_bias"]:
                    step_size = step_size * math.sqrt(1.0 - beta2 ** state["step"]) / (1.0 - beta1 ** state["step"])
                norm_grad = exp_avg / denom
                if "rank" in group:
                    norm_grad = state["projector"].project_back(norm_grad)
                p.add_(norm_grad.to(p.dtype), alpha=-step_size)
                if group["weight_decay"] > 0.0:
                    p.add_(p, alpha=-group["lr"] * group["weight_decay"])
                layer = self._turbo.get(p)
                if layer is not None:
                    layer.next_step(state["step"])
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients, including the projected ones of Turbo layers."""
        super().zero_grad(set_to_none=set_to_none)
        for layer in self._turbo.values():
            if layer.low.grad is not None:
                if set_to_none:
                    layer.low.grad = None
                else:
                    layer.low.grad.zero_()

    def state_bytes(self) -> int:
        """Bytes of the optimizer state: Adam moments and the projection matrices."""
        total = 0
        seen: set[int] = set()
        for st in self.state.values():
            for v in st.values():
                tensors = [v] if isinstance(v, Tensor) else [v.ortho] if isinstance(v, GaLoreProjector) else []
                for t in tensors:
                    if isinstance(t, Tensor) and id(t) not in seen:
                        seen.add(id(t))
                        total += t.numel() * t.element_size()
        return total


# --------------------------------------------------------------------------------------------------------
# Turbo


def _residual_values(vals: Tensor, scales: Tensor, bits: int, k: int) -> Tensor:
    """Dequantized residual values (n, nb, k) float32 (value = q · block scale)."""
    q = residual_codes(vals, bits)[..., :k]  # an odd int4 k leaves one unused nibble per block
    return q * scales.to(torch.float32)[..., None]


def project_from_factors(
    g: Tensor,
    u: Tensor,
    factors: tuple[Tensor, ...],
    ortho: Tensor,
    side: str,
    *,
    d: int,
    block: int,
    bits: int,
) -> Tensor:
    """GaLore's projected weight gradient computed from the STAC-R factors, never forming ``Gᵀ·X̂``.

    Parameters
    ----------
    g : Tensor (n, m)
        Output gradient of the Linear (flattened).
    u : Tensor (d, r_s) float32
        The STAC-R basis the factors were encoded in.
    factors : (c, c_scale, vals, idx, scales)
        As returned by ``thrifty.compress._kernels.compress``.
    ortho : Tensor
        GaLore's ``P``: (r, d) for ``side="right"``, (m, r) for ``side="left"``.
    side : {"left", "right"}
    d, block, bits : int
        Width and residual layout of the factors.

    Returns
    -------
    Tensor float32: (m, r) ``= Gᵀ·X̂·Pᵀ`` (right) or (r, d) ``= Pᵀ·Gᵀ·X̂`` (left).
    """
    c, c_scale, vals, idx, scales = factors
    g32 = g.to(torch.float32)
    if side == "left":
        gp = g32 @ ortho  # (n, r): the output gradient projected first
        out: Tensor = _kernels.grad_weight(gp, u, c, c_scale, vals, idx, scales, d=d, block=block, bits=bits)
        return out
    coef = c.to(torch.float32) * c_scale[:, None] if c.dtype == torch.int8 else c.to(torch.float32)
    pt = ortho.t()  # (d, r)
    z = coef @ (u.t() @ pt)  # deq(C)·(Uᵀ·Pᵀ): (n, r)
    k = idx.shape[-1]
    if k > 0 and idx.numel() > 0:
        n, nb, _ = idx.shape
        cols = (idx.to(torch.long) + (torch.arange(nb, device=idx.device) * block)[:, None]).reshape(n, nb * k)
        v = _residual_values(vals, scales, bits, k).reshape(n, nb * k)
        z = z + torch.einsum("nj,njr->nr", v, pt[cols])  # R·Pᵀ: a gather of nnz(R) rows of Pᵀ
    return g32.t() @ z


def shared_basis(g: Tensor, u: Tensor, factors: tuple[Tensor, ...], rank: int, side: str) -> Tensor:
    """The GaLore projector from STAC-R's basis: SVD of the small (m, r_s) matrix ``Gᵀ·deq(C)``.

    ``grad_W ≈ (Gᵀ·deq(C))·Uᵀ`` with orthonormal ``U``; with ``Gᵀ·deq(C) = A·S·Vᵀ`` its top singular
    vectors are ``A`` (left) and ``U·V`` (right). Returns ``P`` ((r, d) right, (m, r) left), float32.
    """
    c, c_scale = factors[0], factors[1]
    coef = c.to(torch.float32) * c_scale[:, None] if c.dtype == torch.int8 else c.to(torch.float32)
    t = g.to(torch.float32).t() @ coef  # (m, r_s)
    a, _s, vh = torch.linalg.svd(t, full_matrices=False)
    r = min(rank, vh.shape[0])
    p: Tensor = a[:, :r].contiguous() if side == "left" else (u @ vh[:r, :].t()).t().contiguous()
    return p


def right_state_fits(m: int, d: int, r: int, tolerance: float = 0.01) -> bool:
    """Whether GaLore's optimizer state for an (m, d) weight at rank r projected on the right (Adam moments
    (m, r) twice + P (r, d)) stays within ``tolerance`` of the left layout's (moments (r, d) twice + P (m, r))
    - the memory condition of ``proj_type="auto"``; true whenever m <= d."""
    right = 2 * m * r + r * d
    left = 2 * r * d + m * r
    return right <= (1.0 + tolerance) * left


class _TurboFn(torch.autograd.Function):
    """y = x·Wᵀ + b saving the STAC-R factors; backward delivers GaLore's projected weight gradient."""

    @staticmethod
    def forward(
        ctx: Any, x2d: Tensor, weight: Tensor, bias: Tensor | None, low: Tensor, u: Tensor,
        c: Tensor, c_scale: Tensor, vals: Tensor, idx: Tensor, scales: Tensor, layer: TurboLinear,
    ) -> Tensor:  # fmt: skip
        ctx.save_for_backward(weight, u, c, c_scale, vals, idx, scales)
        ctx.layer = layer
        ctx.has_bias = bias is not None
        return torch.nn.functional.linear(x2d, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad_y: Tensor) -> tuple[Tensor | None, ...]:
        weight, u, c, c_scale, vals, idx, scales = ctx.saved_tensors
        layer: TurboLinear = ctx.layer
        grad_x = grad_w = grad_b = grad_low = None
        if ctx.needs_input_grad[0]:
            grad_x = grad_y.mm(weight.to(grad_y.dtype))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_y.sum(0)
        factors = (c, c_scale, vals, idx, scales)
        d, cfg = layer.in_features, layer.codec.config
        assert cfg is not None
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[3]:
            proj = layer.projector
            side = proj.side_for(layer.out_features, d)
            if layer.need_refresh and layer.refresh == "svd":
                gw = _kernels.grad_weight(grad_y, u, *factors, d=d, block=cfg.block, bits=cfg.bits)
                grad_w = gw.to(weight.dtype)  # GaLore's own refresh: the optimizer takes the SVD
            else:
                if layer.need_refresh:  # refresh="shared": the basis from this batch's factors
                    r = layer.low.shape[1] if side == "right" else layer.low.shape[0]
                    if u.shape[1] >= r:
                        proj.set_basis(shared_basis(grad_y, u, factors, r, side), side)
                    else:  # STAC-R's rank is below GaLore's: span(U) cannot hold P; SVD of the gradient here
                        proj.refresh(_kernels.grad_weight(grad_y, u, *factors, d=d, block=cfg.block, bits=cfg.bits))
                    layer.need_refresh = False
                assert proj.ortho is not None
                grad_low = project_from_factors(
                    grad_y, u, factors, proj.ortho, side, d=d, block=cfg.block, bits=cfg.bits
                ).to(layer.low.dtype)
        return grad_x, grad_w, grad_b, grad_low, None, None, None, None, None, None, None


class TurboLinear(nn.Module):
    """A :class:`CompressedLinear` whose backward hands GaLore the projected weight gradient.

    Made by :func:`galore_turbo` from a ``CompressedLinear``: holds the same ``weight``/``bias`` Parameters
    and the same codec (basis, plan, refresh schedule: read through ``codec.basis_for``/``codec.encode``/
    ``codec.config``). Its forward stores the input as STAC-R factors exactly like the wrapped layer; its
    backward computes ``grad_x``, ``grad_b`` and, instead of the (m, d) weight gradient, GaLore's projected
    gradient from the factors into ``low.grad``. On refresh steps it either hands the full gradient to the
    optimizer (``refresh="svd"``: GaLore's SVD, unchanged) or refreshes ``P`` from the factors
    (``refresh="shared"``).

    Attributes
    ----------
    weight, bias : Parameter
    codec : LayerCodec
    projector : GaLoreProjector
    low : Tensor
        Leaf tensor of the projected gradient's shape ((m, r) right, (r, d) left) over a single element;
        ``low.grad`` is the projected gradient.
    refresh : {"svd", "shared"}
    side : {"left", "right"}
        The projection side (with ``prefer_right``, settled at the first forward: see :func:`galore_turbo`'s
        ``proj_type="auto"``).
    prefer_right : bool
        Whether a left-projected layer that can share the schedule goes right (``proj_type="auto"``).
    schedule : {"right", "all", "none"}
        Which layers keep STAC-R's basis between GaLore's refreshes (see the module docstring).
    share_basis : bool
        Whether this layer does (set once the codec is planned: a right-projected layer under
        ``schedule="right"`` only when STAC-R's rank holds GaLore's).
    drop_residual : bool
        Whether this layer stores no residual (right projection, ``refresh="shared"``, shared basis).
    need_refresh : bool
        Whether the next backward is a refresh step.
    """

    def __init__(
        self, layer: CompressedLinear, projector: GaLoreProjector, refresh: str, schedule: str = "none",
        *, prefer_right: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        if not isinstance(layer, CompressedLinear):
            raise TypeError(f"layer: expected a CompressedLinear, got {type(layer).__name__}")
        if layer.weight_layout != "out_in" or "weight" not in layer._parameters:
            raise ValueError(
                "layer: GaLore-Turbo runs on layers with an nn.Linear weight (out, in) named 'weight'; this one "
                f"has layout {layer.weight_layout!r} (transformers' Conv1D or a registered Linear-like class)"
            )
        if refresh not in _REFRESH:
            raise ValueError(f"refresh: must be one of {_REFRESH}, got {refresh!r}")
        if schedule not in _SCHEDULES[1:]:
            raise ValueError(f"schedule: must be one of {_SCHEDULES[1:]}, got {schedule!r}")
        self.in_features = layer.in_features
        self.out_features = layer.out_features
        self.weight = layer.weight
        self.bias = layer.bias
        self.codec = layer.codec
        self.projector = projector
        self.refresh = refresh
        self.prefer_right = bool(prefer_right)
        self.need_refresh = True
        self._set_side(projector.side_for(self.out_features, self.in_features))
        self.schedule = schedule
        self.share_basis = False
        self.drop_residual = False
        self._settled = False
        self._pt: tuple[Tensor, Tensor] | None = None  # (P, Pᵀ contiguous) for _galore_basis

    def _set_side(self, side: str) -> None:
        """Projection side and the ``low`` leaf of its shape ((m, r) right, (r, d) left)."""
        m, d = self.out_features, self.in_features
        r = min(self.projector.rank, m, d)
        shape = (m, r) if side == "right" else (r, d)
        # a leaf of the projected gradient's shape over one element (zero strides): autograd accumulates
        # low.grad, the layer itself holds no (m, r) buffer
        one = torch.zeros(1, dtype=torch.float32, device=self.weight.device)
        self.low = one.as_strided(shape, (0, 0)).requires_grad_()
        self.side = side

    def _galore_basis(self, u: Tensor) -> Tensor:
        """Between refreshes, a shared right-projected layer encodes X in ``Pᵀ = U·V_r`` itself (d, r):
        ``X·Pᵀ`` is all its backward uses, and r <= r_s columns cost less to compute and store than X·U."""
        p = self.projector.ortho
        if p is None or self.projector.side != "right":
            return u
        if self._pt is None or self._pt[0] is not p:
            self._pt = (p, p.t().contiguous().to(u.device))
        return self._pt[1]

    def _settle(self) -> None:
        """Once the codec has a plan: decide share_basis / drop_residual and drop the residual if so."""
        cfg = self.codec.config
        if self._settled or cfg is None:
            return
        self._settled = True
        if cfg.exact or self.schedule == "none":
            return
        r = self.low.shape[1] if self.side == "right" else self.low.shape[0]
        fits = cfg.rank >= r  # P = (U·V_r)ᵀ needs r <= r_s, else the refresh falls back to the gradient's SVD
        if (
            self.prefer_right and fits and self.side == "left" and self.projector.ortho is None
            and self.refresh == "shared" and self.schedule != "none" and right_state_fits(self.out_features, self.in_features, r)
        ):  # fmt: skip
            # proj_type="auto": a left-projected layer that can share goes right (before any projection)
            self.projector.proj_type = "right"
            self._set_side("right")
        right = self.side == "right" and fits
        self.share_basis = self.schedule == "all" or right
        self.drop_residual = right and self.refresh == "shared"
        if self.drop_residual and cfg.k > 0:
            self.codec.config = replace(cfg, k=0)

    def next_step(self, step: int) -> None:
        """Called by the optimizer after its step ``step``: arms the refresh of the next backward."""
        self.need_refresh = step % self.projector.update_proj_gap == 0

    def forward(self, x: Tensor) -> Tensor:
        """``y = x·Wᵀ + b`` for ``x`` (..., in_features) float, the weight's dtype and device."""
        if not isinstance(x, Tensor):
            raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
        if x.shape[-1:] != (self.in_features,):
            raise ValueError(f"x: expected last dimension {self.in_features}, got shape {tuple(x.shape)}")
        if x.dtype != self.weight.dtype:
            raise TypeError(f"x: dtype {x.dtype} does not match the weight dtype {self.weight.dtype}")
        lead = x.shape[:-1]
        x2d = x.reshape(-1, self.in_features)
        if x2d.shape[0] == 0 or not (torch.is_grad_enabled() and self.weight.requires_grad):
            return torch.nn.functional.linear(x2d, self.weight, self.bias).reshape(*lead, self.out_features)
        codec = self.codec
        recompute = _in_backward()  # a checkpointed forward rerun in backward: same basis, no step
        with torch.no_grad():
            xd = x2d.detach()
            cfg = codec.config
            if self.share_basis and cfg is not None and not recompute:
                # STAC-R's basis follows GaLore's schedule: refreshed from this batch only when this step's
                # backward refreshes P (so P lies in the span of the basis every later batch is encoded in)
                every = 1 if self.need_refresh else 0
                if cfg.refresh_every != every:
                    codec.config = replace(cfg, refresh_every=every)
            u = codec.basis_for(xd, advance=not recompute)
            self._settle()
            if self.drop_residual and not self.need_refresh:
                u = self._galore_basis(u)
            factors = codec.encode(xd, u)
        y = _TurboFn.apply(x2d, self.weight, self.bias, self.low, u, *factors, self)
        return y.reshape(*lead, self.out_features)  # type: ignore[no-any-return]

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, rank={self.projector.rank}, "
            f"refresh={self.refresh}, schedule={self.schedule}"
        )


def galore_turbo(
    model: nn.Module,
    *,
    rank: int = 128,
    update_proj_gap: int = 200,
    scale: float = 0.25,
    proj_type: str = "auto",
    refresh: str = "shared",
    share_schedule: bool | str = "auto",
    lr: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
    weight_decay: float = 0.0,
) -> GaLoreAdamW:
    """GaLore under STAC-R sharing their work: turn ``model``'s CompressedLinear layers into TurboLinear.

    Modifies ``model`` in place: every :class:`CompressedLinear` (from :func:`stac_r`) becomes a
    :class:`TurboLinear` with the same Parameters and codec; their weights form the GaLore group (rank
    ``rank``), every other parameter runs plain AdamW. Returns the optimizer.

    Parameters
    ----------
    model : nn.Module with at least one CompressedLinear
    rank, update_proj_gap, scale
        GaLore's settings.
    proj_type : {"auto", "std", "left", "right"}, default="auto"
        GaLore's projection side: "std" (right when m >= d, else left), "left", "right" as in galore_torch.
        "auto": "std", except that a layer "std" would project on the left (m < d) is projected on the right
        when it shares the schedule (``refresh="shared"``, ``share_schedule`` not "none", STAC-R rank >= the
        GaLore rank) and the right layout's optimizer state (Adam moments (m, r) + P (r, d)) is within 1% of
        the left one's (moments (r, d) + P (m, r)), which m < d always gives (it is smaller). Such a layer
        then gets the exact, refresh-free projection of the right-projected layers instead of a per-batch
        STAC-R refresh (the side is settled at the layer's first forward, once its STAC-R plan is known;
        ``TurboLinear.side`` reads "left" until then). With ``refresh="svd"`` or ``share_schedule="none"``,
        "auto" is "std".
    refresh : {"shared", "svd"}, default="shared"
        "shared": refresh ``P`` from the SVD of the (m, r_s) matrix ``Gᵀ·deq(C)`` in backward (never forms
        the full gradient); "svd": GaLore's SVD of the full gradient on refresh steps, which gives the same
        updates as STAC-R + GaLoreAdamW.
    share_schedule : {"auto", "right", "all", "none"} or bool, default="auto"
        Which layers share GaLore's refresh schedule: their STAC-R basis is refreshed (from the batch) only
        in the forward of GaLore's refresh steps, instead of the codec's own ``refresh_every``. "right":
        the right-projected layers (m >= d) whose STAC-R rank holds GaLore's; under ``refresh="shared"``
        their projected gradient is exact up to coefficient quantisation however old the basis (P lies in
        its span, see the module docstring), so they also store no residual. "all": every layer (left-
        projected ones then see an aged basis: lower fidelity). "none" (``False``): no layer. ``True`` means
        "all". "auto": "right" with ``refresh="shared"``, "none" with ``refresh="svd"`` (which then keeps
        the unshared updates).
    lr, betas, eps, weight_decay
        AdamW settings.

    Returns
    -------
    GaLoreAdamW

    Raises
    ------
    TypeError / ValueError naming the argument (no CompressedLinear in ``model``, bad settings).

    Examples
    --------
    >>> import torch
    >>> from thrifty.compress import stac_r, galore_turbo
    >>> _ = torch.manual_seed(0)
    >>> model = stac_r(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)))
    >>> opt = galore_turbo(model, rank=4, update_proj_gap=10)
    >>> model(torch.randn(16, 32)).square().mean().backward()
    >>> opt.step(); opt.zero_grad()
    >>> type(model[0]).__name__, model[0].low.shape
    ('TurboLinear', torch.Size([64, 4]))
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if refresh not in _REFRESH:
        raise ValueError(f"refresh: must be one of {_REFRESH}, got {refresh!r}")
    if proj_type not in ("auto", *_PROJ_TYPES):
        raise ValueError(f"proj_type: must be one of {('auto', *_PROJ_TYPES)}, got {proj_type!r}")
    _check_int("rank", rank, 1)
    _check_int("update_proj_gap", update_proj_gap, 1)
    if isinstance(share_schedule, bool):
        schedule = "all" if share_schedule else "none"
    elif isinstance(share_schedule, str):
        if share_schedule not in _SCHEDULES:
            raise ValueError(f"share_schedule: must be one of {_SCHEDULES} or a bool, got {share_schedule!r}")
        schedule = share_schedule
    else:
        raise TypeError(f"share_schedule: expected a str or a bool, got {type(share_schedule).__name__}")
    if schedule == "auto":
        schedule = "right" if refresh == "shared" else "none"
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, CompressedLinear)]
    if not layers:
        raise ValueError("model: has no CompressedLinear layer (wrap it with thrifty.compress.stac_r first)")
    galore_type = "std" if proj_type == "auto" else proj_type  # "auto" flips sides per layer in TurboLinear
    turbo: dict[int, TurboLinear] = {}
    for _name, layer in layers:
        if id(layer) not in turbo:
            proj = GaLoreProjector(rank, update_proj_gap=update_proj_gap, scale=scale, proj_type=galore_type)
            turbo[id(layer)] = TurboLinear(layer, proj, refresh, schedule, prefer_right=proj_type == "auto")
    for parent in list(model.modules()):
        for child_name, child in list(parent._modules.items()):
            if child is not None and id(child) in turbo and isinstance(child, CompressedLinear):
                setattr(parent, child_name, turbo[id(child)])
    galore_ids = {id(t.weight) for t in turbo.values()}
    galore_params = [t.weight for t in turbo.values()]
    others = [p for p in model.parameters() if id(p) not in galore_ids]
    groups: list[dict[str, Any]] = [{"params": others}] if others else []
    groups.append({"params": galore_params, "rank": rank, "update_proj_gap": update_proj_gap, "scale": scale,
                   "proj_type": galore_type})  # fmt: skip
    opt = GaLoreAdamW(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    opt._turbo = {t.weight: t for t in turbo.values()}
    return opt
