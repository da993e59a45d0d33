"""STAC-R per-layer codec: the tracked basis, its refresh policy, the byte budget plan and bytes accounting.

One :class:`LayerCodec` belongs to one compressed Linear. In each forward it

1. returns the basis for this batch (:meth:`LayerCodec.basis_for`): on the first batch it *plans* the layer
   (:func:`plan_layer`: rank, coefficient format, residual density and bits that fit the byte budget and
   reconstruct the measured batch best) and starts the basis from the batch's top eigenvectors; afterwards
   it refreshes the basis **from the batch being compressed** every ``refresh_every`` steps with one
   warm-started subspace iteration ``U <- orth(Xᵀ(X·U))`` (one extra GEMM of the projection's size; the
   projection ``X·U_new`` it produces is reused by the encoder, so the refresh costs two GEMMs of n·d·r);
2. encodes the batch against that basis (:meth:`LayerCodec.encode`) with the kernels of
   :mod:`thrifty.compress._kernels`: coefficients ``C = X·U`` (bf16, or int8 with per-row scales, which buys
   twice the rank for the same bytes) plus, only where the measured tail pays for it, a top-k-per-block
   quantized residual of ``X - deq(C)·Uᵀ``.

Bytes convention
----------------
``ratio`` is the stored-bytes ratio against the dense activation the uncompressed Linear would save:
``reference_bytes_per_row = d · itemsize`` of the activation's dtype (2·d for bf16/fp16, 4·d for fp32), unless
``reference_bytes_per_row`` is given (the fidelity benchmark passes 2·d, the bf16 convention, for fp32
training). Stored bytes per row (:meth:`LayerConfig.bytes_per_row`) count everything saved per activation
row: coefficients (r·{4, 2, 1} bytes) + the int8 per-row scale (4 bytes) + per residual block ``k`` index
bytes + ``k`` (8-bit) or ``ceil(k/2)`` (4-bit) value bytes + a 4-byte scale. The basis is layer *state*
(like a weight: one ``(d, r)`` float32 tensor per layer whatever the batch size, replaced in place of the old
one at a refresh); it is reported separately as :attr:`LayerCodec.state_bytes`, not per row.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from thrifty.compress import _kernels

__all__ = ["CodecStats", "LayerCodec", "LayerConfig", "plan_layer"]

COEF_FORMATS = ("fp32", "bf16", "int8")
_COEF_BYTES = {"fp32": 4, "bf16": 2, "int8": 1}
_SCALE_BYTES = 4  # float32 scales (per row for int8 coefficients, per row and block for the residual)
_MAX_BLOCK = 256
_PLAN_ROWS = 512  # rows of the first batch used to plan a layer (a fixed pseudo-random subset, see _row_order)
# Residual options the planner tries (k entries per block of 128 features, bits).
_PLAN_RESIDUALS = ((0, 8), (2, 8), (4, 4), (8, 4))
_PLAN_BLOCK = 128
# Fidelity floor of the compute cap. A layer whose best capped layout reconstructs its planning sample with a
# relative error above 1 - CAP_FLOOR_COS² (predicted gradient cosine √(1 - ε²) below the floor) has the cap
# lifted, when the byte budget allows a materially better layout (ε² at most 1/_LIFT_GAIN of the capped one):
# it then takes the cheapest layout (compute in basis columns, _compute_cost) that predicts LIFT_TARGET_COS.
# On the BERT fine-tune (benches/compress_bert.py) capped layers at predicted cosines 0.87-0.92 (measured
# 0.79-0.93) cost accuracy, while the layers the cap did not bind (0.97-0.99) did not.
CAP_FLOOR_COS = 0.94
_LIFT_GAIN = 1.5
_LIFT_ROWS = 1024  # rows of the batch the floor is judged on
LIFT_TARGET_COS = 0.97
_TARGET_EPS2 = 1.0 - LIFT_TARGET_COS**2
_LIFT_RESIDUALS = ((0, 8), (2, 8), (4, 4), (8, 4), (16, 4), (32, 4))  # k per block of 128, bits
_LIFT_RANK_FACTORS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)  # ranks tried when lifting, in units of the capped rank
# Compute cost of a layout in basis columns (the refresh and projection GEMMs cost ~3·n·d per column): the
# residual pass (reconstruction, per-block top-k, the sparse product in backward) costs about as much as
# _RES_COST_BASE + _RES_COST_PER_K·k columns (measured with the CPU kernels, d = 384 and 1536, n = 1024).
_RES_COST_BASE = 64
_RES_COST_PER_K = 7
_OVERRIDE_KEYS = frozenset(
    {"rank", "coef", "residual_density", "bits", "block", "refresh_every", "stochastic", "max_rank",
     "fidelity_floor"}
)
_OVERRIDE_ALIASES = {"coef_dtype": "coef", "residual_bits": "bits"}  # the names stac_r uses


@dataclass(frozen=True)
class LayerConfig:
    """How one layer stores its activations.

    Attributes
    ----------
    rank : int
        Basis columns r, 1 <= r <= d (r = d only with ``exact``).
    coef : {"int8", "bf16", "fp32"}
        Coefficient format; int8 carries a float32 scale per row.
    block : int
        Residual block length along the features, 1..256.
    k : int
        Residual entries kept per row and block, 0..block (0: no residual).
    bits : {4, 8}
        Residual value precision.
    refresh_every : int
        Refresh the basis from the batch every this many steps (1 = every step; 0 = never refresh).
    exact : bool
        The exactness switch: U = I_d, fp32 coefficients, no residual; the weight gradient is exact.
    stochastic : bool
        Stochastic rounding of the residual values (counter-based, keyed by seed, step and layer).
    """

    rank: int
    coef: str = "int8"
    block: int = _PLAN_BLOCK
    k: int = 0
    bits: int = 8
    refresh_every: int = 1
    exact: bool = False
    stochastic: bool = False

    def __post_init__(self) -> None:
        for name in ("rank", "block", "k", "bits", "refresh_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
        if self.rank < 1:
            raise ValueError(f"rank: must be >= 1, got {self.rank}")
        if self.coef not in COEF_FORMATS:
            raise ValueError(f"coef: must be one of {COEF_FORMATS}, got {self.coef!r}")
        if not 1 <= self.block <= _MAX_BLOCK:
            raise ValueError(f"block: must be in [1, {_MAX_BLOCK}], got {self.block}")
        if not 0 <= self.k <= self.block:
            raise ValueError(f"k: must be in [0, block={self.block}], got {self.k}")
        if self.bits not in (4, 8):
            raise ValueError(f"bits: must be 4 or 8, got {self.bits}")
        if self.refresh_every < 0:
            raise ValueError(f"refresh_every: must be >= 0 (0 = never), got {self.refresh_every}")
        if self.rank > 1 << 20:
            raise ValueError(f"rank: implausibly large ({self.rank})")
        if self.exact and (self.coef != "fp32" or self.k != 0):
            raise ValueError("exact: the exactness switch stores fp32 coefficients and no residual")

    @classmethod
    def exact_for(cls, d: int) -> LayerConfig:
        """The exactness switch for width ``d``: U = I_d, fp32 coefficients, no residual."""
        return cls(rank=d, coef="fp32", block=min(d, _MAX_BLOCK), k=0, refresh_every=0, exact=True)

    def coef_bytes_per_row(self) -> int:
        """Bytes per row of the coefficients and their scale."""
        return self.rank * _COEF_BYTES[self.coef] + (_SCALE_BYTES if self.coef == "int8" else 0)

    def residual_bytes_per_row(self, d: int) -> int:
        """Bytes per row of the residual (indices, values, block scales) for width ``d``."""
        if self.k == 0:
            return 0
        nb = math.ceil(d / self.block)
        vbytes = self.k if self.bits == 8 else (self.k + 1) // 2
        return nb * (self.k + vbytes + _SCALE_BYTES)

    def bytes_per_row(self, d: int) -> int:
        """Stored bytes per activation row of width ``d`` (coefficients + scales + residual), no basis."""
        _check_width(d)
        if self.rank > d:
            raise ValueError(f"rank: {self.rank} exceeds the width d={d}")
        return self.coef_bytes_per_row() + self.residual_bytes_per_row(d)


@dataclass(frozen=True)
class CodecStats:
    """What a layer's codec did last (read by ``compression_report``).

    ``captured_energy``: captured energy ‖X·U‖²/‖X‖² of the last refreshed batch (NaN before the first refresh).
    ``residual_share``: share of the last batch's energy carried by the stored residual ‖R‖²/‖X‖² (0 without
    residual; NaN before the first encode). ``bytes_per_row``/``reference_bytes_per_row``: stored and dense
    bytes per row; ``ratio`` their quotient. ``state_bytes``: the basis tensor's bytes. ``step``: forwards seen.
    """

    step: int
    rank: int
    coef: str
    k: int
    bits: int
    captured_energy: float
    residual_share: float
    bytes_per_row: int
    reference_bytes_per_row: float
    ratio: float
    state_bytes: int


def _check_width(d: object) -> int:
    if isinstance(d, bool) or not isinstance(d, int):
        raise TypeError(f"d: expected an int, got {type(d).__name__}")
    if d < 1:
        raise ValueError(f"d: must be >= 1, got {d}")
    return d


def _check_ratio(ratio: object) -> float:
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        raise TypeError(f"ratio: expected a number, got {type(ratio).__name__}")
    r = float(ratio)
    if not math.isfinite(r) or r <= 1.0:
        raise ValueError(f"ratio: must be a finite number > 1, got {ratio}")
    return r


def _check_x(name: str, x: object, d: int | None = None) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name}: expected a 2-D (n, d) tensor, got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"{name}: expected float32, bfloat16 or float16, got {x.dtype}")
    if d is not None and x.shape[1] != d:
        raise ValueError(f"{name}: expected {d} features, got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name}: has no rows")
    return x


def _top_basis(x32: Tensor, r: int) -> Tensor:
    """Top-r right singular vectors of x (d, r) float32 via the d×d Gram matrix (float32 eigh: the leading
    subspace is well conditioned; the trailing directions only need to be orthonormal)."""
    # at unit scale, exactly: Gram sums neither overflow (|x| near 1e17) nor underflow (subnormal x)
    x32 = _kernels.ldexp(x32, -_kernels.pow2_exponent(x32))
    vecs: Tensor = torch.linalg.eigh(x32.t() @ x32).eigenvectors
    return vecs[:, -r:].flip(1).contiguous()


def _resolve_overrides(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise TypeError(f"overrides: expected a mapping, got {type(overrides).__name__}")
    out = {_OVERRIDE_ALIASES.get(k, k): v for k, v in overrides.items() if v is not None}
    bad = set(out) - _OVERRIDE_KEYS
    if bad:
        allowed = sorted(_OVERRIDE_KEYS | set(_OVERRIDE_ALIASES))
        raise ValueError(f"overrides: unknown keys {sorted(bad)}; allowed: {allowed}")
    if "residual_density" in out:
        dens = out["residual_density"]
        if isinstance(dens, bool) or not isinstance(dens, (int, float)):
            raise TypeError(f"residual_density: expected a number, got {type(dens).__name__}")
        if not (0.0 <= float(dens) <= 1.0):
            raise ValueError(f"residual_density: must be in [0, 1] (0 = no residual), got {dens}")
    if "coef" in out and out["coef"] not in COEF_FORMATS:
        raise ValueError(f"coef_dtype: must be one of {COEF_FORMATS}, got {out['coef']!r}")
    if "bits" in out and out["bits"] not in (4, 8):
        raise ValueError(f"residual_bits: must be 4 or 8, got {out['bits']!r}")
    if "max_rank" in out:
        mr = out["max_rank"]
        if isinstance(mr, bool) or not isinstance(mr, int):
            raise TypeError(f"max_rank: expected an int, got {type(mr).__name__}")
        if mr < 1:
            raise ValueError(f"max_rank: must be >= 1, got {mr}")
    if "fidelity_floor" in out:
        ff = out["fidelity_floor"]
        if isinstance(ff, bool) or not isinstance(ff, (int, float)):
            raise TypeError(f"fidelity_floor: expected a number, got {type(ff).__name__}")
        if not 0.0 <= float(ff) < 1.0:
            raise ValueError(f"fidelity_floor: must be in [0, 1) (0 = the cap always holds), got {ff}")
    return out


def _rank_for(budget: float, d: int, coef: str, residual_bytes: int) -> int:
    extra = _SCALE_BYTES if coef == "int8" else 0
    return int((budget - residual_bytes - extra) // _COEF_BYTES[coef])


def _relative_error(x32: Tensor, u: Tensor, cfg: LayerConfig) -> float:
    """‖X - X̂‖²/‖X‖² of the shipped encoder on x with basis u (the first cfg.rank columns)."""
    uu = u[:, : cfg.rank].contiguous()
    packed = _kernels.compress(x32, uu, coef=cfg.coef, block=cfg.block, k=cfg.k, bits=cfg.bits)
    xhat = _kernels.decompress(uu, *packed, d=x32.shape[1], block=cfg.block, bits=cfg.bits)
    total = float(x32.square().sum())
    return float((x32 - xhat).square().sum()) / total if total > 0 else 0.0


def plan_layer(
    x_sample: Tensor,
    ratio: float,
    *,
    overrides: Mapping[str, Any] | None = None,
    reference_bytes_per_row: float | None = None,
) -> LayerConfig:
    """Spend a layer's byte budget where it pays, measured on a sample of its activations.

    The budget is ``reference_bytes_per_row / ratio`` bytes per row (default reference ``d · itemsize`` of
    ``x_sample``'s dtype). Candidates: int8 coefficients (per-row scale) or bf16 coefficients, each without a
    residual or with a top-k residual per block of 128 features (k = 2 at 8 bits, or 4 or 8 at 4 bits); every
    candidate takes the largest rank that fits the budget. Each is scored by the relative reconstruction error
    ‖X - X̂‖²/‖X‖² of the shipped encoder on (up to 512 pseudo-randomly chosen rows of) the sample, in the sample's
    own top eigenbasis (what the per-batch refresh tracks); the best wins (near-ties within 5%: the larger
    rank, which stays good when the spectrum spreads later in training). Entries in ``overrides`` pin
    choices: ``rank``, ``coef``/``coef_dtype`` ("int8"|"bf16"|"fp32"), ``residual_density`` (fraction of
    each block kept, 0 = none), ``bits``/``residual_bits`` (4|8), ``block``, ``refresh_every``,
    ``stochastic``, ``max_rank``, ``fidelity_floor``. A pinned rank with a pinned residual may exceed the
    budget (the expert's choice wins).
    ``max_rank`` caps the planned rank (the compute cap: the refresh and the projection cost ~3·n·d·r, so
    ``CompressedLinear`` caps r at ``compute_budget · out_features`` to keep them below the layer's own
    GEMMs). A capped layer plans no residual beyond the capped rank (unless pinned): the residual's top-k
    pass over X costs about the layer's own forward GEMM on the CPU; the bytes the cap frees buy bf16
    coefficients instead of int8. The cap has a **fidelity floor** (``fidelity_floor``, default
    ``CAP_FLOOR_COS`` = 0.94; 0 = the cap always holds): the capped layout is scored as the trained layer
    would meet a batch (a basis from half of up to 1024 rows of the sample, refreshed once on all of
    them, the error on all of them); if its relative error ε² predicts a gradient cosine √(1 − ε²) below the
    floor and the byte budget allows a layout at least 1.5x better (ranks 0.5-4x the cap and the budget's
    largest, int8 coefficients, top-k residuals up to 32 per block of 128), the cap is lifted for this layer:
    it takes the *cheapest* such layout (compute in basis columns: rank + 64 + 7·k for a residual) that
    predicts a cosine of ``LIFT_TARGET_COS`` = 0.97, or, if none does, one within 5% of the best error. So a
    layer whose capped layout is faithful keeps it (and its speed); one whose spectrum is too flat for the
    capped rank spends compute where the bytes are (BERT's FFN output: rank 96 and a 16-per-block residual
    instead of rank 96 alone, which predicted a cosine of 0.91).

    Parameters
    ----------
    x_sample : Tensor (n, d) float32 / bfloat16 / float16, finite, n >= 1
    ratio : float > 1
    overrides : mapping, optional
    reference_bytes_per_row : float > 0, optional

    Returns
    -------
    LayerConfig with ``bytes_per_row(d) <= reference / ratio`` unless overrides force more.

    Raises
    ------
    TypeError / ValueError naming the argument: bad types, ratio <= 1, unknown override keys, a pinned rank
    >= d, non-finite samples, or a budget too small for rank 1.
    """
    return _plan(x_sample, ratio, overrides=overrides, reference_bytes_per_row=reference_bytes_per_row)[0]


def _plan(
    x_sample: Tensor,
    ratio: float,
    *,
    overrides: Mapping[str, Any] | None = None,
    reference_bytes_per_row: float | None = None,
) -> tuple[LayerConfig, Tensor | None]:
    """plan_layer, also returning the sample's top eigenbasis (d, r_max) when it computed one."""
    x = _check_x("x_sample", x_sample)
    ratio_f = _check_ratio(ratio)
    ov = _resolve_overrides(overrides)
    d = x.shape[1]
    if reference_bytes_per_row is None:
        ref = float(d * x.element_size())
    else:
        if isinstance(reference_bytes_per_row, bool) or not isinstance(reference_bytes_per_row, (int, float)):
            raise TypeError("reference_bytes_per_row: expected a number")
        ref = float(reference_bytes_per_row)
        if not math.isfinite(ref) or ref <= 0:
            raise ValueError(f"reference_bytes_per_row: must be finite and > 0, got {reference_bytes_per_row}")
    budget = ref / ratio_f
    order = _row_order(x.shape[0], x.device)
    rows = x[order[:_PLAN_ROWS]]
    if not bool(torch.isfinite(rows).all()):
        raise ValueError("x_sample: contains NaN or infinity")
    # exact: the plan of a finite but huge (or subnormal) batch is the plan of the batch at unit scale
    e = _kernels.pow2_exponent(x)
    x32 = _kernels.ldexp(rows.to(torch.float32), -e).contiguous()
    block = int(ov.get("block", min(_PLAN_BLOCK, d)))
    refresh_every = int(ov.get("refresh_every", 1))
    stochastic = bool(ov.get("stochastic", False))
    coefs = (ov["coef"],) if "coef" in ov else ("int8", "bf16")
    max_rank = ov.get("max_rank")
    candidates, capped = _candidates(d, budget, ratio_f, ov)
    if len(candidates) == 1 and not capped:
        return candidates[0], None
    eig = _Eigen(x32)
    u = eig.basis(max(c.rank for c in candidates))
    errors = [_relative_error(x32, u, c) for c in candidates]
    pick = _pick(candidates, errors, d)
    floor = float(ov.get("fidelity_floor", CAP_FLOOR_COS))
    if capped and max_rank is not None and floor > 0:
        # Fidelity floor, judged as the trained layer meets a batch: a basis from other rows (half of
        # up to _LIFT_ROWS rows of the batch), refreshed once on the batch (the shipped subspace iteration),
        # the error on the whole batch. The 512 planning rows alone flatter a rank near 512.
        # its first half the basis rows: the planning rows themselves when the batch has >= _LIFT_ROWS rows
        xl = _kernels.ldexp(x[order[:_LIFT_ROWS]].to(torch.float32), -e).contiguous()
        if xl.shape[0] >= 2:
            sim = _Refreshed(xl, eig if xl.shape[0] // 2 == rows.shape[0] else None)
            e_cap = sim.error(candidates[pick])
            lifted = _lift_candidates(d, budget, int(max_rank), coefs, block, refresh_every, stochastic, ov)
            if e_cap > 1.0 - floor**2 and lifted:  # the capped layout predicts a gradient cosine below the floor
                lift_errors = [sim.error(c) for c in lifted]
                best = min(lift_errors)
                if best <= e_cap / _LIFT_GAIN:
                    # the cheapest layout that predicts LIFT_TARGET_COS (or within 5% of the best error)
                    target = max(best * 1.05 + 1e-7, _TARGET_EPS2)
                    ok = [i for i, e in enumerate(lift_errors) if e <= target]
                    i = min(ok, key=lambda i: (_compute_cost(lifted[i]), lift_errors[i], lifted[i].bytes_per_row(d)))
                    return lifted[i], eig.basis(max(lifted[i].rank, u.shape[1]))
    return candidates[pick], u


def _candidates(d: int, budget: float, ratio: float, ov: Mapping[str, Any]) -> tuple[list[LayerConfig], bool]:
    """The layouts a plan scores for width ``d`` and ``budget`` bytes per row (each the largest rank that fits,
    pins in ``ov`` respected), and whether the compute cap bound one. Raises ValueError when none fits."""
    block = int(ov.get("block", min(_PLAN_BLOCK, d)))
    refresh_every = int(ov.get("refresh_every", 1))
    stochastic = bool(ov.get("stochastic", False))
    coefs = (ov["coef"],) if "coef" in ov else ("int8", "bf16")
    residuals = _residual_options(ov, block, _PLAN_RESIDUALS)
    pinned_rank = ov.get("rank")
    if pinned_rank is not None:
        if isinstance(pinned_rank, bool) or not isinstance(pinned_rank, int):
            raise TypeError(f"rank: expected an int, got {type(pinned_rank).__name__}")
        if not 1 <= pinned_rank < d:
            raise ValueError(f"rank: must be in [1, d) with d={d} (use exact=True to keep everything), got {pinned_rank}")

    max_rank = ov.get("max_rank")
    capped = False  # the compute cap bound at least one candidate
    candidates: list[LayerConfig] = []
    for coef in coefs:
        for k, bits in dict.fromkeys(residuals):
            probe = LayerConfig(rank=1, coef=coef, block=block, k=k, bits=bits)
            res_bytes = probe.residual_bytes_per_row(d)
            if pinned_rank is not None:
                r = pinned_rank
                fits = replace(probe, rank=r).bytes_per_row(d) <= budget
                if k > 0 and "residual_density" not in ov and not fits:
                    continue  # pinned rank: add a planned residual only if it still fits the budget
            else:
                r = min(_rank_for(budget, d, coef, res_bytes), d - 1)
                if max_rank is not None and r > max_rank:
                    capped = True
                    if k > 0 and "residual_density" not in ov:
                        continue  # capped by compute: no residual either (its top-k pass costs ~ a GEMM)
                    r = int(max_rank)
                    if coef == "int8" and "coef" not in ov and 2 * r <= budget:
                        continue  # the freed bytes buy bf16 coefficients at the capped rank
                if r < 1:
                    continue
            candidates.append(LayerConfig(rank=r, coef=coef, block=block, k=k, bits=bits,
                                          refresh_every=refresh_every, stochastic=stochastic))
    if not candidates:
        minimum = LayerConfig(rank=1, coef="int8").bytes_per_row(d)
        raise ValueError(
            f"ratio: {ratio:g} leaves {budget:.1f} bytes per row for a layer of width {d}; "
            f"the smallest layout needs {minimum} (use a smaller ratio)"
        )
    return candidates, capped


def budget_layout(d: int, ratio: float, *, itemsize: int = 4, overrides: Mapping[str, Any] | None = None) -> LayerConfig:
    """The layout planned from the byte budget alone, without activations (a meta-device dry run): of the
    candidates :func:`plan_layer` scores, the largest rank (ties: fewer bytes). Its bytes per row are within
    the budget like any planned layout; only the choice between layouts of equal budget needs data."""
    ov = _resolve_overrides(overrides)
    candidates, _capped = _candidates(d, d * itemsize / _check_ratio(ratio), _check_ratio(ratio), ov)
    return min(candidates, key=lambda c: (-c.rank, c.bytes_per_row(d), c.k))


def _pick(candidates: list[LayerConfig], errors: list[float], d: int) -> int:
    """The index of the best candidate: the least error; near-ties (within 5% of the best error) go to the
    largest rank, which is the most robust to the spectrum spreading as training proceeds (the plan is made
    on the first batch), then to fewer bytes."""
    best = min(errors)
    near = [i for i, e in enumerate(errors) if e <= best * 1.05 + 1e-7]
    return min(near, key=lambda i: (-candidates[i].rank, candidates[i].bytes_per_row(d), errors[i]))


def _residual_options(
    ov: Mapping[str, Any], block: int, options: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    """The (k per block, bits) residual layouts a plan tries: the pinned ``residual_density`` (and bits), else
    ``options`` restricted to a pinned ``bits``, with k at most the block."""
    if "residual_density" in ov:
        dens = float(ov["residual_density"])
        k_fix = 0 if dens == 0 else max(1, min(block, round(dens * block)))
        bits_opts = (ov["bits"],) if "bits" in ov else (8, 4)
        return tuple((k_fix, b) for b in bits_opts) if k_fix else ((0, 8),)
    return tuple((min(k, block), b) for k, b in options if "bits" not in ov or k == 0 or b == ov["bits"])


def _compute_cost(cfg: LayerConfig) -> int:
    """Per-row compute of a layout in basis columns (see _RES_COST_BASE): rank + the residual's cost."""
    return cfg.rank + (_RES_COST_BASE + _RES_COST_PER_K * cfg.k if cfg.k else 0)


def _lift_candidates(
    d: int, budget: float, max_rank: int, coefs: tuple[str, ...], block: int, refresh_every: int,
    stochastic: bool, ov: Mapping[str, Any],
) -> list[LayerConfig]:
    """Layouts past the compute cap that fit the byte budget: ranks of 0.5-4x the capped rank and the largest
    rank the bytes allow, without or with a top-k residual of up to 32 entries per block of 128 (int8
    coefficients: at equal rank bf16 adds bytes, not fidelity; pins in ``ov`` are respected)."""
    lift_coefs = coefs if "coef" in ov else ("int8",)
    residuals = _residual_options(ov, block, _LIFT_RESIDUALS)
    out: list[LayerConfig] = []
    for coef in lift_coefs:
        for k, bits in dict.fromkeys(residuals):
            probe = LayerConfig(rank=1, coef=coef, block=block, k=k, bits=bits)
            r_max = min(_rank_for(budget, d, coef, probe.residual_bytes_per_row(d)), d - 1)
            ranks = {min(r_max, max(1, int(f * max_rank))) for f in _LIFT_RANK_FACTORS} | {r_max}
            for r in sorted(ranks):
                if r >= 1 and replace(probe, rank=r).bytes_per_row(d) <= budget:
                    out.append(LayerConfig(rank=r, coef=coef, block=block, k=k, bits=bits,
                                           refresh_every=refresh_every, stochastic=stochastic))
    return list(dict.fromkeys(out))


def _row_order(n: int, device: torch.device) -> Tensor:
    """The batch's rows in a fixed pseudo-random order (the same for every call with ``n``): plans sample its
    first rows. A stride would alias with the batch's periodic structure: every 2nd row of sequences of 128
    tokens keeps the even positions only, and GPT-2's first layer (token + position embeddings) then looked
    rank 128 on the sample (bf16 coefficients, error 3e-6) with a relative error of 0.19 on the batch."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(_ROW_ORDER_SEED)).to(device)


_ROW_ORDER_SEED = 0x5EED


class _Refreshed:
    """Relative errors of layouts on ``xl`` (n, d) with the basis the trained layer would use: the top
    eigenvectors of the first half of its rows, refreshed once on all rows (``_kernels.refresh``), one basis per rank."""

    def __init__(self, xl: Tensor, even: _Eigen | None = None) -> None:
        self.xl = xl
        # the planning sample's eigenvectors when it is this first half (no second d×d eigh)
        self.eig = even if even is not None else _Eigen(xl[: xl.shape[0] // 2].contiguous())
        self.bases: dict[int, Tensor] = {}

    def error(self, cfg: LayerConfig) -> float:
        u = self.bases.get(cfg.rank)
        if u is None:
            u = self.bases[cfg.rank] = _kernels.refresh(self.xl, self.eig.basis(cfg.rank))[0]
        return _relative_error(self.xl, u, cfg)


class _Eigen:
    """The sample's eigenvectors, computed once and sliced to the top r as the plan needs them."""

    def __init__(self, x32: Tensor) -> None:
        self.x32 = x32
        self.vecs: Tensor | None = None

    def basis(self, r: int) -> Tensor:
        if self.vecs is None:
            self.vecs = torch.linalg.eigh(self.x32.t() @ self.x32).eigenvectors
        return self.vecs[:, -r:].flip(1).contiguous()


# Below max|x| = 2^-32 the refresh's float32 Gram sums (x² near 2^-64 and less) lose the trailing
# directions to underflow: at x·1e-30 the refreshed basis kept half the gradient (cos 0.52).
_TINY_EXPONENT = -32


def _refresh(x: Tensor, u: Tensor) -> tuple[Tensor, float, Tensor]:
    """``_kernels.refresh`` (basis, energy, X·U_new) that also takes a finite batch too small or too large
    for float32 Gram sums: it refreshes on the batch scaled by a power of two (exact; the basis and the
    energy are scale-free) and scales X·U back — up front for a tiny batch, on overflow for a huge one."""
    e = _kernels.pow2_exponent(x)
    if e >= _TINY_EXPONENT:
        try:
            out = _kernels.refresh(x, u, return_projection=True)
            return out.u, out.energy, out.xu
        except ValueError:
            if e == 0 or not bool(torch.isfinite(x).all()):
                raise
    out = _kernels.refresh(_kernels.ldexp(x, -e), u, return_projection=True)
    return out.u, out.energy, _kernels.ldexp(out.xu, e)


def _mix_seed(seed: int, step: int, layer: int) -> int:
    """A 64-bit rounding key from (seed, step, layer) (splitmix64 finaliser of their combination)."""
    z = (seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + layer * 0x94D049BB133111EB) % (1 << 64)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % (1 << 64)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % (1 << 64)
    return z ^ (z >> 31)


class LayerCodec:
    """Per-layer STAC-R state: the tracked basis, its refresh schedule and the encoder settings.

    Parameters
    ----------
    d : int >= 1
        Width of the layer's input (features).
    config : LayerConfig | None
        A fixed layout; ``None`` plans one from the first batch (needs ``ratio``, or ``exact``).
    ratio : float > 1 | None
        Target stored-bytes ratio against the dense activation (see the module docstring).
    seed : int >= 0
        Key of the stochastic rounding (combined with the step and ``layer_index``).
    layer_index : int >= 0
        This layer's index (part of the rounding key).
    overrides : mapping, optional
        Expert pins forwarded to :func:`plan_layer` (``rank``, ``coef``, ``residual_density``, ``bits``,
        ``block``, ``refresh_every``, ``stochastic``).
    reference_bytes_per_row : float, optional
        Dense bytes per row the ratio refers to (default: d · itemsize of the first batch's dtype).
    exact : bool
        The exactness switch (U = I_d, fp32 coefficients, no residual).

    Attributes
    ----------
    config : LayerConfig | None   (set at the first batch when planned)
    u : Tensor (d, r) float32 | None   the current basis (replaced, never modified in place, at a refresh)
    step : int   forwards seen
    """

    def __init__(
        self,
        d: int,
        config: LayerConfig | None = None,
        ratio: float | None = None,
        *,
        seed: int = 0,
        layer_index: int = 0,
        overrides: Mapping[str, Any] | None = None,
        reference_bytes_per_row: float | None = None,
        exact: bool = False,
    ) -> None:
        self.d = _check_width(d)
        for name, v in (("seed", seed), ("layer_index", layer_index)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
            if v < 0:
                raise ValueError(f"{name}: must be >= 0, got {v}")
        if config is not None and not isinstance(config, LayerConfig):
            raise TypeError(f"config: expected a LayerConfig or None, got {type(config).__name__}")
        if exact or (config is not None and config.exact):
            config = LayerConfig.exact_for(d)
        elif config is None:
            if ratio is None:
                raise ValueError("ratio: required when no config is given (or pass exact=True)")
            _check_ratio(ratio)
        if config is not None and config.rank > d:
            raise ValueError(f"config: rank {config.rank} exceeds the width d={d}")
        if config is not None and not config.exact and config.rank >= d:
            raise ValueError(f"config: rank {config.rank} must be below the width d={d} (use exact=True)")
        self.config = config
        self.ratio = None if ratio is None else float(ratio)
        self.seed = seed
        self.layer_index = layer_index
        self.overrides = _resolve_overrides(overrides)
        self.reference_bytes_per_row = reference_bytes_per_row
        self.u: Tensor | None = None
        self.step = 0
        self._energy = float("nan")
        self._residual_share = float("nan")
        self._ref: float | None = None
        # the projection X·U_new from the last refresh, reused by encode for the same (x, u)
        self._proj: tuple[Tensor, Tensor, Tensor] | None = None

    # ---------------------------------------------------------------------------------------------
    @torch.no_grad()
    def basis_for(self, x2d: Tensor, *, advance: bool = True) -> Tensor:
        """The basis (d, r) float32 to encode ``x2d`` (n, d) with; plans and refreshes per policy.

        First call: plans the layout (unless fixed) and starts the basis from the batch's top-r eigenvectors.
        Later calls: every ``refresh_every`` steps one warm subspace iteration from this batch
        (``_kernels.refresh``: Householder QR of Xᵀ(X·U); its X·U_new is reused by the encoder). The exact
        layout returns the identity. A refresh returns a *new* tensor (the previous basis is never modified in
        place, so graphs that saved it stay valid). Counts the step.
        With ``advance=False`` (a forward recomputed inside backward by checkpointing) the current basis is
        returned, moved to x's device if needed, without planning anew, refreshing or counting a step.

        Raises
        ------
        TypeError / ValueError for a non-tensor, wrong shape, non-float dtype or non-finite batch.
        """
        x = _check_x("x", x2d, self.d)
        if not advance and self.u is not None:
            self._proj = None
            if self.u.device != x.device:
                self.u = self.u.to(x.device)
            return self.u
        if self._ref is None:
            self._ref = (
                float(self.d * x.element_size()) if self.reference_bytes_per_row is None
                else float(self.reference_bytes_per_row)
            )
        planned: Tensor | None = None
        if self.config is None:
            assert self.ratio is not None
            self.config, planned = _plan(x, self.ratio, overrides=self.overrides, reference_bytes_per_row=self._ref)
        cfg = self.config
        self._proj = None
        if cfg.exact:
            if self.u is None or self.u.device != x.device:
                self.u = torch.eye(self.d, dtype=torch.float32, device=x.device)
                self._energy = 1.0
        elif self.u is None or self.u.device != x.device or self.u.shape[1] != cfg.rank:
            x32 = x.to(torch.float32)
            if not bool(torch.isfinite(x32).all()):
                raise ValueError("x: contains NaN or infinity")
            if self.u is not None and self.u.shape[1] != cfg.rank:
                self.u = None
            if self.u is not None:
                self.u = self.u.to(x.device)
            elif planned is not None:
                self.u = planned[:, : cfg.rank].contiguous()  # from the planning sample of this very batch
            else:
                self.u = _top_basis(x32, cfg.rank)
            # float64 sums (once per basis): near full rank the share outside the basis (~1e-7 on the GPT
            # benchmark) is below float32 summation noise
            total = float(torch.linalg.vector_norm(x32, dtype=torch.float64).square())
            self._energy = float(torch.linalg.vector_norm(x32 @ self.u, dtype=torch.float64).square()) / total if total > 0 else 1.0
        elif cfg.refresh_every > 0 and self.step % cfg.refresh_every == 0:
            u_new, energy, xu = _refresh(x, self.u)
            self.u = u_new
            self._energy = energy
            self._proj = (x, u_new, xu)
        self.step += 1
        return self.u

    @property
    def stochastic(self) -> bool:
        """Whether the residual uses stochastic rounding (False before planning)."""
        return self.config is not None and self.config.stochastic

    def rounding_seed(self) -> int:
        """The rounding key of the current step for this layer, in int64 range (mix of seed, step, layer)."""
        z = _mix_seed(self.seed, self.step, self.layer_index)
        return z - (1 << 64) if z >= 1 << 63 else z

    def projection_for(self, x2d: Tensor, u: Tensor) -> Tensor | None:
        """``X·U`` (n, r) float32 computed by the refresh in :meth:`basis_for` for this very ``x2d`` and ``u``,
        or None. Pass it to ``_kernels.compress(..., xu=)`` to skip the projection GEMM. Read once."""
        proj, self._proj = self._proj, None
        if proj is not None and proj[0] is x2d and proj[1] is u:
            return proj[2]
        return None

    def encode(self, x2d: Tensor, u: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Compress ``x2d`` (n, d) in the basis ``u`` (d, r) with this layer's layout.

        Returns ``(c, c_scale, vals, idx, scales)`` as :func:`thrifty.compress._kernels.compress` documents.
        Stochastic rounding (if configured) is keyed by (seed, step, layer_index). Reuses the projection
        computed by the refresh of :meth:`basis_for` for the same ``x2d`` and ``u``.

        Raises
        ------
        RuntimeError if called before :meth:`basis_for` planned the layer; the kernels' TypeError /
        ValueError for bad tensors.
        """
        cfg = self.config
        if cfg is None:
            raise RuntimeError("encode: call basis_for(x) first (it plans the layer)")
        packed = _kernels.compress(
            x2d, u, coef=cfg.coef, block=cfg.block, k=cfg.k, bits=cfg.bits, stochastic=cfg.stochastic,
            seed=self.rounding_seed(), xu=self.projection_for(x2d, u),
        )
        self.note_residual(packed.vals, packed.scales, x2d)
        return tuple(packed)  # type: ignore[return-value]

    @torch.no_grad()
    def note_residual(self, vals: Tensor, scales: Tensor, x2d: Tensor) -> None:
        """Record the residual's energy share ‖R‖²/‖X‖² of an encode done outside :meth:`encode`.

        ``vals``/``scales`` as returned by ``_kernels.compress`` for ``x2d`` with this layer's config.
        """
        cfg = self.config
        if cfg is None or cfg.k == 0 or vals.numel() == 0:
            self._residual_share = 0.0
            return
        total = float(x2d.to(torch.float32).square().sum())
        self._residual_share = _residual_energy(vals, scales, cfg.bits) / total if total > 0 else 0.0

    # ---------------------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What the codec has learnt from the batches it saw: the plan, the tracked basis, the step counter and
        the last measurements - everything a resumed run needs to take the same next step. Plain Python values
        and tensors (``torch.load(..., weights_only=True)`` reads them back)."""
        cfg = self.config
        return {
            "config": None if cfg is None else dataclasses.asdict(cfg),
            "u": None if self.u is None else self.u.detach().cpu(),
            "step": self.step, "energy": self._energy, "residual_share": self._residual_share, "ref": self._ref,
        }  # fmt: skip

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state` returned (the basis moves to the device at the next batch).

        Raises
        ------
        ValueError when the state belongs to a layer of another width.
        """
        u = state["u"]
        if u is not None and (u.dim() != 2 or u.shape[0] != self.d):
            raise ValueError(f"state_dict: a STAC-R basis of shape {tuple(u.shape)} does not fit width d={self.d}")
        self.config = None if state["config"] is None else LayerConfig(**state["config"])
        self.u = None if u is None else u.to(torch.float32)
        self.step = int(state["step"])
        self._energy = float(state["energy"])
        self._residual_share = float(state["residual_share"])
        self._ref = None if state["ref"] is None else float(state["ref"])
        self._proj = None

    # ---------------------------------------------------------------------------------------------
    @property
    def state_bytes(self) -> int:
        """Bytes of the basis tensor (layer state, not counted per row)."""
        return 0 if self.u is None else self.u.numel() * self.u.element_size()

    @property
    def stats(self) -> CodecStats:
        """Snapshot of the last step (see :class:`CodecStats`); raises RuntimeError before the first batch."""
        cfg = self.config
        if cfg is None or self._ref is None:
            raise RuntimeError("stats: the layer has not seen a batch yet")
        bpr = cfg.bytes_per_row(self.d)
        return CodecStats(
            step=self.step, rank=cfg.rank, coef=cfg.coef, k=cfg.k, bits=cfg.bits, captured_energy=self._energy,
            residual_share=self._residual_share, bytes_per_row=bpr, reference_bytes_per_row=self._ref,
            ratio=self._ref / bpr, state_bytes=self.state_bytes,
        )

    def __repr__(self) -> str:
        return f"LayerCodec(d={self.d}, config={self.config}, ratio={self.ratio}, step={self.step})"


def residual_codes(vals: Tensor, bits: int) -> Tensor:
    """The signed integer codes q of a packed residual as float32: int8 as is, int4 unpacked two per
    byte (low nibble first), so an odd k leaves one trailing code per block (packed as 0)."""
    if bits == 8:
        return vals.to(torch.float32)
    lo = (vals & 0xF).to(torch.int16)
    hi = (vals >> 4).to(torch.int16)
    q = torch.stack((lo, hi), dim=-1).flatten(-2).to(torch.float32)
    return torch.where(q >= 8, q - 16, q)


def _residual_energy(vals: Tensor, scales: Tensor, bits: int) -> float:
    """‖R‖² of a packed residual: Σ (q · scale)² over the kept entries."""
    q = residual_codes(vals, bits)
    return float((q.square().sum(-1) * scales.to(torch.float32).square()).sum())
