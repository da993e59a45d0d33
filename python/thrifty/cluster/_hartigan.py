"""`HartiganKMeans`: scikit-learn's KMeans interface over thrifty's Rust k-means core."""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from thrifty import _core
from thrifty._validation import RandomState, check_n_jobs, physical_memory, seed_from_random_state

InitType = Literal["k-means++", "random"] | npt.ArrayLike | Callable[..., Any]


def _canonical_csr(X: Any) -> Any:
    """X as CSR without duplicate entries (the core's row norms need summed duplicates); a copy
    only when X has duplicates or unsorted indices, never a change to the caller's matrix."""
    X = X.tocsr() if X.format != "csr" else X
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def _core_args(X: Any) -> tuple[npt.NDArray[Any], _core._CsrParts | None]:
    """What the core's ``x`` and ``csr`` arguments get: a dense array as is; for CSR its data (read
    in place) and its structure (indices as uint32, indptr as uint64: O(nnz) integers, the values
    are not copied and the matrix is never densified)."""
    if not sp.issparse(X):
        return X, None
    n_features = X.shape[1]
    if n_features >= 2**32:
        raise ValueError(f"X: sparse input with {n_features} features is not supported (at most 2**32 - 1)")
    data = np.ascontiguousarray(X.data)
    return data, (
        np.ascontiguousarray(X.indices, dtype=np.uint32),
        np.ascontiguousarray(X.indptr, dtype=np.uint64),
        int(n_features),
    )


def _all_finite(X: Any) -> bool:
    return bool(np.isfinite(X.data if sp.issparse(X) else X).all())


# the budget of _check_memory (a module-level name, so tests can lower it)
_physical_memory = physical_memory


def _fit_bytes_per_cluster(n_features: int, itemsize: int) -> int:
    """Working memory of one cluster in a fit: ~8 f64 copies of its centre (means, sums, drift,
    previous means, per-block partial sums) plus its column in every thread's 256-row distance tile."""
    return 8 * 8 * n_features + 256 * itemsize * (os.cpu_count() or 1)


def _check_memory(name: str, count: int, bytes_each: int, what: str | None = None) -> None:
    """``ValueError`` naming ``name`` before anything is allocated when ``count × bytes_each`` exceeds
    the machine's physical memory (instead of an abort or the OOM killer)."""
    need = count * bytes_each
    have = _physical_memory()
    if need > have:
        raise ValueError(
            f"{name}: {what or f'{name}={count}'} needs about {need / 2**30:.3g} GiB, more than this "
            f"machine's {have / 2**30:.3g} GiB of memory"
        )


class HartiganKMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):  # type: ignore[misc]
    """K-means clustering by batched Hartigan moves (default) or bounded Lloyd iterations.

    Hartigan's rule moves a point from cluster *a* to *b* whenever that lowers the within-cluster sum
    of squares, i.e. when ``W_b/(W_b+w)·‖x−c_b‖² < W_a/(W_a−w)·‖x−c_a‖²`` (``W`` = cluster weight,
    ``w`` = the point's weight). Its local optima are a subset of Lloyd's fixed points, so it reaches
    lower inertia from the same start and escapes the high-dimensional noise regime where Lloyd
    returns its initialisation. thrifty makes it as fast as Lloyd: triangle-inequality bounds with
    Hartigan's size factors certify points that cannot move; moves to a strictly nearer centre are
    applied together in parallel (always safe: the SSE cannot increase); the few remaining
    Hartigan-only moves are applied one by one with O(d) updates. The SSE never increases. The run
    starts with Lloyd's rule (the same steps as ``algorithm="lloyd"``) and switches to Hartigan's
    once Lloyd is at a fixed point, so from the same start it ends at or below
    :class:`sklearn.cluster.KMeans`' inertia (Hartigan's size factors favour small clusters: used from
    the start they keep alive the clusters that Lloyd empties and relocates to where they are
    needed). A batch may empty a cluster; it is re-seeded in the same iteration, so every fitted
    cluster is non-empty whenever ``X`` has at least ``n_clusters`` distinct rows. ``algorithm="lloyd"`` runs Lloyd's algorithm
    with the same bounds and fused distance tiles and follows :class:`sklearn.cluster.KMeans` step
    for step from the same start, empty clusters included (relocated to the points farthest from
    their centres, as scikit-learn does).

    The parameters and fitted attributes follow :class:`sklearn.cluster.KMeans`. ``X`` may be dense
    or CSR (scipy.sparse; other sparse formats are converted to CSR): CSR is read in place by sparse
    distance kernels (``‖x‖² − 2x·c + ‖c‖²`` with sparse dots, centre sums from the non-zeros), never
    densified, and gives the dense result on the same data. Of scikit-learn's estimator checks,
    exactly ``check_sample_weight_equivalence_on_dense_data`` and
    ``check_sample_weight_equivalence_on_sparse_data`` fail, as scikit-learn expects of KMeans.

    Parameters
    ----------
    n_clusters : int, default=8
        Number of clusters ``k`` (>= 1, <= n_samples).
    init : {"k-means++", "random"}, array of shape (n_clusters, n_features) or callable, default="k-means++"
        Greedy k-means++ (scikit-learn's semantics: 2 + ⌊ln k⌋ local trials, weighted), ``k``
        distinct rows drawn ∝ sample weight, explicit centres, or ``callable(X, n_clusters,
        random_state) -> centres``.
    n_init : "auto" or int, default="auto"
        Number of runs from different initialisations (run in parallel); the lowest inertia wins.
        ``"auto"``: 1 for k-means++ or explicit centres, 10 for "random" or a callable.
    max_iter : int, default=300
        Maximum number of iterations of one run.
    tol : float, default=1e-4
        Stop when the squared centre shift ``Σ‖Δc‖²`` is at most ``tol`` times the mean per-feature
        variance of ``X`` (scikit-learn's rule). ``tol=0`` runs to a fixed point: a Hartigan local
        optimum (no single move lowers the weighted SSE) or a Lloyd fixed point.
    verbose : int, default=0
        Print one line per iteration of the best run after fitting.
    random_state : None, int or numpy Generator, default=None
        Seeds initialisation; the seed used is stored in ``seed_``. Results are identical for any
        ``n_jobs``.
    copy_x : bool, default=True
        Accepted for compatibility with scikit-learn; ``X`` is never modified either way (the core
        centres a private working copy).
    algorithm : {"hartigan", "lloyd", "elkan", "blocked-hartigan", "blocked-lloyd"}, default="hartigan"
        Batched Hartigan (after a Lloyd phase, see above) or bounded Lloyd. ``"elkan"``
        (scikit-learn's triangle-inequality Lloyd, which gives Lloyd's result) runs our bounded
        Lloyd, which gives scikit-learn's Elkan result from the same start.
        ``"blocked-hartigan"`` / ``"blocked-lloyd"``: the scale-out algorithm of
        :class:`thrifty.cluster.DaskHartiganKMeans` on one machine (bit-identical to a Dask run);
        a ``dask.array`` ``X`` always takes that path.
    n_jobs : int or None, default=None
        Threads for the core (``None`` = all cores, ``-1`` = all cores, ``k`` = ``k`` threads, at
        most the CPU count).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features), dtype of X
        Cluster means (for Hartigan: the means of the final partition).
    labels_ : ndarray of shape (n_samples,), int32
        Cluster of each training point. For Hartigan these are the partition's labels, which may
        differ from nearest-centre labels (``predict``) for points near a boundary.
    inertia_ : float
        Weighted sum of squared distances of the training points to their cluster's centre.
    n_iter_ : int
        Iterations of the best run (>= 1).
    converged_ : bool
        Whether the best run stopped at a fixed point or below ``tol`` (rather than at ``max_iter``).
    seed_ : int
        The seed used (pass it as ``random_state`` to reproduce the fit).
    init_centers_ : ndarray of shape (n_clusters, n_features)
        The initial centres of the best run.
    iteration_stats_ : dict of ndarray
        Per iteration of the best run: ``certified`` (points the bounds proved unmovable),
        ``batch_moves``, ``relocated`` (points moved into clusters the batch emptied),
        ``sequential_moves``, ``sse_after_batch``, ``sse_after_sequential``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str (only when X has string column names)

    Raises
    ------
    ValueError
        At ``fit`` on NaN/inf, empty or 1-D input, complex input or strings that are not numbers,
        ``n_samples < n_clusters``, bad parameters, an ``init`` array of the wrong shape, negative /
        all-zero sample weights, or sizes whose working memory (``n_clusters`` centres and their
        buffers; the ``n_samples × n_clusters`` output of ``transform``) exceeds the machine's
        memory — the same exception types as :class:`sklearn.cluster.KMeans` for the same input.
    TypeError
        On object arrays holding non-numbers (as scikit-learn). Sparse input is accepted (CSR read
        in place; NaN/inf in its data raise ``ValueError`` as for dense input).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from thrifty.cluster import HartiganKMeans
    >>> X = load_digits().data
    >>> km = HartiganKMeans(n_clusters=10, random_state=0).fit(X)
    >>> km.cluster_centers_.shape, km.labels_.dtype.name
    ((10, 64), 'int32')
    >>> bool(km.inertia_ <= HartiganKMeans(10, algorithm="lloyd", init=km.init_centers_).fit(X).inertia_)
    True
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: InitType = "k-means++",
        n_init: Literal["auto"] | int = "auto",
        max_iter: int = 300,
        tol: float = 1e-4,
        verbose: int = 0,
        random_state: RandomState = None,
        copy_x: bool = True,
        algorithm: Literal["hartigan", "lloyd", "elkan", "blocked-hartigan", "blocked-lloyd"] = "hartigan",
        n_jobs: int | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.copy_x = copy_x
        self.algorithm = algorithm
        self.n_jobs = n_jobs

    # -- validation ---------------------------------------------------------------------------
    def _check_params(self, X: npt.NDArray[Any]) -> tuple[int, Any, int]:
        k = self.n_clusters
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
            raise TypeError(f"n_clusters must be an int, got {type(k).__name__}")
        if k < 1:
            raise ValueError(f"n_clusters must be >= 1, got {k}")
        n = X.shape[0]
        if n < k:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
        for name, value, low in (("max_iter", self.max_iter, 1),):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if not low <= value < 2**63:
                raise ValueError(f"{name} must be an int in [{low}, 2**63), got {value}")
        if isinstance(self.tol, (bool, np.bool_)) or not isinstance(self.tol, numbers.Real):
            raise TypeError(f"tol must be a float, got {type(self.tol).__name__}")
        if not (np.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"tol must be a finite number >= 0, got {self.tol}")
        if self.algorithm not in ("hartigan", "lloyd", "elkan"):
            raise ValueError(f"algorithm must be 'hartigan', 'lloyd' or 'elkan', got {self.algorithm!r}")
        _check_memory("n_clusters", k, _fit_bytes_per_cluster(X.shape[1], X.dtype.itemsize))

        init = self.init
        if isinstance(init, str):
            if init not in ("k-means++", "random"):
                raise ValueError(f"init must be 'k-means++', 'random', an array or a callable, got {init!r}")
        elif not callable(init):
            init = np.asarray(init)
            if init.dtype.kind not in "fiu":
                raise TypeError(f"init must be a numeric array, got dtype {init.dtype}")
            if init.shape != (k, X.shape[1]):
                raise ValueError(
                    f"The shape of the initial centers {init.shape} does not match the number of "
                    f"clusters and features: init must have shape ({k}, {X.shape[1]})"
                )
            init = np.ascontiguousarray(init, dtype=X.dtype)
            if not np.isfinite(init).all():
                raise ValueError("init contains NaN or infinity")

        n_init = self.n_init
        if isinstance(n_init, str):
            if n_init != "auto":
                raise ValueError(f"n_init must be 'auto' or an int >= 1, got {n_init!r}")
            n_init = 10 if (callable(init) or (isinstance(init, str) and init == "random")) else 1
        elif isinstance(n_init, (bool, np.bool_)) or not isinstance(n_init, numbers.Integral):
            raise TypeError(f"n_init must be 'auto' or an int, got {type(n_init).__name__}")
        elif not 1 <= n_init < 2**63:
            raise ValueError(f"n_init must be 'auto' or an int in [1, 2**63), got {n_init}")
        if isinstance(init, np.ndarray) and n_init != 1:
            warnings.warn(
                f"Explicit initial center position passed: performing only one init in "
                f"{type(self).__name__} instead of n_init={n_init}.",
                RuntimeWarning,
                stacklevel=3,
            )
            n_init = 1
        return int(k), init, int(n_init)

    # -- fitting ------------------------------------------------------------------------------
    def _validate_train(self, X: Any) -> Any:
        # NaN/inf are rejected by the core in its first read pass ("X contains NaN or infinity"),
        # which saves scikit-learn's separate scan of the whole array.
        Xv: Any = validate_data(
            self, X, dtype=[np.float64, np.float32], order="C", accept_sparse="csr", copy=False,
            ensure_all_finite=False,
        )
        return _canonical_csr(Xv) if sp.issparse(Xv) else Xv

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def fit(self, X: Any, y: Any = None, sample_weight: npt.ArrayLike | None = None) -> HartiganKMeans:
        """Compute the clustering.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training data, dense or CSR (other sparse formats are converted to CSR); float32 stays
            float32, other real dtypes become float64. Not modified, never densified.
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, not all zero; honoured by both algorithms (weighted means and
            Hartigan's weighted size factors).

        Returns
        -------
        self : HartiganKMeans
        """
        # Scale-out: a dask array, or algorithm="blocked-hartigan"/"blocked-lloyd" (its single-machine
        # twin), goes to the blocked k-means (thrifty.cluster._dask).
        from thrifty.cluster._dask import route_blocked

        if route_blocked(self, X, sample_weight) is not None:
            return self
        X = self._validate_train(X)
        k, init, n_init = self._check_params(X)
        # No weights: the core uses unit weights itself (no n-vector of ones to build and re-check).
        sw: npt.NDArray[np.float64] | None = None
        if sample_weight is not None:
            sw = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
            sw = np.ascontiguousarray(sw, dtype=np.float64)
        seed = seed_from_random_state(self.random_state)
        threads = check_n_jobs(self.n_jobs)

        algorithm: Literal["hartigan", "lloyd"] = "hartigan" if self.algorithm == "hartigan" else "lloyd"

        x_arg, csr = _core_args(X)

        def core_fit(init_arg: Any, runs: int) -> _core.KMeansFit:
            return _core.kmeans_fit(
                x_arg, sw, init_arg, n_clusters=k, n_init=runs, max_iter=int(self.max_iter),
                tol=float(self.tol), algorithm=algorithm, seed=seed, n_jobs=threads, csr=csr,
            )

        if callable(init):
            if not _all_finite(X):  # before the user's callable sees the data
                raise ValueError("X contains NaN or infinity")
            best: _core.KMeansFit | None = None
            for run in range(n_init):
                rs = np.random.RandomState((seed + run) % (2**32))
                centers = init(X, k, rs)
                centers = np.ascontiguousarray(centers.toarray() if sp.issparse(centers) else centers, dtype=X.dtype)
                if centers.shape != (k, X.shape[1]):
                    raise ValueError(f"init callable returned shape {centers.shape}, expected ({k}, {X.shape[1]})")
                res = core_fit(centers, 1)
                if best is None or res["inertia"] < best["inertia"]:
                    best = res
            assert best is not None
            result = best
        else:
            result = core_fit(init, n_init)

        self.cluster_centers_ = result["cluster_centers"]
        self.labels_ = result["labels"]
        self.inertia_ = float(result["inertia"])
        if not np.isfinite(self.inertia_):  # scikit-learn reports inf too, silently
            warnings.warn(
                "inertia_ overflows float64 (squared distances of X, times sample_weight, exceed 1.8e308); "
                "it is reported as inf and the assignment may be unreliable: rescale X",
                RuntimeWarning,
                stacklevel=2,
            )
        self.n_iter_ = int(result["n_iter"])
        self.converged_ = bool(result["converged"])
        self.seed_ = seed
        self.init_centers_ = result["init_centers"]
        self.iteration_stats_ = {
            key: result[key]
            for key in ("certified", "batch_moves", "relocated", "sequential_moves", "sse_after_batch", "sse_after_sequential")
        }
        self._n_features_out = k
        distinct = len({row.tobytes() for row in self.cluster_centers_})  # np.unique(axis=0) costs ms
        if distinct < k:
            warnings.warn(
                f"Number of distinct clusters ({distinct}) found smaller than n_clusters ({k}). "
                "Possibly due to duplicate points in X.",
                ConvergenceWarning,
                stacklevel=2,
            )
        if self.verbose:
            self._print_stats(X.shape[0])
        return self

    def _print_stats(self, n: int) -> None:
        s = self.iteration_stats_
        print(f"{type(self).__name__}({self.algorithm}): {self.n_iter_} iterations, inertia {self.inertia_:.6g}")
        for i in range(len(s["certified"])):
            print(
                f"  iteration {i + 2:3d}: certified {s['certified'][i] / n:6.1%}  batch moves "
                f"{int(s['batch_moves'][i]):7d}  sequential moves {int(s['sequential_moves'][i]):6d}  "
                f"SSE {s['sse_after_sequential'][i]:.6g}"
            )

    def fit_predict(self, X: Any, y: Any = None, sample_weight: npt.ArrayLike | None = None) -> npt.NDArray[np.int32]:
        """Fit and return ``labels_`` (shape (n_samples,), int32)."""
        return self.fit(X, sample_weight=sample_weight).labels_

    def fit_transform(self, X: Any, y: Any = None, sample_weight: npt.ArrayLike | None = None) -> npt.NDArray[Any]:
        """Fit and return the distances of ``X`` to the centres, shape (n_samples, n_clusters)."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    # -- using a fitted model ---------------------------------------------------------------------
    def _check_test_data(self, X: Any) -> Any:
        check_is_fitted(self)
        Xv = validate_data(self, X, dtype=[np.float64, np.float32], order="C", accept_sparse="csr", reset=False, copy=False)
        dtype = self.cluster_centers_.dtype
        if sp.issparse(Xv):
            return _canonical_csr(Xv.astype(dtype, copy=False))
        return np.ascontiguousarray(Xv, dtype=dtype)

    def predict(self, X: Any) -> npt.NDArray[np.int32]:
        """Index of the nearest centre of each row.

        Parameters
        ----------
        X : array-like or CSR sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        labels : ndarray of shape (n_samples,), int32

        Raises
        ------
        ValueError / TypeError
            As :class:`sklearn.cluster.KMeans` for bad input; ``KeyboardInterrupt`` within a
            fraction of a second on Ctrl-C.
        """
        x_arg, csr = _core_args(self._check_test_data(X))
        return _core.kmeans_predict(x_arg, self.cluster_centers_, check_n_jobs(self.n_jobs), csr=csr)

    def transform(self, X: Any) -> npt.NDArray[Any]:
        """Euclidean distances to every centre.

        Parameters
        ----------
        X : array-like or CSR sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        distances : ndarray of shape (n_samples, n_clusters), dtype of ``cluster_centers_``

        Raises
        ------
        ValueError
            When the ``n_samples × n_clusters`` output would exceed the machine's memory (checked
            before allocating), and for bad input as :class:`sklearn.cluster.KMeans`.
        """
        Xv = self._check_test_data(X)
        _check_memory("n_clusters", Xv.shape[0] * len(self.cluster_centers_), Xv.dtype.itemsize,
                      what=f"the {Xv.shape[0]} x {len(self.cluster_centers_)} distances of transform")
        x_arg, csr = _core_args(Xv)
        return _core.kmeans_transform(x_arg, self.cluster_centers_, check_n_jobs(self.n_jobs), csr=csr)

    def score(self, X: Any, y: Any = None, sample_weight: npt.ArrayLike | None = None) -> float:
        """Opposite of the weighted inertia of ``X`` against the fitted centres (nearest-centre).

        Computed in O(n_samples) memory (no distance matrix); interruptible with Ctrl-C.
        Returns a float; raises as :meth:`predict`.
        """
        Xv = self._check_test_data(X)
        sw = _check_sample_weight(sample_weight, Xv, dtype=np.float64, ensure_non_negative=True)
        sw = np.ascontiguousarray(sw, dtype=np.float64)
        x_arg, csr = _core_args(Xv)
        return -_core.kmeans_inertia(x_arg, self.cluster_centers_, sw, check_n_jobs(self.n_jobs), csr=csr)
