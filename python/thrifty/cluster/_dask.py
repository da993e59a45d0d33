"""`DaskHartiganKMeans`: k-means on a ``dask.array`` (or a NumPy array, the same blocked algorithm on
one machine) with scikit-learn's KMeans interface. See :mod:`thrifty.cluster._blocked` for the algorithm
and ``docs/scale.md`` for how it distributes."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from sklearn.utils.validation import check_is_fitted

from thrifty import _core
from thrifty._validation import RandomState, seed_from_random_state
from thrifty.cluster._blocked import (
    DEFAULT_BLOCK_ROWS,
    BlockedResult,
    LocalExecutor,
    block_bounds,
    fit_blocked,
    pick_labels,
    tree_reduce,
)
from thrifty.cluster._hartigan import HartiganKMeans


def is_dask_array(X: Any) -> bool:
    """Whether ``X`` is a ``dask.array.Array`` (without importing dask when it is not loaded)."""
    mod = type(X).__module__
    if not mod.startswith("dask"):
        return False
    import dask.array as da

    return isinstance(X, da.Array)


class WorkerLostError(RuntimeError):
    """A Dask worker holding block state was lost and the state could not be recomputed."""


class DaskExecutor:
    """Logical blocks of a ``dask.array`` on a ``dask.distributed`` client: the array is rechunked to
    ``block_rows`` rows × all columns (a no-op when it is chunked so already); per-block state stays on
    the workers as futures; totals are combined on the workers by the fixed pairwise tree and only the
    root comes back to the driver."""

    def __init__(self, X: Any, block_rows: int, client: Any) -> None:
        from dask.delayed import delayed

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
        tasks = [self._delayed(fn, pure=False)(xb, st[b], b, bcf) for b, xb in enumerate(self.xblocks)]
        return list(self.client.compute(tasks))

    def one(self, fn: Callable[..., Any], b: int, bc: Any) -> Any:
        return self._result(self.client.compute(self._delayed(fn, pure=False)(self.xblocks[b], None, b, bc)))

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


def _client(client: Any) -> Any:
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


class DaskHartiganKMeans(HartiganKMeans):
    """K-means on data too large for one machine: blocked Lloyd (Hamerly bounds kept by the blocks) and
    a blocked, monotone Hartigan, from scalable k-means‖. Accepts a ``dask.array`` (distributed over a
    ``dask.distributed`` client) or a NumPy array (the same algorithm on one machine, bit-identical).

    The data are cut into fixed logical blocks of ``block_rows`` rows, whatever the number of workers
    or the Dask chunking; per-block totals are combined by one fixed pairwise tree; random streams are
    keyed by (seed, round, block). A fixed ``random_state`` therefore gives identical centres and
    labels on one machine and on any cluster. The data are read once per iteration and never
    collected to the driver: per iteration the driver sends the centres (k × d floats) and receives
    one k × (d + 2) total.

    Parameters
    ----------
    n_clusters : int, default=8
    init : {"k-means||", "k-means++"} or array of shape (n_clusters, n_features), default="k-means||"
        Scalable k-means‖ with weighted candidates ("k-means++" is an alias: k-means‖ is its
        scalable form) or explicit centres.
    n_init : "auto" or 1, default="auto"
        Only one run (k-means‖ already oversamples).
    max_iter : int, default=300
        Lloyd iterations at most.
    tol : float, default=1e-4
        Lloyd stops when Σ‖Δc‖² ≤ tol × mean per-feature variance (scikit-learn's rule), or when no
        label changes.
    random_state : None, int or numpy Generator
    algorithm : {"hartigan", "lloyd"}, default="hartigan"
        ``"hartigan"``: Lloyd, then blocked Hartigan rounds (the SSE never increases; traced in
        ``sse_trace_``). ``"lloyd"``: Lloyd only.
    block_rows : int, default=65536
        Rows per logical block (fixes the reduction tree and the random streams: results depend on
        it, not on the chunking or the workers).
    init_rounds : int, default=5
        k-means‖ sampling rounds.
    oversampling : float, default=2.0
        k-means‖ oversampling factor ℓ / n_clusters.
    max_hartigan_rounds : int, default=300
    client : dask.distributed.Client or None
        The client for dask input (default: the current one).
    verbose, copy_x, n_jobs
        As :class:`HartiganKMeans` (``n_jobs`` = threads over blocks for NumPy input).

    Attributes
    ----------
    cluster_centers_ : ndarray (n_clusters, n_features), dtype of X
    labels_ : ndarray (n_samples,) int32, or a dask array for dask input (not computed)
    inertia_ : float
    n_iter_ : int
        Lloyd iterations + Hartigan rounds.
    converged_ : bool
    seed_ : int
    init_centers_ : ndarray (n_clusters, n_features)
    sse_trace_ : ndarray
        SSE after the Lloyd phase and after every Hartigan round (non-increasing).
    lloyd_sse_ : ndarray
        SSE of the partition after each Lloyd iteration.
    iteration_stats_ : dict of ndarray
        ``lloyd_distance_rows`` (rows the bounds did not certify, per Lloyd iteration) and
        ``hartigan_moves`` (moves applied per Hartigan round).
    n_blocks_ : int
    n_candidates_ : int
        k-means‖ candidates (0 with explicit init).

    Raises
    ------
    ValueError
        NaN/inf in a block (naming the block), unknown chunk sizes, ``n_samples < n_clusters``,
        ``sample_weight`` (not supported), ``n_init > 1``, bad parameters; no client for dask input.
    WorkerLostError (a RuntimeError)
        When a worker holding block state is lost and Dask cannot recompute it.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.cluster import DaskHartiganKMeans
    >>> X = np.random.default_rng(0).normal(size=(2000, 3))
    >>> km = DaskHartiganKMeans(4, random_state=0, block_rows=500).fit(X)
    >>> km.cluster_centers_.shape, bool(np.all(np.diff(km.sse_trace_) <= 0))
    ((4, 3), True)
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: Any = "k-means||",
        n_init: Literal["auto"] | int = "auto",
        max_iter: int = 300,
        tol: float = 1e-4,
        verbose: int = 0,
        random_state: RandomState = None,
        copy_x: bool = True,
        algorithm: Literal["hartigan", "lloyd"] = "hartigan",
        n_jobs: int | None = None,
        block_rows: int = DEFAULT_BLOCK_ROWS,
        init_rounds: int = 5,
        oversampling: float = 2.0,
        max_hartigan_rounds: int = 300,
        client: Any = None,
    ) -> None:
        super().__init__(
            n_clusters, init=init, n_init=n_init, max_iter=max_iter, tol=tol, verbose=verbose,
            random_state=random_state, copy_x=copy_x, algorithm=algorithm, n_jobs=n_jobs,
        )
        self.block_rows = block_rows
        self.init_rounds = init_rounds
        self.oversampling = oversampling
        self.max_hartigan_rounds = max_hartigan_rounds
        self.client = client

    def _check_blocked(self, n: int, d: int) -> tuple[int, Any]:
        def integer(name: str, v: Any, low: int) -> int:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
                raise TypeError(f"{name} must be an int, got {type(v).__name__}")
            if v < low:
                raise ValueError(f"{name} must be >= {low}, got {v}")
            return int(v)

        k = integer("n_clusters", self.n_clusters, 1)
        if n < k:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
        integer("max_iter", self.max_iter, 1)
        integer("block_rows", self.block_rows, 1)
        integer("init_rounds", self.init_rounds, 0)
        integer("max_hartigan_rounds", self.max_hartigan_rounds, 0)
        if isinstance(self.tol, (bool, np.bool_)) or not isinstance(self.tol, numbers.Real):
            raise TypeError(f"tol must be a float, got {type(self.tol).__name__}")
        if not (np.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"tol must be a finite number >= 0, got {self.tol}")
        if not (isinstance(self.oversampling, numbers.Real) and self.oversampling > 0 and np.isfinite(self.oversampling)):
            raise ValueError(f"oversampling must be a finite number > 0, got {self.oversampling!r}")
        if self.algorithm not in ("hartigan", "lloyd"):
            raise ValueError(f"algorithm must be 'hartigan' or 'lloyd', got {self.algorithm!r}")
        if self.n_init not in ("auto", 1):
            raise ValueError(f"n_init must be 'auto' or 1 for the blocked k-means, got {self.n_init!r}")
        init = self.init
        if isinstance(init, str):
            if init not in ("k-means||", "k-means++"):
                raise ValueError(f"init must be 'k-means||', 'k-means++' or an array, got {init!r}")
            return k, "k-means||"
        if callable(init):
            raise TypeError("init: a callable is not supported by the blocked k-means (pass centres)")
        arr = np.asarray(init)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"init must be a numeric array, got dtype {arr.dtype}")
        if arr.shape != (k, d):
            raise ValueError(f"init must have shape ({k}, {d}), got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("init contains NaN or infinity")
        return k, np.ascontiguousarray(arr, dtype=np.float64)

    def fit(self, X: Any, y: Any = None, sample_weight: npt.ArrayLike | None = None,
            *, _on_iteration: Callable[[str, int], None] | None = None) -> DaskHartiganKMeans:
        """Compute the clustering.

        Parameters
        ----------
        X : dask.array.Array or array-like of shape (n_samples, n_features)
            float32 stays float32, other real dtypes become float64. Chunks along the features are
            merged (rechunked to full rows); the rows are rechunked to ``block_rows``.
        y : ignored
        sample_weight : None
            Not supported (``ValueError`` otherwise).

        Returns
        -------
        self
        """
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported by the blocked (Dask) k-means")
        ex: Any
        if is_dask_array(X):
            if X.ndim != 2:
                raise ValueError(f"Expected a 2-D dask array, got {X.ndim}-D")
            if X.dtype.kind not in "fiub":
                raise TypeError(f"X must be numeric, got dtype {X.dtype}")
            if X.dtype not in (np.float32, np.float64):
                X = X.astype(np.float64)
            if X.shape[1] < 1 or (not np.isnan(X.shape[0]) and X.shape[0] < 1):
                raise ValueError(f"X has shape {X.shape}: need at least one sample and one feature")
            ex = DaskExecutor(X, int(self.block_rows), _client(self.client))
            self.n_features_in_ = ex.d
        else:
            Xv = self._validate_train(X)
            ex = LocalExecutor(Xv, int(self.block_rows) if isinstance(self.block_rows, numbers.Integral) else 1,
                               self.n_jobs)
        k, init = self._check_blocked(ex.n, ex.d)
        seed = seed_from_random_state(self.random_state)
        res: BlockedResult = fit_blocked(
            ex, n_clusters=k, init=init, max_iter=int(self.max_iter), tol=float(self.tol),
            algorithm=str(self.algorithm), seed=seed, init_rounds=int(self.init_rounds),
            oversampling=float(self.oversampling), max_hartigan_rounds=int(self.max_hartigan_rounds),
            on_iteration=_on_iteration,
        )
        dtype = ex.dtype if ex.dtype in (np.float32, np.float64) else np.float64
        self.cluster_centers_ = res.centers.astype(dtype)
        self.init_centers_ = res.init_centers.astype(dtype)
        self.labels_ = res.labels
        self.inertia_ = float(res.inertia)
        self.n_iter_ = int(res.n_iter)
        self.converged_ = bool(res.converged)
        self.seed_ = seed
        self.sse_trace_ = np.asarray(res.hartigan_sse if res.hartigan_sse else res.lloyd_sse[-1:], dtype=np.float64)
        self.lloyd_sse_ = np.asarray(res.lloyd_sse, dtype=np.float64)
        self.iteration_stats_ = {
            "lloyd_distance_rows": np.asarray(res.lloyd_distance_rows, dtype=np.float64),
            "hartigan_moves": np.asarray(res.hartigan_moves, dtype=np.float64),
        }
        self.n_blocks_ = len(ex.bounds)
        self.n_candidates_ = int(res.n_candidates)
        self._n_threads = 1
        return self

    def fit_predict(self, X: Any, y: Any = None, sample_weight: npt.ArrayLike | None = None) -> Any:
        """``fit(X).labels_`` (a dask array for dask input)."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def predict(self, X: Any) -> Any:
        """Nearest centre of each row; a lazy dask array for dask input, else as :class:`HartiganKMeans`."""
        if not is_dask_array(X):
            return super().predict(X)
        check_is_fitted(self)
        c = self.cluster_centers_
        if X.ndim != 2 or X.shape[1] != c.shape[1]:
            raise ValueError(f"X has {X.shape[1] if X.ndim == 2 else '?'} features, expected {c.shape[1]}")
        Xc = X.astype(c.dtype).rechunk({1: -1})
        return Xc.map_blocks(
            lambda b: _core.kmeans_predict(np.ascontiguousarray(b), c, 1), drop_axis=1, dtype=np.int32
        )


def route_blocked(est: HartiganKMeans, X: Any, sample_weight: Any) -> HartiganKMeans | None:
    """`HartiganKMeans.fit` on a dask array, or with ``algorithm="blocked-hartigan" / "blocked-lloyd"``:
    fit a :class:`DaskHartiganKMeans` with the same parameters and copy its fitted attributes onto
    ``est``. Returns None when the ordinary single-machine path applies."""
    alg = str(est.algorithm)
    dask_in = is_dask_array(X)
    if not dask_in and not alg.startswith("blocked-"):
        return None
    base = alg.removeprefix("blocked-")
    base = "lloyd" if base == "elkan" else base
    init = est.init
    p = est.get_params(deep=False)
    p.pop("algorithm")
    p.pop("init")
    inner = DaskHartiganKMeans(**p, algorithm=base, init=init)  # type: ignore[arg-type]
    inner.fit(X, sample_weight=sample_weight)
    for name, value in vars(inner).items():
        if name.endswith("_") and not name.startswith("__"):
            setattr(est, name, value)
    return est


__all__ = ["DaskHartiganKMeans", "WorkerLostError", "is_dask_array"]
