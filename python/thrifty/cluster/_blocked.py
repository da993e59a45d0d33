"""Blocked k-means: the driver shared by the single-machine and the Dask runs.

The data are cut into fixed *logical blocks* of ``block_rows`` rows (independent of the number of
workers and of the Dask chunking). Every pass maps one Rust kernel (``thrifty._core.kmeans_block_*``)
over the blocks; each block returns small totals, which are combined by one fixed-shape pairwise tree
(:func:`tree_reduce`), the same on one machine and on a cluster. Random numbers come from streams keyed
by ``(seed, round, block)``. Hence a fixed seed gives bit-identical centres and labels on one machine
and on any number of Dask workers.

Algorithms (see ``docs/scale.md``):

- init: scalable k-means‖ (Bahmani et al. 2012) with the weighting step: every block keeps each row's
  distance to its nearest candidate; rows are sampled with probability ``min(1, ℓ·D²/φ)``; the
  candidates are weighted by the number of rows nearest to them and reclustered on the driver by the
  core's weighted k-means++ + Lloyd.
- Lloyd: Hamerly bounds (upper, lower: two floats per row) stay with the blocks between iterations.
- Hartigan: rounds in which every block applies the moves accepted in the previous round, then scores
  each row's best Hartigan move against the round's centres and returns per-(from, to, gain bucket)
  totals (count, Σ(d_to² − d_from²), Σx). From those totals the driver computes the *exact* SSE change
  of any union of classes (identity below) and accepts, greedily by gain bucket, only classes that
  lower it; if none does, the single best move (always improving) is applied. The SSE never
  increases.

Identity (any reference centres c_j, partition P with sizes n_j, sums S_j; a set of moves giving n'_j,
S'_j): ``SSE' − SSE = Σ_moves (d_to² − d_from²) − Σ_j ‖S'_j − n'_j c_j‖²/n'_j + Σ_j ‖S_j − n_j c_j‖²/n_j``
with distances to c, so the totals above suffice.

Sample weights (:class:`WeightPlan`): every block carries its rows' weights next to its rows; the
kernels weight every total (sizes become weight sums W_j, sums Σwx, distances w·d², Hartigan's factors
``W_j/(W_j ± w)``, k-means‖ samples ∝ w·D²), so the identity holds with weighted totals. Weights are
divided by the power of two nearest their maximum (exact; only relative weights shape the clustering)
and the inertia is scaled back; equal weights are unit weights, so they give the unit-weight centres
and labels bit for bit. A zero-weight row adds nothing to any total (it never moves a centre) and is
labelled with its nearest centre. scikit-learn's tolerance stays the unweighted per-feature variance.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from thrifty import _core

DEFAULT_BLOCK_ROWS = 65536
N_BUCKETS = 32
#: Relative SSE decrease a Hartigan set of moves must clear (the objective must fall by more than
#: rounding, so the traced SSE never rises).
ACCEPT_MARGIN = 1e-12

F64 = npt.NDArray[np.float64]


def tree_reduce(items: Sequence[Any], combine: Callable[[Any, Any], Any]) -> Any:
    """Combine ``items`` by a fixed pairwise tree: level by level, pairs (0, 1), (2, 3), …, an odd last
    item carried up unchanged. Its shape depends only on ``len(items)``, so the rounding of the result
    does not depend on where the items were computed."""
    level = list(items)
    if not level:
        raise ValueError("tree_reduce needs at least one item")
    while len(level) > 1:
        nxt = [combine(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def block_bounds(n: int, block_rows: int) -> list[tuple[int, int]]:
    """Row ranges of the logical blocks of ``n`` rows."""
    return [(s, min(s + block_rows, n)) for s in range(0, n, block_rows)]


# ---- sample weights ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeightPlan:
    """How a blocked fit uses its sample weights: ``exponent`` None means unit weights (none given, or
    all equal to ``factor``); otherwise the blocks' weights are divided by ``2**exponent`` (exact).
    The inertia of the scaled problem times ``factor · 2**exponent`` is the weighted inertia."""

    exponent: int | None = None
    factor: float = 1.0

    def inertia(self, sse: float) -> float:
        """The weighted inertia of a partition whose scaled SSE is ``sse``."""
        return float(np.ldexp(sse, self.exponent) if self.exponent is not None else sse * self.factor)


def plan_weights(w_min: float, w_max: float, finite: bool) -> WeightPlan:
    """The :class:`WeightPlan` of weights with these extremes (``ValueError`` naming ``sample_weight``
    for NaN/inf, negative or all-zero weights). The scaling rule is the core's: none when the largest
    weight is in [0.25, 4], else the power of two nearest it."""
    if not finite:
        raise ValueError("sample_weight contains NaN or infinity")
    if w_min < 0:
        raise ValueError("sample_weight must be non-negative (there are negative weights)")
    if not w_max > 0:
        raise ValueError("sample_weight must not be all zero")
    if w_min == w_max:
        return WeightPlan(None, float(w_max))
    e = 0 if 0.25 <= w_max <= 4.0 else round(math.log2(w_max))
    return WeightPlan(e)


def scaled_weights(w: npt.NDArray[np.float64], plan: WeightPlan) -> npt.NDArray[np.float64] | None:
    """The weights the blocks use under ``plan`` (a new array; None for unit weights)."""
    if plan.exponent is None:
        return None
    return np.ascontiguousarray(np.ldexp(w, -plan.exponent), dtype=np.float64)


def local_weights(w: npt.NDArray[np.float64] | None) -> tuple[npt.NDArray[np.float64] | None, WeightPlan]:
    """(block weights, plan) of validated NumPy weights (shape (n,), float64); None: unit weights."""
    if w is None:
        return None, WeightPlan()
    plan = plan_weights(float(w.min()), float(w.max()), bool(np.isfinite(w).all()))
    return scaled_weights(w, plan), plan


# ---- per-block tasks (module level: Dask pickles them by reference) -------------------------------


def _as_block(x: Any) -> npt.NDArray[Any]:
    a = np.asarray(x)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    return np.require(a, requirements=["C", "A"])


def _c(a: Any) -> Any:
    """C-contiguous and aligned: arrays deserialised on a Dask worker may be unaligned views of the
    message buffer, which the Rust kernels refuse."""
    return np.require(a, requirements=["C", "A"])


def _unpack(x: Any) -> tuple[npt.NDArray[Any], npt.NDArray[np.float64] | None]:
    """A block's rows (float32 or float64, C order) and its weights (None: unit weights); a block is
    ``(rows, weights)``."""
    rows, w = x
    return _as_block(rows), (None if w is None else np.require(np.asarray(w, dtype=np.float64), requirements=["C", "A"]))


def _named(b: int, fn: Callable[[], Any]) -> Any:
    """Run a kernel, adding the logical block to a data error's message."""
    try:
        return fn()
    except ValueError as e:
        raise ValueError(f"{e} [logical block {b}]") from None


def task_kpar_update(x: Any, st: Any, b: int, bc: tuple[F64, int, int]) -> tuple[Any, ...]:
    cands, offset, total = bc
    cands = _c(cands)
    xb, wb = _unpack(x)
    if st is None:
        closest = np.full(xb.shape[0], np.inf)
        owner = np.zeros(xb.shape[0], dtype=np.uint32)
    else:
        closest, owner = _c(st[0]), _c(st[1])
    cl, ow, cost, counts = _named(b, lambda: _core.kmeans_block_kpar_update(xb, closest, owner, cands, offset, total, wb))
    return (cl, ow, np.concatenate([[cost], counts]))


def task_kpar_sample(x: Any, st: Any, b: int, bc: tuple[float, float, int, int]) -> F64:
    phi, ell, seed, rnd = bc
    xb, wb = _unpack(x)
    idx = _core.kmeans_block_kpar_sample(_c(st[0]), phi, ell, seed, rnd, b, wb)
    return np.asarray(xb[idx], dtype=np.float64).reshape(len(idx), xb.shape[1])


def task_row(x: Any, st: Any, b: int, bc: tuple[int]) -> F64:
    return np.asarray(np.asarray(x[0])[bc[0]], dtype=np.float64)


def task_lloyd(x: Any, st: Any, b: int, bc: tuple[F64, F64, F64]) -> tuple[Any, ...]:
    centers, drift, half_sep = _c(bc[0]), _c(bc[1]), _c(bc[2])
    xb, wb = _unpack(x)
    if st is None or len(st) != 4:
        return tuple(_named(b, lambda: _core.kmeans_block_lloyd(xb, None, None, None, centers, drift, half_sep, wb)))
    return tuple(_named(
        b, lambda: _core.kmeans_block_lloyd(xb, _c(st[0]), _c(st[1]), _c(st[2]), centers, drift, half_sep, wb)
    ))


def task_hartigan(x: Any, st: Any, b: int, bc: tuple[Any, ...]) -> tuple[Any, ...]:
    accepted, single, centers, sizes, scale, offset = bc
    xb, wb = _unpack(x)
    n_b = xb.shape[0]
    if isinstance(st[3], np.ndarray):  # the Lloyd phase's state: labels only
        labels = st[0]
        prop_to = np.full(n_b, -1, dtype=np.int32)
        prop_bucket = np.zeros(n_b, dtype=np.uint8)
    else:
        labels, prop_to, prop_bucket = _c(st[0]), _c(st[1]), _c(st[2])
    local = single - offset[b] if 0 <= single - offset[b] < n_b else -1
    lab, pt, pb, flat, keys, values, best = _core.kmeans_block_hartigan(
        xb, _c(labels), prop_to, prop_bucket, _c(accepted), local, _c(centers), _c(sizes), scale, N_BUCKETS, wb
    )
    delta, row, frm, to, wt = best
    x_row = np.asarray(xb[row], dtype=np.float64) if np.isfinite(delta) else None
    best_t = (delta, offset[b] + row, frm, to, x_row, wt)
    return (lab, pt, pb, (flat, keys, values.reshape(len(keys), xb.shape[1] + 2), best_t))


def pick_last(h: tuple[Any, ...]) -> Any:
    return h[-1]


def pick_labels(h: tuple[Any, ...]) -> npt.NDArray[np.int32]:
    return np.asarray(h[0], dtype=np.int32)


def add(a: F64, b: F64) -> F64:
    return a + b


def combine_hartigan(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """Sum of two blocks' Hartigan totals: flat sums, class totals merged by key (sorted), best move."""
    keys = np.concatenate([a[1], b[1]])
    vals = np.concatenate([a[2], b[2]]) if len(keys) else np.zeros((0, a[2].shape[1] if a[2].ndim == 2 else 0))
    if len(keys):
        order = np.argsort(keys, kind="stable")
        keys, vals = keys[order], vals[order]
        uniq, start = np.unique(keys, return_index=True)
        vals = np.add.reduceat(vals, start, axis=0)
        keys = uniq
    ba, bb = a[3], b[3]
    best = bb if (bb[0], bb[1]) < (ba[0], ba[1]) else ba
    return (a[0] + b[0], keys, vals, best)


# ---- executors ------------------------------------------------------------------------------------


class Executor(Protocol):
    n: int
    d: int
    dtype: np.dtype[Any]
    bounds: list[tuple[int, int]]
    weights: WeightPlan

    def map(self, fn: Callable[..., Any], states: Sequence[Any] | None, bc: Any) -> list[Any]: ...
    def one(self, fn: Callable[..., Any], b: int, bc: Any) -> Any: ...
    def reduce(self, handles: Sequence[Any], pick: Callable[[Any], Any], combine: Callable[[Any, Any], Any]) -> Any: ...
    def gather(self, handles: Sequence[Any]) -> list[Any]: ...
    def labels(self, handles: Sequence[Any]) -> Any: ...


class LocalExecutor:
    """Blocks of a NumPy array (with validated float64 weights ``sample_weight``, or None), run on a
    thread pool (the kernels release the GIL)."""

    def __init__(self, X: npt.NDArray[Any], block_rows: int, n_jobs: int | None = None,
                 sample_weight: npt.NDArray[np.float64] | None = None) -> None:
        self.X = X
        self.w, self.weights = local_weights(sample_weight)
        self.n, self.d = X.shape
        self.dtype = X.dtype
        self.bounds = block_bounds(self.n, block_rows)
        self.threads = max(1, min(n_jobs or (os.cpu_count() or 1), len(self.bounds)))

    def _block(self, b: int) -> tuple[npt.NDArray[Any], npt.NDArray[np.float64] | None]:
        s, e = self.bounds[b]
        return self.X[s:e], (None if self.w is None else self.w[s:e])

    def map(self, fn: Callable[..., Any], states: Sequence[Any] | None, bc: Any) -> list[Any]:
        nb = len(self.bounds)
        st = list(states) if states is not None else [None] * nb
        if self.threads == 1:
            return [fn(self._block(b), st[b], b, bc) for b in range(nb)]
        with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
            return list(pool.map(lambda b: fn(self._block(b), st[b], b, bc), range(nb)))

    def one(self, fn: Callable[..., Any], b: int, bc: Any) -> Any:
        return fn(self._block(b), None, b, bc)

    def reduce(self, handles: Sequence[Any], pick: Callable[[Any], Any], combine: Callable[[Any, Any], Any]) -> Any:
        return tree_reduce([pick(h) for h in handles], combine)

    def gather(self, handles: Sequence[Any]) -> list[Any]:
        return list(handles)

    def labels(self, handles: Sequence[Any]) -> npt.NDArray[np.int32]:
        return np.concatenate([pick_labels(h) for h in handles])


# ---- the driver -----------------------------------------------------------------------------------


@dataclass
class BlockedResult:
    centers: F64
    init_centers: F64
    labels: Any
    inertia: float
    n_iter: int
    lloyd_iter: int
    hartigan_rounds: int
    converged: bool
    lloyd_sse: list[float] = field(default_factory=list)
    lloyd_distance_rows: list[float] = field(default_factory=list)
    hartigan_sse: list[float] = field(default_factory=list)
    hartigan_moves: list[float] = field(default_factory=list)
    n_candidates: int = 0


def _half_sep(c: F64) -> F64:
    k = c.shape[0]
    if k == 1:
        return np.full(1, np.inf)
    g = np.sum((c[:, None, :] - c[None, :, :]) ** 2, axis=2)
    np.fill_diagonal(g, np.inf)
    return np.asarray(0.5 * np.sqrt(g.min(axis=1)), dtype=np.float64)


def _stream_seed(seed: int) -> int:
    return int(seed) % (2**64)


def kmeans_parallel(ex: Executor, k: int, seed: int, rounds: int, oversampling: float) -> tuple[F64, int]:
    """Scalable k-means‖ with weighted candidates; returns (k × d initial centres, candidates)."""
    rng = np.random.default_rng([_stream_seed(seed), 0x6B6D7C7C])
    first = int(rng.integers(ex.n))
    b0 = next(b for b, (s, e) in enumerate(ex.bounds) if s <= first < e)
    cands = ex.one(task_row, b0, (first - ex.bounds[b0][0],)).reshape(1, ex.d)
    states = ex.map(task_kpar_update, None, (cands, 0, 1))
    tot = ex.reduce(states, pick_last, add)
    ell = oversampling * k
    rnd = 0
    while rnd < rounds or (len(cands) < k and rnd < rounds + 50):
        rnd += 1
        phi = float(tot[0])
        if phi <= 0.0:
            break
        samples = ex.gather(ex.map(task_kpar_sample, states, (phi, ell, _stream_seed(seed), rnd)))
        new = np.concatenate([s.reshape(-1, ex.d) for s in samples], axis=0)
        if len(new) == 0:
            continue
        offset = len(cands)
        cands = np.ascontiguousarray(np.concatenate([cands, new], axis=0))
        states = ex.map(task_kpar_update, states, (np.ascontiguousarray(new), offset, len(cands)))
        tot = ex.reduce(states, pick_last, add)
    weights = np.ascontiguousarray(tot[1:], dtype=np.float64)
    if len(cands) < k or np.count_nonzero(weights) < k:
        raise ValueError(
            f"n_clusters={k}: k-means|| found only {np.count_nonzero(weights)} distinct candidate centres; "
            "X has fewer distinct rows than n_clusters"
        )
    fit = _core.kmeans_fit(
        np.ascontiguousarray(cands, dtype=np.float64), weights, "k-means++", n_clusters=k, n_init=1,
        max_iter=300, tol=0.0, algorithm="lloyd", seed=_stream_seed(seed), n_jobs=1,
    )
    return np.ascontiguousarray(fit["cluster_centers"], dtype=np.float64), len(cands)


def _select_moves(
    keys: npt.NDArray[np.uint64], vals: F64, counts: F64, sums: F64, centers: F64, margin: float
) -> tuple[npt.NDArray[np.uint64], F64, F64, float]:
    """Greedy over classes in key order (largest gain bucket first): keep a class when the exact SSE
    change of the kept set falls by more than ``margin``. Returns (accepted keys, new sizes, new sums,
    predicted ΔSSE)."""
    k = len(counts)
    n2 = counts.copy()
    s2 = sums.copy()

    def term(j: int) -> float:
        if n2[j] <= 0:
            return 0.0
        v = s2[j] - n2[j] * centers[j]
        return float(v @ v) / float(n2[j])

    t = np.array([term(j) for j in range(k)])
    delta = 0.0
    acc: list[int] = []
    for e in range(len(keys)):
        key = int(keys[e])
        frm, to = (key // k) % k, key % k
        cnt, dd, sx = float(vals[e, 0]), float(vals[e, 1]), vals[e, 2:]
        rest = n2[frm] - cnt
        if rest <= 0 or rest <= 1e-12 * n2[frm]:  # would empty the cluster (also of weight)
            continue
        n2[frm] -= cnt
        n2[to] += cnt
        s2[frm] -= sx
        s2[to] += sx
        ta, tb = term(frm), term(to)
        new = delta + dd - (ta - t[frm]) - (tb - t[to])
        # ΔSSE = Σdd − Σ_j term_j(new) + Σ_j term_j(old); old terms are t at the start.
        if new < delta - margin:
            delta = new
            t[frm], t[to] = ta, tb
            acc.append(key)
        else:
            n2[frm] += cnt
            n2[to] -= cnt
            s2[frm] += sx
            s2[to] -= sx
    return np.array(sorted(acc), dtype=np.uint64), n2, s2, delta


@dataclass
class _State:
    """Where a phase leaves the run: the centres, the partition's sizes and sums, its SSE and the
    per-block handles (labels and bounds stay with the blocks)."""

    centers: F64
    counts: F64
    sums: F64
    sse: float
    handles: list[Any]


def _total_ss(part: F64, centers: F64, n: int) -> float:
    """Σ‖x − mean‖² of the data from a Lloyd step's unweighted totals ``[counts | sums | Σ‖x − c_j‖²]``
    (within-cluster SSE about the means plus the between-cluster part, no cancelling Σ‖x‖²)."""
    k, d = centers.shape
    counts, sums, cost = part[:k], part[k : k + k * d].reshape(k, d), part[k + k * d : k * (d + 2)]
    nz = counts > 0
    means = centers.copy()
    means[nz] = sums[nz] / counts[nz, None]
    within = float(np.sum(cost) - np.sum(counts * np.sum((means - centers) ** 2, axis=1)))
    mean = sums.sum(axis=0) / n
    return within + float(np.sum(counts[nz] * np.sum((means[nz] - mean) ** 2, axis=1)))


def _lloyd_step(ex: Executor, handles: list[Any] | None, centers: F64, drift: F64, half: F64) -> tuple[list[Any], F64]:
    """One blocked Lloyd iteration: the blocks reassign their rows (Hamerly bounds) and return their
    totals, reduced by the fixed tree: counts (k), sums (k × d), Σ‖x − c‖² per cluster (k), rows
    changed, rows computed."""
    new_handles = ex.map(task_lloyd, handles, (centers, drift, half))
    return new_handles, ex.reduce(new_handles, pick_last, add)


def _lloyd_phase(ex: Executor, res: BlockedResult, centers: F64, max_iter: int, tol: float,
                 on_iteration: Callable[[str, int], None] | None, relabel: bool = False) -> _State:
    """Lloyd with Hamerly bounds carried by the blocks, to a fixed point, ``tol`` or ``max_iter``;
    records the per-iteration SSE and distance rows in ``res``. With ``relabel`` (Lloyd is the whole
    fit), a run stopped by ``tol`` or ``max_iter`` ends with one more assignment to the final centres,
    as scikit-learn's does, so that ``labels_`` is ``predict(X)`` and the inertia is theirs; not
    counted in ``n_iter_``. (The Hartigan phase that otherwise follows needs centres that are the
    means of the partition, which that assignment would break.)"""
    k, d = centers.shape
    lloyd_len = k * (d + 2) + 2
    drift, half = np.zeros(k), np.zeros(k)
    handles: list[Any] | None = None
    tol_abs = 0.0
    state = _State(centers, np.zeros(k), np.zeros((k, d)), np.inf, [])
    for it in range(max_iter):
        handles, part = _lloyd_step(ex, handles, state.centers, drift, half)
        counts, sums = part[:k], part[k : k + k * d].reshape(k, d)
        cost = part[k + k * d : k * (d + 2)]
        changed, computed = part[k * (d + 2)], part[k * (d + 2) + 1]
        new = state.centers.copy()
        nz = counts > 0
        new[nz] = sums[nz] / counts[nz, None]
        shift2 = np.sum((new - state.centers) ** 2, axis=1)
        # SSE of the partition about its own means, exactly: Σ‖x − c‖² − n‖m − c‖².
        sse = float(np.sum(cost) - np.sum(counts * shift2))
        if it == 0:  # scikit-learn's tolerance: tol × mean (unweighted) per-feature variance
            unweighted = part[lloyd_len:] if len(part) > lloyd_len else part[: k * (d + 2)]
            tol_abs = tol * _total_ss(unweighted, state.centers, ex.n) / ex.n / d
        res.lloyd_sse.append(sse)
        res.lloyd_distance_rows.append(float(computed))
        res.lloyd_iter = it + 1
        prev, state = state.centers, _State(new, counts, sums, sse, handles)
        if on_iteration is not None:
            on_iteration("lloyd", it)
        drift = np.sqrt(np.sum((new - prev) ** 2, axis=1))
        half = _half_sep(new)
        if it > 0 and changed == 0:  # the partition is a fixed point: its labels are the centres' own
            res.converged = True
            return state
        if float(np.sum(shift2)) <= tol_abs:
            res.converged = True
            break
    if relabel and handles is not None:
        handles, part = _lloyd_step(ex, handles, state.centers, drift, half)
        counts, sums = part[:k], part[k : k + k * d].reshape(k, d)
        sse = float(np.sum(part[k + k * d : k * (d + 2)]))  # Σ‖x − c‖² about the final centres
        state = _State(state.centers, counts, sums, sse, handles)
    return state


def _apply_best_single(best: tuple[Any, ...], counts: F64, sums: F64) -> tuple[F64, F64, int]:
    """Sizes and sums after the round's best single move (exactly improving) and its row."""
    _delta, row, frm, to, x, wt = best
    n2, s2 = counts.copy(), sums.copy()
    n2[frm] -= wt
    n2[to] += wt
    s2[frm] -= wt * x
    s2[to] += wt * x
    return n2, s2, int(row)


def _hartigan_phase(ex: Executor, res: BlockedResult, state: _State, max_rounds: int,
                    on_iteration: Callable[[str, int], None] | None) -> _State:
    """Blocked Hartigan rounds from the Lloyd phase's partition: the blocks apply the moves accepted
    last round and propose their best moves; the driver accepts the classes that lower the exact SSE
    (or the best single move). The SSE never increases; traced in ``res.hartigan_sse``."""
    k, d = state.sums.shape
    res.hartigan_sse.append(state.sse)
    offsets = [s for s, _ in ex.bounds]
    accepted, single = np.zeros(0, dtype=np.uint64), -1
    centers, sizes, handles, sse = state.centers, state.counts.copy(), state.handles, state.sse
    res.converged = False
    means, counts, sums = centers, state.counts, state.sums
    for rnd in range(max_rounds):
        scale = max(sse, np.finfo(float).tiny) / ex.n
        handles = ex.map(task_hartigan, handles, (accepted, single, centers, sizes, scale, offsets))
        flat, keys, vals, best = ex.reduce(handles, pick_last, combine_hartigan)
        res.hartigan_rounds = rnd + 1
        counts, sums = flat[:k], flat[k : k + k * d].reshape(k, d)
        about_c, proposed = float(flat[k * (d + 1)]), float(flat[k * (d + 1) + 1])
        nz = counts > 0
        means = centers.copy()
        means[nz] = sums[nz] / counts[nz, None]
        sse = about_c - float(np.sum(counts * np.sum((means - centers) ** 2, axis=1)))
        if rnd > 0:
            res.hartigan_sse.append(sse)
        if on_iteration is not None:
            on_iteration("hartigan", rnd)
        if proposed == 0:
            res.converged = True
            break
        keys = np.asarray(keys, dtype=np.uint64)
        vals = np.asarray(vals, dtype=np.float64).reshape(len(keys), d + 2)
        accepted, n2, s2, _delta = _select_moves(keys, vals, counts, sums, centers, ACCEPT_MARGIN * sse)
        single = -1
        if len(accepted) == 0:  # no class lowers the SSE as a whole
            n2, s2, single = _apply_best_single(best, counts, sums)
            res.hartigan_moves.append(1.0)
        else:
            res.hartigan_moves.append(float(vals[np.isin(keys, accepted), 0].sum()))
        sizes = n2
        centers = np.ascontiguousarray(np.where(n2[:, None] > 0, s2 / np.where(n2 > 0, n2, 1)[:, None], centers))
    return _State(means, counts, sums, sse, handles)


def fit_blocked(
    ex: Executor,
    *,
    n_clusters: int,
    init: str | F64,
    max_iter: int,
    tol: float,
    algorithm: str,
    seed: int,
    init_rounds: int = 5,
    oversampling: float = 2.0,
    max_hartigan_rounds: int = 300,
    on_iteration: Callable[[str, int], None] | None = None,
) -> BlockedResult:
    """Run the blocked k-means over the executor's logical blocks (see the module docstring):
    initial centres (k-means‖, or ``init`` as given), the Lloyd phase, then for ``"hartigan"`` the
    Hartigan rounds."""
    if isinstance(init, str):
        centers, n_cand = kmeans_parallel(ex, n_clusters, seed, init_rounds, oversampling)
    else:
        centers, n_cand = np.ascontiguousarray(init, dtype=np.float64), 0
    res = BlockedResult(centers, centers.copy(), None, 0.0, 0, 0, 0, False, n_candidates=n_cand)
    state = _lloyd_phase(ex, res, centers, max_iter, tol, on_iteration, relabel=algorithm != "hartigan")
    if algorithm == "hartigan" and n_clusters > 1:
        state = _hartigan_phase(ex, res, state, max_hartigan_rounds, on_iteration)
    res.centers = np.ascontiguousarray(state.centers)
    res.inertia = ex.weights.inertia(max(state.sse, 0.0))
    res.lloyd_sse = [ex.weights.inertia(v) for v in res.lloyd_sse]
    res.hartigan_sse = [ex.weights.inertia(v) for v in res.hartigan_sse]
    res.labels = ex.labels(state.handles)
    res.n_iter = res.lloyd_iter + res.hartigan_rounds
    return res
