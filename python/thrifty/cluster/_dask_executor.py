"""The Dask executor of the blocked k-means: the logical blocks of a ``dask.array`` on a
``dask.distributed`` client (see :mod:`thrifty.cluster._blocked` for the driver it serves, and
``docs/scale.md``). Both estimators choose it for dask input; it imports nothing of theirs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from thrifty._dask_util import is_dask_array
from thrifty.cluster._blocked import WeightPlan, block_bounds, pick_labels, plan_weights, tree_reduce


class WorkerLostError(RuntimeError):
    """A Dask worker holding block state was lost and the state could not be recomputed."""


class DaskExecutor:
    """Logical blocks of a ``dask.array`` on a ``dask.distributed`` client: the array is rechunked to
    ``block_rows`` rows × all columns (a no-op when it is chunked so already); per-block state stays on
    the workers as futures; totals are combined on the workers by the fixed pairwise tree and only the
    root comes back to the driver. ``sample_weight`` (a dask array or an array-like of shape (n,), or
    None) is cut into the same blocks; its extremes are computed once to check it and choose the
    scaling of :func:`plan_weights`, applied per block."""

    def __init__(self, X: Any, block_rows: int, client: Any, sample_weight: Any = None) -> None:
        from dask.delayed import delayed

        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D dask array, got {X.ndim}-D")
        if X.dtype.kind not in "fiub":
            raise TypeError(f"X must be numeric, got dtype {X.dtype}")
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        if X.shape[1] < 1 or (not np.isnan(X.shape[0]) and X.shape[0] < 1):
            raise ValueError(f"X has shape {X.shape}: need at least one sample and one feature")
        self.client = client
        n, d = X.shape
        if any(np.isnan(c) for c in X.chunks[0]):
            raise ValueError("X has unknown chunk sizes along the rows; call X.compute_chunk_sizes() first")
        self.n, self.d = int(n), int(d)
        self.dtype = X.dtype
        self.bounds = block_bounds(self.n, block_rows)
        Xr = X.rechunk((block_rows, self.d))
        self.xblocks = list(Xr.to_delayed().ravel())
        assert len(self.xblocks) == len(self.bounds)
        self._delayed = delayed
        self.weights, self.wblocks = self._weights(sample_weight, block_rows)

    def _weights(self, sample_weight: Any, block_rows: int) -> tuple[WeightPlan, list[Any]]:
        """The weights' plan and per-block (delayed) weights, None per block for unit weights."""
        import dask.array as da

        if sample_weight is None:
            return WeightPlan(), [None] * len(self.bounds)
        w = sample_weight if is_dask_array(sample_weight) else np.asarray(sample_weight)
        if w.ndim != 1 or w.shape[0] != self.n:
            raise ValueError(f"sample_weight.shape == {w.shape}, expected ({self.n},)")
        if w.dtype.kind not in "fiub":
            raise TypeError(f"sample_weight must be numeric, got dtype {w.dtype}")
        w = da.asarray(w).astype(np.float64).rechunk((block_rows,))  # type: ignore[no-untyped-call]
        stats = self.client.compute([w.min(), w.max(), da.isfinite(w).all()])
        lo, hi, finite = (self._result(f) for f in stats)
        plan = plan_weights(float(lo), float(hi), bool(finite))
        if plan.exponent is None:
            return plan, [None] * len(self.bounds)
        scaled = w.map_blocks(np.ldexp, -plan.exponent, dtype=np.float64)
        return plan, list(scaled.to_delayed().ravel())

    def _result(self, fut: Any) -> Any:
        try:
            return fut.result()
        except (ValueError, TypeError, KeyboardInterrupt):
            raise
        except Exception as e:  # lost workers surface as KilledWorker, CancelledError, missing data
            name = type(e).__name__
            if name in ("KilledWorker", "CancelledError", "FutureCancelledError") or "lost" in str(e).lower():
                raise WorkerLostError(
                    f"a Dask worker was lost during the k-means fit and the blocks' state could not be "
                    f"recovered ({name}: {e}); fit again"
                ) from e
            raise

    def _bcast(self, bc: Any) -> Any:
        # One copy on the cluster; workers fetch it once each (k × d floats).
        return self.client.scatter([bc], hash=False)[0]

    def map(self, fn: Callable[..., Any], states: Sequence[Any] | None, bc: Any) -> list[Any]:
        bcf = self._bcast(bc)
        st = list(states) if states is not None else [None] * len(self.xblocks)
        tasks = [
            self._delayed(fn, pure=False)((xb, self.wblocks[b]), st[b], b, bcf) for b, xb in enumerate(self.xblocks)
        ]
        return list(self.client.compute(tasks))

    def one(self, fn: Callable[..., Any], b: int, bc: Any) -> Any:
        block = (self.xblocks[b], self.wblocks[b])
        return self._result(self.client.compute(self._delayed(fn, pure=False)(block, None, b, bc)))

    def reduce(self, handles: Sequence[Any], pick: Callable[[Any], Any], combine: Callable[[Any, Any], Any]) -> Any:
        # The tree's nodes are tasks on the workers; the leaves are the map outputs themselves (the
        # first level picks their totals), so only the root crosses to the driver.
        submit = self.client.submit
        leaves = [(True, h) for h in handles]

        def node(a: tuple[bool, Any], b: tuple[bool, Any]) -> tuple[bool, Any]:
            return (False, submit(_tree_node, pick, combine, a[0], a[1], b[0], b[1], pure=False))

        leaf, root = tree_reduce(leaves, node)
        return pick(self._result(root)) if leaf else self._result(root)

    def gather(self, handles: Sequence[Any]) -> list[Any]:
        return [self._result(h) for h in handles]

    def labels(self, handles: Sequence[Any]) -> Any:
        import dask.array as da

        parts = [
            da.from_delayed(self._delayed(pick_labels, pure=False)(h), shape=(e - s,), dtype=np.int32)  # type: ignore[no-untyped-call]
            for h, (s, e) in zip(handles, self.bounds)
        ]
        return da.concatenate(parts)  # type: ignore[no-untyped-call]


def _tree_node(pick: Callable[[Any], Any], combine: Callable[[Any, Any], Any], a_leaf: bool, a: Any,
               b_leaf: bool, b: Any) -> Any:
    return combine(pick(a) if a_leaf else a, pick(b) if b_leaf else b)


def dask_client(client: Any) -> Any:
    """``client``, else the current ``dask.distributed`` client (a ``ValueError`` saying how to start one)."""
    if client is not None:
        return client
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError) as e:
        raise ValueError(
            "fitting a dask array needs a running dask.distributed Client (e.g. "
            "Client(LocalCluster(n_workers=2))) or the client= parameter"
        ) from e
