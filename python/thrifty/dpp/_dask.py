"""DPP sampling on a tall ``dask.array``: the same samples as the single-machine API, bit for bit.

How it distributes (see docs/scale.md, "DPP sampling"):

1. **TSQR** over fixed logical blocks of ``_core.DPP_LEAF_ROWS`` rows (the chunks are re-cut to
   block boundaries if needed; columns are never split). Each chunk returns the maximal nodes of the
   one fixed QR tree that lie inside it (a few p×p R factors); the driver completes the tree. The
   single-machine :func:`~thrifty.dpp.orthonormalize` runs the very same tree, so R — and the
   whitening ``W`` (p×r) with ``Q = X·W`` orthonormal — are identical. Q is never stored.
2. **Leverage totals**: each chunk computes its rows of ``Q`` and their leverage scores
   ``‖x_i W‖²`` and returns one total per logical block (8 bytes per block cross the network).
3. **Proposals on the driver**: the (target, uniform) pairs of the accept/reject sampler come from
   the sample's random stream; targets are mapped to blocks through the prefix sums of the block
   totals; the chunks that were hit finish the inverse-CDF search inside their blocks and return
   only the hit rows of X (p floats each).
4. **Accept/reject and the p-step chain rule** run on the driver over those rows, with the core's
   loop: the sample equals the single-machine sample for the same seed.

Everything that runs on a worker is a pure function of its chunk, so a lost worker's tasks are
recomputed elsewhere with the same result.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import RandomState, seed_from_random_state
from thrifty.dpp._checks import FloatArray, IntArray, check_int, check_result_size

LEAF: int = int(_core.DPP_LEAF_ROWS)
F64 = npt.NDArray[np.float64]


def _dask_mod() -> Any:
    """The ``dask`` module (imported on first use: thrifty does not need dask otherwise)."""
    import importlib

    return importlib.import_module("dask")


def aligned(X: Any, name: str) -> Any:
    """``X`` as a float32/float64 dask array whose chunks hold whole rows and start at logical
    block boundaries (rechunked if needed; the data are not read)."""
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array, got {X.ndim}-D with shape {X.shape}"
        )
    n, p = X.shape
    if any(isinstance(c, float) and math.isnan(c) for c in X.chunks[0]) or (
        isinstance(n, float) and math.isnan(n)
    ):
        raise ValueError(
            f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first"
        )
    if n < 1 or p < 1:
        raise ValueError(
            f"{name} must have at least 1 row and 1 column, got shape {X.shape}"
        )
    kind = np.dtype(X.dtype).kind
    if kind not in "fiub":
        raise TypeError(f"{name} must be a real numeric array, got dtype {X.dtype}")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if len(X.chunks[1]) > 1:
        # Chunks along the feature axis: whole rows are needed per task (p is small).
        X = X.rechunk({1: -1})
    bounds = np.cumsum(X.chunks[0])[:-1]
    if (bounds % LEAF).any():
        cuts = sorted({round(b / LEAF) * LEAF for b in bounds} - {0})
        cuts = [c for c in cuts if c < n]
        sizes = np.diff([0, *cuts, n])
        X = X.rechunk({0: tuple(int(s) for s in sizes)})
    return X


def _starts(X: Any) -> list[int]:
    return [0, *itertools.accumulate(int(c) for c in X.chunks[0][:-1])]


def _finite(x: npt.NDArray[Any], first_row: int, name: str) -> None:
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0]) + first_row
        raise ValueError(f"{name} contains NaN or infinity (first at row {bad})")


def _tsqr_task(
    block: Any, first_row: int, n: int, w: FloatArray | None, name: str
) -> Any:
    x = _a(block)
    _finite(x, first_row, name)
    return _core.dpp_tsqr_chunk(x, first_row, n, None if w is None else _a(w))


def _tsqr_root(X: Any, w: F64 | None, name: str) -> F64:
    dask = _dask_mod()

    n, p = (int(s) for s in X.shape)
    tasks = [
        dask.delayed(_tsqr_task, pure=True)(b, s, n, w, name)
        for b, s in zip(X.to_delayed().ravel(), _starts(X))
    ]
    parts = dask.compute(*tasks)
    nodes = [node for part in parts for node in part]
    q = p if w is None else int(w.shape[1])
    return np.asarray(_core.dpp_tsqr_reduce(nodes, n, q))


Whitening = tuple[F64, "F64 | None"]


def whitening(
    X: Any, rtol: float, equilibrate: bool, name: str = "features"
) -> tuple[Whitening, int]:
    """``((W₁, W₂), r)``: basis rows are ``x·W₁`` (then ``·W₂`` after a second pass), the same
    steps as the core's ``whitening_from``."""
    r1 = _tsqr_root(X, None, name)
    w1, rank, kappa = _core.dpp_tsqr_whiten(r1, rtol, equilibrate)
    w1 = np.asarray(w1)
    if kappa <= _core.DPP_ONE_PASS_KAPPA:
        return (w1, None), int(rank)
    r2 = _tsqr_root(X, w1, name)
    return (w1, np.asarray(_core.dpp_tsqr_refine(r2))), int(rank)


def _a(x: Any) -> Any:
    """C-contiguous and aligned (arrays unpickled on a worker process can be unaligned)."""
    return np.require(x, requirements=["C", "A"])


def _c(w: Whitening) -> tuple[F64, F64 | None]:
    """The whitening as C-contiguous, aligned arrays."""
    return _a(w[0]), None if w[1] is None else _a(w[1])


def basis(X: Any, W: Whitening) -> Any:
    """The lazy dask array of basis rows (n×r, dtype of X), block by block."""
    r = int(W[0].shape[1])

    def rows(b: Any) -> Any:
        return _core.dpp_basis_rows(_a(b), *_c(W))

    return X.map_blocks(rows, chunks=(X.chunks[0], (r,)), dtype=X.dtype)


def orthonormalize(X: Any, rtol: float, equilibrate: bool) -> Any:
    Xa = aligned(X, "features")
    W, _ = whitening(Xa, rtol, equilibrate)
    return basis(Xa, W)


def _leverage_task(block: Any, w: Whitening) -> tuple[npt.NDArray[np.float64], int]:
    out = _core.dpp_chunk_leverage(_a(block), *_c(w))
    return np.asarray(out["totals"]), int(out["last"])


def _locate_task(
    block: Any,
    w: Whitening,
    local_blocks: IntArray,
    starts: FloatArray,
    targets: FloatArray,
    extra: IntArray,
) -> tuple[IntArray, IntArray, FloatArray]:
    """Chunk-local rows hit by the targets (-1 for none), and the unique hit rows (plus ``extra``) of X."""
    x = _a(block)
    if targets.size:
        lev = _core.dpp_chunk_leverage(x, *_c(w))["leverage"]
        idx = np.asarray(
            _core.dpp_locate(lev, _a(local_blocks), _a(starts), _a(targets))
        )
    else:
        idx = np.zeros(0, dtype=np.int64)
    uniq = np.unique(np.concatenate([idx[idx >= 0], extra]))
    return idx, uniq, x[uniq]


class DistributedProjectionDPP:
    """The projection DPP onto the column space of a tall ``dask.array`` of features.

    Built by :meth:`ProjectionDPP.from_features` (or :class:`~thrifty.dpp.Coreset`) when given a
    dask array; samples equal those of the single-machine ``ProjectionDPP.from_features`` on the
    same data for the same ``random_state``, on any number of workers and any chunking. Nothing of
    size n is held on the driver: only the whitening ``W`` (p×r), one leverage total per block of
    ``8192`` rows and the rows that the proposals hit.

    Attributes
    ----------
    X : dask.array.Array of shape (n, p)
        The features (re-chunked to whole rows and block boundaries if needed).
    W : tuple (W₁ of shape (p, rank), W₂ of shape (rank, rank) or None)
        The basis is ``U = X·W₁`` (then ``·W₂``); never stored (:attr:`U` is lazy).
    n_items, rank : int
    seed_ : int or None
        Seed of the last sampling call.
    """

    def __init__(self, X: Any, W: Whitening, rank: int) -> None:
        dask = _dask_mod()

        self.X = X
        self.W = W
        self.rank = int(rank)
        self.n_items = int(X.shape[0])
        self.seed_: int | None = None
        self._method = "accept_reject"
        starts = _starts(X)
        parts = dask.compute(
            *[
                dask.delayed(_leverage_task, pure=True)(b, W)
                for b in X.to_delayed().ravel()
            ]
        )
        self._chunk_rows = [int(c) for c in X.chunks[0]]
        self._chunk_first_block = np.asarray(
            [s // LEAF for s in starts], dtype=np.int64
        )
        totals = [float(t) for part in parts for t in part[0]]
        # Sequential prefix sums of the block totals: the guide table's P_b, bit for bit.
        self._ends = np.asarray(list(itertools.accumulate(totals)), dtype=np.float64)
        lasts = [s + last for s, (_, last) in zip(starts, parts) if last >= 0]
        if not lasts or not self._ends[-1] > 0:
            raise ValueError("features have no positive leverage score")
        self._last = int(lasts[-1])
        self._total = float(self._ends[-1])

    def __repr__(self) -> str:
        return f"DistributedProjectionDPP(n_items={self.n_items}, rank={self.rank}, dtype={self.X.dtype}, chunks={len(self._chunk_rows)})"

    @property
    def U(self) -> Any:
        """The orthonormal basis as a lazy dask array (n×rank)."""
        return basis(self.X, self.W)

    def inclusion_probabilities(self) -> Any:
        """``K_ii`` for every item as a lazy dask array of shape (n,)."""
        W = self.W

        def lev(b: Any) -> Any:
            return np.asarray(_core.dpp_chunk_leverage(_a(b), *_c(W))["leverage"])

        return self.X.map_blocks(lev, drop_axis=1, dtype=np.float64)

    def _locate(self, targets: FloatArray) -> tuple[IntArray, dict[int, FloatArray]]:
        """Global rows of the proposal targets and the rows of X they hit (fetched from the chunks)."""
        dask = _dask_mod()

        nb = self._ends.size
        blk = np.searchsorted(self._ends, targets, side="right")
        out = np.full(targets.size, -1, dtype=np.int64)
        tail = blk >= nb
        out[tail] = self._last
        chunk = (
            np.searchsorted(
                self._chunk_first_block, np.minimum(blk, nb - 1), side="right"
            )
            - 1
        )
        last_chunk = int(
            np.searchsorted(self._chunk_first_block, self._last // LEAF, side="right")
            - 1
        )
        starts = _starts(self.X)
        blocks = self.X.to_delayed().ravel()
        jobs, where = [], []
        for c in np.unique(
            np.concatenate([chunk[~tail], [last_chunk] if tail.any() else []]).astype(
                np.int64
            )
        ):
            sel = np.flatnonzero((chunk == c) & ~tail)
            b = blk[sel]
            st = np.where(b > 0, self._ends[np.maximum(b - 1, 0)], 0.0)
            extra = np.asarray(
                [self._last - starts[c]] if (tail.any() and c == last_chunk) else [],
                dtype=np.int64,
            )
            local = (b - self._chunk_first_block[c]).astype(np.int64)
            jobs.append(
                dask.delayed(_locate_task, pure=True)(
                    blocks[c], self.W, local, st, targets[sel], extra
                )
            )
            where.append((int(c), sel))
        fetched: dict[int, FloatArray] = {}
        for (c, sel), (idx, uniq, rows) in zip(where, dask.compute(*jobs)):
            if (idx < 0).any():
                raise RuntimeError(
                    "a proposal target fell outside its block (inconsistent leverage totals)"
                )
            out[sel] = idx + starts[c]
            for i, row in zip(uniq, rows):
                fetched[int(i) + starts[c]] = row
        return out, fetched

    def sample(self, random_state: RandomState = None) -> IntArray:
        """One exact sample: int64 array of ``rank`` distinct item indices (in order of selection)."""
        out: IntArray = self.sample_many(1, random_state)[0]
        return out

    def sample_many(self, n_samples: int, random_state: RandomState = None) -> IntArray:
        """``n_samples`` exact samples (n_samples, rank); sample s from stream (seed, s), as on one machine.

        One round trip to the cluster fetches the rows hit by the first ``≈ 2·r·ln r`` proposals of
        every sample; a sample that needs more proposals doubles its share in a further round.
        """
        count = check_int(n_samples, "n_samples", minimum=1)
        check_result_size(
            count, self.rank, "n_samples", what="the samples (n_samples × sample size)"
        )
        seed = seed_from_random_state(random_state)
        self.seed_ = seed
        r = self.rank
        want = {s: max(64, int(2 * r * math.log(r + 1)) + 64) for s in range(count)}
        have: dict[int, int] = {s: 0 for s in range(count)}
        accept: dict[int, F64] = {}
        globals_: dict[int, list[IntArray]] = {s: [] for s in range(count)}
        rows: dict[int, FloatArray] = {}
        done: dict[int, IntArray] = {}
        while len(done) < count:
            todo = [s for s in range(count) if s not in done]
            new_t = []
            for s in todo:
                t, u = _core.dpp_proposal_pairs(seed, s, want[s], self._total)
                new_t.append(np.asarray(t)[have[s] :])
                accept[s] = np.asarray(u)
            flat = np.concatenate(new_t)
            located, fetched = self._locate(flat)
            rows.update(fetched)
            pos = 0
            for s, t in zip(todo, new_t):
                globals_[s].append(located[pos : pos + t.size])
                pos += t.size
                have[s] = want[s]
                g = np.concatenate(globals_[s])
                uniq = np.unique(g)
                x_rows = np.ascontiguousarray(np.stack([rows[int(i)] for i in uniq]))
                u_rows = _core.dpp_basis_rows(x_rows, self.W[0], self.W[1])
                items = np.searchsorted(uniq, g).astype(np.int64)
                got = _core.dpp_sample_fetched(u_rows, items, accept[s])
                if got is None:
                    want[s] *= 2
                else:
                    done[s] = uniq[np.asarray(got)]
        return np.stack([done[s] for s in range(count)]).astype(np.int64)

    def leverage_of(self, idx: Any) -> npt.NDArray[np.float64]:
        """``K_ii`` of the given items (their rows are fetched), as the single-machine leverages."""
        x_rows = self._fetch_rows(np.asarray(idx, dtype=np.int64))
        out: npt.NDArray[np.float64] = np.asarray(
            _core.dpp_chunk_leverage(x_rows, self.W[0], self.W[1])["leverage"]
        )
        return out

    def _fetch_rows(self, idx: IntArray) -> FloatArray:
        out: FloatArray = np.ascontiguousarray(
            self.X[np.asarray(idx, dtype=np.int64)].compute()
        )
        return out


def volume_cells(z: npt.NDArray[np.float64], m: int) -> IntArray:
    """Cell of every point of ``z`` (in [0,1]^d) in the equal-volume k-d partition into m boxes:
    the same ids as ``_core.dpp_partition(z, m, "volume")`` (depth-first, left first), row by row,
    so any block of rows can be labelled on its own."""
    n, d = z.shape
    cells = np.zeros(n, dtype=np.int64)
    stack: list[
        tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int, int, IntArray]
    ] = [(np.zeros(d), np.ones(d), m, 0, np.arange(n))]
    while stack:
        lo, hi, mm, off, idx = stack.pop()
        if mm == 1:
            cells[idx] = off
            continue
        if idx.size == 0:
            continue
        ml = mm // 2
        frac = ml / mm
        axis = 0
        for k in range(d):
            if hi[k] - lo[k] > hi[axis] - lo[axis] + 1e-15:
                axis = k
        cut = lo[axis] + (hi[axis] - lo[axis]) * frac
        left = z[idx, axis] < cut
        hl, lr = hi.copy(), lo.copy()
        hl[axis] = cut
        lr[axis] = cut
        stack.append((lr, hi, mm - ml, off + ml, idx[~left]))
        stack.append((lo, hl, ml, off, idx[left]))
    return cells


def _map_unit(
    x: npt.NDArray[Any], a: FloatArray, b: FloatArray, lo: float, hi: float
) -> npt.NDArray[np.float64]:
    # The expression of _kernels.map_to_domain, so every row maps to the same bits.
    z = lo + (hi - lo) * (np.asarray(x, dtype=np.float64) - a) / (b - a)
    return np.ascontiguousarray(np.clip(z, lo, hi))


def data_box(X: Any) -> tuple[FloatArray, FloatArray]:
    """The data box of ``map_to_domain(X, None, …)``: min/max per column (exact reductions), padded."""
    dask = _dask_mod()

    mn, mx = dask.compute(X.min(axis=0), X.max(axis=0))
    a, b = np.asarray(mn, dtype=np.float64), np.asarray(mx, dtype=np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("X contains NaN or infinity")
    span = np.where(b > a, b - a, 1.0)
    return a - 1e-6 * span, b + 1e-6 * span


def _cell_count_task(
    block: Any, a: FloatArray, b: FloatArray, m: int, first_row: int
) -> IntArray:
    x = np.asarray(block, dtype=np.float64)
    _finite(x, first_row, "X")
    return np.bincount(volume_cells(_map_unit(x, a, b, 0.0, 1.0), m), minlength=m)


def _cell_fetch_task(
    block: Any, a: FloatArray, b: FloatArray, m: int, cells: IntArray, ranks: IntArray
) -> tuple[IntArray, FloatArray]:
    """Chunk-local row of the ranks[k]-th point (in row order) of cell cells[k], and those rows."""
    x = np.asarray(block, dtype=np.float64)
    lab = volume_cells(_map_unit(x, a, b, 0.0, 1.0), m)
    out = np.empty(cells.size, dtype=np.int64)
    for k, (c, r) in enumerate(zip(cells, ranks)):
        out[k] = np.flatnonzero(lab == c)[r]
    return out, np.ascontiguousarray(x[out])


def haar_coreset(
    X: Any, m: int, seed: int
) -> tuple[IntArray, npt.NDArray[np.float64], int, FloatArray]:
    """The Haar (``split="volume"``, uniform density) coreset of a dask array: indices, weights,
    rank and the fetched rows — the single-machine ``Coreset`` result for the same seed.

    The single-machine sampler draws, cell by non-empty cell, one point with probability
    ``K_ii = (1/n_c)/t_c`` (t_c the float sum of n_c copies of 1/n_c); only the cell counts per
    chunk are needed to replay it, then the chunks holding the chosen ranks return those rows.
    """
    dask = _dask_mod()

    a, b = data_box(X)
    starts = _starts(X)
    blocks = X.to_delayed().ravel()
    counts = np.stack(
        dask.compute(
            *[
                dask.delayed(_cell_count_task, pure=True)(bl, a, b, m, s)
                for bl, s in zip(blocks, starts)
            ]
        )
    )
    n_cell = counts.sum(axis=0)
    nonempty = np.flatnonzero(n_cell > 0)
    rank = int(nonempty.size)
    # The stream's uniforms in order (pairs interleave two of them).
    t, u = _core.dpp_proposal_pairs(seed, 0, (rank + 1) // 2, 1.0)
    unif = np.empty(2 * len(t))
    unif[0::2], unif[1::2] = t, u
    chosen_rank = np.empty(rank, dtype=np.int64)
    kdiag = np.empty(rank)
    for j, c in enumerate(nonempty):
        nc = int(n_cell[c])
        h = 1.0 / nc  # haar_diagonal with a constant density: w²/Σw² = 1/n_c
        tot = float(
            np.cumsum(np.full(nc, h))[-1]
        )  # StratifiedDPP's bincount total (sequential)
        kv = h / tot
        cum = np.cumsum(np.full(nc, kv))
        target = unif[j] * cum[-1]
        chosen_rank[j] = min(int(np.searchsorted(cum, target, side="right")), nc - 1)
        kdiag[j] = kv
    # Map each (cell, rank within the cell) to a chunk through the per-chunk counts.
    per_chunk = np.cumsum(counts[:, nonempty], axis=0)
    chunk = np.asarray(
        [
            int(np.searchsorted(per_chunk[:, j], chosen_rank[j], side="right"))
            for j in range(rank)
        ]
    )
    prior = np.asarray(
        [per_chunk[chunk[j] - 1, j] if chunk[j] > 0 else 0 for j in range(rank)]
    )
    idx = np.empty(rank, dtype=np.int64)
    rows = np.empty((rank, int(X.shape[1])))
    jobs, where = [], []
    for c in np.unique(chunk):
        sel = np.flatnonzero(chunk == c)
        jobs.append(
            dask.delayed(_cell_fetch_task, pure=True)(
                blocks[c], a, b, m, nonempty[sel], chosen_rank[sel] - prior[sel]
            )
        )
        where.append((int(c), sel))
    for (ci, sel), (loc, xr) in zip(where, dask.compute(*jobs)):
        idx[sel] = loc + starts[ci]
        rows[sel] = xr
    return idx, 1.0 / kdiag, rank, rows
