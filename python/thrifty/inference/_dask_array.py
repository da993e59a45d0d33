"""``subspace_test`` on a tall ``dask.array`` X (issue 11): the NB-asymptotic test of one-component
PLS1 by block reductions, so that n = 10⁸ rows with p <= 1000 never meet in one process.

How it runs (two reads of X, nothing gathered but p-sized and (p × p) summaries):

1. X (and y, and the train bit mask of the J <= 64 splits, 8 bytes a row) are cut into fixed
   *logical* row blocks of ``logical_rows(n, p)`` rows, whatever the input chunking. Each block
   returns its moments: count, mean, the centred cross-product XᵀX (for the gate) and, for every
   split, the centred train moments Σ(x − x̄)², Σ(x − x̄)(y − ȳ), Σ(y − ȳ)². The blocks are merged
   by one fixed-shape pairwise tree with Chan's update (exact for centred moments, no cancellation).
2. The driver forms each split's PLS1 direction v_j = X̃ᵀỹ in raw units (c_xy / ss_x per column,
   0 for a column constant on the train part) and the gate (n, the stable rank from the
   correlation matrix of the XᵀX summary, p).
3. Each block scores its rows with all v_j at once (one (rows × p)(p × J) product) and returns the
   centred test moments of (score, y) per split; the same tree merges them; r_j is their correlation.

The blocks, the tree and every per-block computation (one BLAS thread) are fixed by (n, p), so the
result is bit-identical for any chunking of X and any number of workers; it equals the NumPy run
on the same splits to rounding (the single-machine core sums in another order).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from thrifty import _core
from thrifty._validation import (
    RandomState,
    check_finite_vector,
    check_float,
    check_int,
    from_pandas,
    seed_from_random_state,
)
from thrifty._warn import warn
from thrifty.inference._problem import ConstantColumnWarning, GateWarning, check_splits, route_of, split_test_result
from thrifty.inference._results import FloatArray, SubspaceTestResult

UNSUPPORTED = (
    "{what} does not take a dask.array: call .compute() for a NumPy array that fits in memory, or use "
    "subspace_test(X_dask, y) (learner='pls', n_components=1, method 'auto' or 'nb'), which runs by block reductions"
)

MAX_SPLITS = 64  # one bit per split in the row mask


def _mod(name: str) -> Any:
    """Import an optional dependency (dask ships partial type information; used untyped here)."""
    return importlib.import_module(name)


def is_dask_collection(a: Any) -> bool:
    """Is ``a`` a dask array (without importing dask when it is not installed or not used)?"""
    return type(a).__module__.startswith("dask.") and hasattr(a, "chunks") and hasattr(a, "to_delayed")


def logical_rows(n: int, p: int) -> int:
    """Rows of a logical block: at least 64 blocks when n allows, at most ~32 MB of float64 each,
    never fewer than 64 rows. A function of (n, p) only, so the reduction tree is too."""
    return max(64, min(-(-n // 64), max(64, (1 << 22) // p)))


# ------------------------------------------------------------------------------------------------
# per-block pieces and their merge (run on the workers)

Moments = dict[str, Any]


def _bits(mask: Any, n_splits: int) -> FloatArray:
    m = np.ascontiguousarray(mask, dtype=np.uint64).reshape(-1)
    bits: FloatArray = ((m[:, None] >> np.arange(n_splits, dtype=np.uint64)) & np.uint64(1)).astype(np.float64)
    return bits


def _ein(spec: str, *ops: FloatArray) -> FloatArray:
    """A product summed in one fixed order. Not BLAS: OpenBLAS rounds the same product differently
    with the thread count and start-up configuration of the process (measured: a worker started with
    one BLAS thread and the driver limited to one at run time disagree in the last bit), and the
    result must not depend on which process ran a block."""
    out: FloatArray = np.einsum(spec, *ops, optimize=False)
    return out


def _moments(bits: FloatArray, a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Per column of ``bits`` (the rows it selects): count, mean of a (q columns) and b, centred
    Σ(a − ā)², Σ(b − b̄)², Σ(a − ā)(b − b̄). Centred on the block mean first, so nothing cancels."""
    ma, mb = a.mean(axis=0), b.mean()
    da, db = a - ma, b - mb
    cnt = bits.sum(axis=0)
    inv = np.divide(1.0, cnt, out=np.zeros_like(cnt), where=cnt > 0)
    s_a = _ein("ij,ik->jk", bits, da)
    s_b = _ein("ij,i->j", bits, db)
    m2a = np.maximum(_ein("ij,ik->jk", bits, da * da) - s_a * s_a * inv[:, None], 0.0)
    m2b = np.maximum(_ein("ij,i->j", bits, db * db) - s_b * s_b * inv, 0.0)
    cab = _ein("ij,ik->jk", bits, da * db[:, None]) - s_a * (s_b * inv)[:, None]
    return cnt, ma + s_a * inv[:, None], m2a, mb + s_b * inv, m2b, cab


def _leaf_train(xb: Any, yb: Any, mb: Any, n_splits: int, row0: int) -> Moments:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        # C order whatever layout the transfer produced: numpy's reductions sum in an order that
        # depends on the memory layout
        x = np.require(xb, np.float64, ["C", "A"])  # blocks from workers can be unaligned
        y = np.require(np.reshape(yb, -1), np.float64, ["C", "A"])
        if not np.isfinite(x).all():
            return {"bad": (row0, "X")}
        if not np.isfinite(y).all():
            return {"bad": (row0, "y")}
        mean = x.mean(axis=0)
        d = x - mean
        ym = y.mean()
        dy = y - ym
        return {
            "bad": None,
            "n": float(x.shape[0]),
            "mean": mean,
            "gram": d.T @ d,  # BLAS: feeds only the gate's stable rank (reproduced to rounding)
            "ymean": ym,
            "ym2": float(dy @ dy),
            "split": _moments(_bits(mb, n_splits), x, y),
        }


def _leaf_test(xb: Any, yb: Any, mb: Any, v: FloatArray, center: FloatArray) -> Moments:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        # C order whatever layout the transfer produced: numpy's reductions sum in an order that
        # depends on the memory layout
        x = np.require(xb, np.float64, ["C", "A"])  # blocks from workers can be unaligned
        y = np.require(np.reshape(yb, -1), np.float64, ["C", "A"])
        s = _ein("ic,jc->ij", x - center, v)  # (rows, J): every split's score of every row
        t = 1.0 - _bits(mb, v.shape[0])
        cnt = t.sum(axis=0)
        inv = np.divide(1.0, cnt, out=np.zeros_like(cnt), where=cnt > 0)
        ms = (t * s).sum(axis=0) * inv
        my = _ein("ij,i->j", t, y) * inv
        ds = (s - ms) * t
        dy = (y[:, None] - my) * t
        return {
            "bad": None,
            "split": (cnt, ms[:, None], (ds * ds).sum(axis=0)[:, None], my, (dy * dy).sum(axis=0), (ds * dy).sum(axis=0)[:, None]),
        }


def _merge_split(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """Chan et al.'s pairwise update of (count, mean a, mean b, M2 a, M2 b, C ab) per split."""
    na, ma, m2a, mya, m2ya, ca = a
    nb, mb, m2b, myb, m2yb, cb = b
    n = na + nb
    f = np.divide(na * nb, n, out=np.zeros_like(n), where=n > 0)
    wb = np.divide(nb, n, out=np.zeros_like(n), where=n > 0)
    dx = mb - ma
    dy = myb - mya
    return (
        n, ma + dx * wb[:, None], m2a + m2b + dx * dx * f[:, None], mya + dy * wb, m2ya + m2yb + dy * dy * f,
        ca + cb + dx * dy[:, None] * f[:, None],
    )


def _merge(a: Moments, b: Moments) -> Moments:
    if a["bad"] is not None or b["bad"] is not None:
        return a if a["bad"] is not None else b
    out: Moments = {"bad": None, "split": _merge_split(a["split"], b["split"])}
    if "gram" in a:
        na, nb = a["n"], b["n"]
        n = na + nb
        d = b["mean"] - a["mean"]
        dy = b["ymean"] - a["ymean"]
        out.update(
            n=n, mean=a["mean"] + d * (nb / n), gram=a["gram"] + b["gram"] + np.outer(d, d) * (na * nb / n),
            ymean=a["ymean"] + dy * (nb / n), ym2=a["ym2"] + b["ym2"] + dy * dy * (na * nb / n),
        )
    return out


def _driver_blocks(dask: Any, a: Any, rows: int) -> list[Any]:
    """Logical blocks of an array held by the driver (the split mask, a NumPy y): scattered to the
    cluster when the default scheduler is a ``distributed`` client (8 bytes a row, sent once and not
    through the task graph), graph literals for the local schedulers."""
    parts = [a[i : i + rows] for i in range(0, a.shape[0], rows)]
    client: Any = getattr(dask.base.get_scheduler(), "__self__", None)
    if type(client).__name__ == "Client" and hasattr(client, "scatter"):
        return list(client.scatter(parts, hash=False))
    return [dask.delayed(part, pure=True) for part in parts]


def _compute(dask: Any, node: Any) -> Any:
    """``dask.compute`` with one BLAS thread in this process too: a threaded scheduler runs the leaves
    here, where their own per-task limit could be undone by a neighbouring task's exit (and a BLAS
    product's rounding can depend on how many threads share it). Dask's worker processes start with
    one BLAS thread already."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return dask.compute(node)


def _tree(nodes: list[Any], combine: Callable[[Any, Any], Any]) -> Any:
    """One fixed-shape pairwise tree: neighbours merge level by level, an odd last node moves up."""
    while len(nodes) > 1:
        nxt = [combine(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
        if len(nodes) % 2:
            nxt.append(nodes[-1])
        nodes = nxt
    return nodes[0]


# ------------------------------------------------------------------------------------------------
# driver


def _check_x(X: Any) -> tuple[Any, int, int]:
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array, got {X.ndim}-D with shape {X.shape}")
    if np.dtype(X.dtype).kind not in "biuf":
        raise TypeError(f"X must be a real numeric array, got dtype {X.dtype}")
    n, p = X.shape
    if any(math.isnan(c) for c in X.chunks[0]):
        raise ValueError("X has unknown chunk sizes (NaN); call X.compute_chunk_sizes() first")
    if len(X.chunks[1]) != 1:
        raise ValueError(
            f"X is chunked along the feature axis ({len(X.chunks[1])} column chunks {X.chunks[1]}); the block "
            "reductions need whole rows in every chunk: pass X.rechunk({1: -1})"
        )
    if n < 6 or p < 1:
        raise ValueError(f"X must have at least 6 rows and 1 column, got shape {X.shape}")
    return X, int(n), int(p)


def _check_y(y: Any, n: int) -> Any:
    if is_dask_collection(y):
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D (one response) with a dask-array X, got shape {y.shape}")
        if np.dtype(y.dtype).kind not in "biuf":
            raise TypeError(f"y must be a real numeric array, got dtype {y.dtype}")
        if y.shape[0] != n:
            raise ValueError(f"X and y have different lengths: X has {n} rows, y has {y.shape[0]} values")
        return y
    yv = np.asarray(from_pandas(y))
    if yv.ndim == 2 and yv.shape[1] == 1:
        yv = yv[:, 0]
    yv = check_finite_vector(yv, "y")
    if yv.shape[0] != n:
        raise ValueError(f"X and y have different lengths: X has {n} rows, y has {yv.shape[0]} values")
    return yv


def _split_mask(n: int, n_splits: Any, splits: Any, seed: int) -> tuple[Any, int]:
    """Train bit mask of the splits (drawn as ``subspace_test`` draws them, or the user's) and their number."""
    if splits is None:
        j = check_int(n_splits, "n_splits", 2)
        if j > MAX_SPLITS:
            raise ValueError(f"n_splits={j} exceeds {MAX_SPLITS}, the most a dask-array X supports (one bit per split)")
        return np.asarray(_core.inference_train_mask(n, 1, j, seed)), j
    trains = check_splits(splits, n)
    if len(trains) > MAX_SPLITS:
        raise ValueError(f"splits holds {len(trains)} splits; a dask-array X supports at most {MAX_SPLITS}")
    if any(t.size < 3 for t in trains):
        raise ValueError("every split needs at least n_components + 2 = 3 train rows")
    mask = np.zeros(n, dtype=np.uint64)
    for j, t in enumerate(trains):
        mask[t] |= np.uint64(1) << np.uint64(j)
    return mask, len(trains)


def _stable_rank(n: int, mean: FloatArray, gram: FloatArray) -> tuple[float, FloatArray]:
    """The stable rank of the standardised X from the XᵀX summary (trace over top eigenvalue of its
    correlation matrix; exact, where the core's Lanczos stops at 1e-4), and the constant-column
    flags. The gate's rules on it are the core's (``inference_route_from_gate``)."""
    sd = np.sqrt(np.maximum(np.diag(gram), 0.0) / n)
    const = ~(sd > 1e-12 * np.abs(mean)) | (sd == 0.0)
    keep = ~const
    if keep.any():
        s = sd[keep] * math.sqrt(n)
        corr = gram[np.ix_(keep, keep)] / np.outer(s, s)
        top = float(np.linalg.eigvalsh(corr)[-1])
        stable = float(np.trace(corr)) / top if top > 0 else 0.0
    else:
        stable = 0.0
    return stable, const


def subspace_test(
    X: Any, y: Any, n_components: Any, *, learner: Any, method: Any, n_splits: Any, splits: Any, sample_weight: Any,
    rotate: Any, force: Any, random_state: RandomState, confidence_level: Any,
) -> SubspaceTestResult:
    """The dask-array route of :func:`thrifty.inference.subspace_test` (see the module docstring)."""

    dask = _mod("dask")
    if not is_dask_collection(X):
        raise TypeError("with a dask-array y, X must be a dask array too (or pass NumPy arrays for both)")
    if not (isinstance(learner, str) and learner == "pls"):
        raise ValueError("a dask-array X supports learner='pls' only (one-component PLS1 by block reductions)")
    if n_components is not None and check_int(n_components, "n_components", 1) != 1:
        raise ValueError("a dask-array X supports n_components=1 only (the split fits use first moments)")
    if method not in ("auto", "nb"):
        raise ValueError(
            f"a dask-array X supports method 'auto' or 'nb', got {method!r}: permutation and CV tests refit "
            "once per permutation (one pass over X each); compute() X for them"
        )
    if sample_weight is not None:
        raise ValueError("sample_weight is not supported with a dask-array X")
    if rotate not in (None, "varimax"):
        raise ValueError(f"rotate must be None or 'varimax', got {rotate!r}")
    if not isinstance(force, (bool, np.bool_)):
        raise TypeError(f"force must be a bool, got {type(force).__name__}")
    level = check_float(confidence_level, "confidence_level", 0.0, 1.0)
    X, n, p = _check_x(X)
    yd = _check_y(y, n)
    seed = seed_from_random_state(random_state)
    mask, n_sp = _split_mask(n, n_splits, splits, seed)

    rows = logical_rows(n, p)
    xb = X.rechunk((rows, p)).to_delayed().ravel()
    yb = yd.rechunk((rows,)).to_delayed().ravel() if is_dask_collection(yd) else _driver_blocks(dask, yd, rows)
    mb = _driver_blocks(dask, mask, rows)
    leaf = dask.delayed(_leaf_train, pure=True)
    merge = dask.delayed(_merge, pure=True)
    train = _tree([leaf(xb[i], yb[i], mb[i], n_sp, i * rows) for i in range(len(xb))], merge)
    (tr,) = _compute(dask, train)
    if tr["bad"] is not None:
        row0, name = tr["bad"]
        raise ValueError(f"{name} contains NaN or infinity (in the row block starting at row {row0})")
    if not tr["ym2"] > 0.0:
        raise ValueError("y is constant (zero variance); there is nothing to predict")

    stable, const = _stable_rank(n, tr["mean"], tr["gram"])
    if const.any():
        idx = np.flatnonzero(const)
        if idx.size == p:
            raise ValueError("every column of X is constant; there is nothing to learn from")
        shown = ", ".join(str(int(i)) for i in idx[:10]) + (" …" if idx.size > 10 else "")
        warn(
            f"X has {idx.size} constant column(s) ({shown}); they carry no information and are dropped "
            "from every fit (standardised value 0)",
            ConstantColumnWarning,
        )
    route, message = route_of(
        _core.inference_route_from_gate(float(n), stable, p, method, bool(force), "pls", 1, False), method
    )
    gate = route.gate
    if route.run != "nb":
        raise ValueError(
            "the gate sends this design to the NB-permutation test (" + "; ".join(gate.reasons) + "), which "
            "reads X once per permutation: compute() X for it, or pass force=True to run the NB-asymptotic test"
        )

    # each split's PLS1 direction in raw units: X̃ᵀỹ with X̃ standardised on the train part
    cnt, mx, m2x, _my, m2y, cxy = tr["split"]
    sd = np.sqrt(m2x / np.maximum(cnt, 1.0)[:, None])
    const_tr = ~(sd > 1e-12 * np.abs(mx)) | (sd == 0.0)
    v = np.where(const_tr, 0.0, np.divide(cxy, m2x, out=np.zeros_like(cxy), where=m2x > 0))
    v = np.require(v, requirements=["C", "A"])
    vd = dask.delayed(v, pure=True)
    centre = dask.delayed(np.asarray(tr["mean"]), pure=True)
    leaf2 = dask.delayed(_leaf_test, pure=True)
    test = _tree([leaf2(xb[i], yb[i], mb[i], vd, centre) for i in range(len(xb))], merge)
    (te,) = _compute(dask, test)
    n_te, ms, m2s, my_te, m2y_te, csy = te["split"]
    m2s, ms, csy = m2s[:, 0], ms[:, 0], csy[:, 0]
    raw_s = m2s + n_te * ms * ms
    raw_y = m2y_te + n_te * my_te * my_te
    ok = (m2s > 1e-15 * raw_s) & (m2y_te > 1e-15 * raw_y) & (m2s > 0) & (m2y_te > 0) & (m2y > 0) & ~np.all(v == 0, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rs = np.where(ok, np.clip(csy / (np.sqrt(m2s) * np.sqrt(m2y_te)), -1.0, 1.0), np.nan)
    if message is not None:
        warn(message, GateWarning)
    return split_test_result(
        rs, np.asarray(cnt, dtype=float), n, route, 0, None, level=level, rho_hat_defined=True,
        k=1, learner="pls", seed=seed, trains=(), rotate=rotate,
    )
