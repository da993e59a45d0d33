"""`HartiganKMeans`: scikit-learn's KMeans interface over thrifty's Rust k-means core."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from numbers import Integral, Real
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
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_array,
    check_is_fitted,
    validate_data,
)

from thrifty import _core
from thrifty._dask_util import is_dask_array
from thrifty._validation import RandomState, check_n_jobs, physical_memory, seed_from_random_state
from thrifty._warn import warn
from thrifty.cluster._blocked import DEFAULT_BLOCK_ROWS, BlockedResult, LocalExecutor, fit_blocked
from thrifty.cluster._dask_executor import DaskExecutor, dask_client
from thrifty.cluster._scale import extreme_exponent, looks_out_of_range, scaled, unscaled_sq, warn_out_of_range

InitType = Literal["k-means++", "random"] | npt.ArrayLike | Callable[..., Any]


def _canonical_csr(X: Any) -> Any:
    """X as CSR without duplicate entries (the core's row norms need summed duplicates); a copy
    only when X has duplicates or unsorted indices, never a change to the caller's matrix."""
    if X.format == "csr":
        # A view on the caller's arrays: scipy caches the answer of ``has_canonical_format`` on the
        # object it asks, and the caller's object must come back exactly as it was passed.
        X = type(X)((X.data, X.indices, X.indptr), shape=X.shape, copy=False)
    else:
        X = X.tocsr()
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


def _scaled_init(init: Any, e: int, X: Any) -> Any:
    """``init`` for a fit on ``X · 2**-e``: explicit centres scaled alike; a callable still sees the
    caller's X and its centres are scaled."""
    if isinstance(init, str):
        return init
    if callable(init):
        return lambda _x, k, rs: scaled(np.asarray(init(X, k, rs), dtype=X.dtype), e)
    return scaled(np.asarray(init), e)


def _unscaled_fit(result: _core.KMeansFit, e: int) -> _core.KMeansFit:
    """A fit on ``X · 2**-e`` in X's units: centres × 2**e, inertia and SSE traces × 4**e."""
    out = result.copy()
    with np.errstate(over="ignore", under="ignore"):
        for key in ("cluster_centers", "init_centers"):
            out[key] = scaled(result[key], -e)
        for key in ("sse_after_batch", "sse_after_sequential"):
            out[key] = np.ldexp(result[key], 2 * e)  # type: ignore[literal-required]
    out["inertia"] = unscaled_sq(result["inertia"], e)
    return out


def _unscaled_blocked(res: BlockedResult, e: int) -> BlockedResult:
    """A blocked fit on ``X · 2**-e`` in X's units (as :func:`_unscaled_fit`)."""
    with np.errstate(over="ignore", under="ignore"):
        return dataclasses.replace(
            res, centers=scaled(res.centers, -e), init_centers=scaled(res.init_centers, -e),
            inertia=unscaled_sq(res.inertia, e), lloyd_sse=[unscaled_sq(v, e) for v in res.lloyd_sse],
            hartigan_sse=[unscaled_sq(v, e) for v in res.hartigan_sse],
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


def _check_init_array(init: Any, k: int, d: int, dtype: Any) -> npt.NDArray[Any]:
    """Explicit initial centres (an ``init`` array, or what an ``init`` callable returned) as a
    C-contiguous array of ``dtype``: numeric, shape (k, d) (scikit-learn's messages), finite."""
    centers = np.asarray(init.toarray() if sp.issparse(init) else init)
    if centers.dtype.kind not in "fiu":
        raise TypeError(f"init must be a numeric array, got dtype {centers.dtype}")
    if centers.ndim != 2 or centers.shape[0] != k:
        raise ValueError(
            f"The shape of the initial centers {centers.shape} does not match the number of clusters {k}."
        )
    if centers.shape[1] != d:
        raise ValueError(
            f"The shape of the initial centers {centers.shape} does not match the number of features "
            f"of the data {d}."
        )
    centers = np.ascontiguousarray(centers, dtype=dtype)
    if not np.isfinite(centers).all():
        raise ValueError("init contains NaN or infinity")
    return centers


def _resolve_n_init(n_init: Any, init: Any, runs_for_auto: int, name: str) -> int:
    """scikit-learn's ``n_init``: ``"auto"`` is ``runs_for_auto`` (1 for k-means++/k-means‖, 10 for
    "random" or a callable); explicit centres run once (with scikit-learn's warning for n_init > 1)."""
    runs = runs_for_auto if n_init == "auto" else int(n_init)
    if isinstance(init, np.ndarray) and runs != 1:
        warn(
            f"Explicit initial center position passed: performing only one init in {name} instead "
            f"of n_init={runs}.",
            RuntimeWarning,
        )
        runs = 1
    return runs


def _run_seed(seed: int, run: int) -> int:
    """The seed of run ``run`` of a blocked fit with ``n_init`` runs (run 0 uses ``seed`` itself,
    so ``n_init=1`` is the single run)."""
    if run == 0:
        return seed
    return int(np.random.SeedSequence([seed, run]).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


_MAX_INT = 2**63 - 1


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

    Notes
    -----
    Drop-in notes. scikit-learn's own ``sklearn/cluster/tests/test_k_means.py`` passes with this
    class as ``KMeans`` (``tests/cluster/sklearn_suite.py``), except ``test_kmeans_elkan_results``,
    which expects the default algorithm to give Elkan's result. Where we differ on purpose:

    - The default ``algorithm="hartigan"`` reaches a lower inertia than Lloyd from the same start;
      its ``labels_`` are the partition's, which may differ from ``predict`` near a boundary.
      ``"lloyd"`` and ``"elkan"`` follow :class:`sklearn.cluster.KMeans` step for step (empty
      clusters relocated as scikit-learn does; a cluster that cannot be re-seeded because every point
      sits on its centre stays empty at the heaviest cluster's mean, as in scikit-learn).
    - ``verbose`` prints scikit-learn's lines ("Initialization complete", "Iteration i, inertia …",
      "Converged at iteration i: strict convergence." or "…: center shift … within tolerance …")
      after the fit, for the best run only, with our per-iteration counts; the inertia printed is
      the SSE after the iteration's moves.
    - ``random_state`` may also be a NumPy ``Generator``; ``seed_`` records the seed used.
    - A ``dask.array`` ``X`` (or ``algorithm="blocked-hartigan"`` / ``"blocked-lloyd"``) runs the
      blocked k-means of :class:`DaskHartiganKMeans`; there ``init`` is k-means‖ ("k-means++") or an
      array, ``n_init > 1`` keeps the best run, and ``sample_weight`` weights every block's totals
      (equal weights give the unit-weight result; a zero-weight point never moves a centre).

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

    _parameter_constraints: dict[str, Any] = {
        "n_clusters": [Interval(Integral, 1, _MAX_INT, closed="both")],
        "init": [StrOptions({"k-means++", "random"}), callable, "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, _MAX_INT, closed="both")],
        "max_iter": [Interval(Integral, 1, _MAX_INT, closed="both")],
        "tol": [Interval(Real, 0, np.finfo(np.float64).max, closed="both")],
        "verbose": ["verbose"],
        "random_state": [None, Integral, np.random.RandomState, np.random.Generator],
        "copy_x": ["boolean"],
        "algorithm": [StrOptions({"hartigan", "lloyd", "elkan", "blocked-hartigan", "blocked-lloyd"})],
        "n_jobs": [None, Integral],
    }

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

    # -- validation (the parameters' types and ranges: _parameter_constraints) ---------------------
    def _check_params(self, X: npt.NDArray[Any]) -> tuple[int, Any, int]:
        """What depends on the data: n_samples >= n_clusters, the working memory, the init array's
        shape, ``n_init="auto"``. Returns (n_clusters, init, n_init)."""
        k = int(self.n_clusters)
        if X.shape[0] < k:
            raise ValueError(f"n_samples={X.shape[0]} should be >= n_clusters={k}.")
        _check_memory("n_clusters", k, _fit_bytes_per_cluster(X.shape[1], X.dtype.itemsize))
        init = self.init
        if not (isinstance(init, str) or callable(init)):
            init = _check_init_array(init, k, X.shape[1], X.dtype)
        auto = 10 if (callable(init) or (isinstance(init, str) and init == "random")) else 1
        if self.algorithm == "elkan" and k == 1:
            warn(
                "algorithm='elkan' doesn't make sense for a single cluster. Using 'lloyd' instead.",
                RuntimeWarning,
            )
        return k, init, _resolve_n_init(self.n_init, init, auto, type(self).__name__)

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
        X : array-like, sparse matrix or dask array of shape (n_samples, n_features)
            Training data, dense or CSR (other sparse formats are converted to CSR); float32 stays
            float32, other real dtypes become float64. Not modified, never densified. A
            ``dask.array`` is fitted by the blocked k-means on its client (as
            ``algorithm="blocked-hartigan"``, or ``"blocked-lloyd"`` for ``"lloyd"``/``"elkan"``).
        y : ignored
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, not all zero; honoured by both algorithms (weighted means and
            Hartigan's weighted size factors).

        Returns
        -------
        self : HartiganKMeans
        """
        self._validate_params()
        algorithm = str(self.algorithm)
        if is_dask_array(X) or algorithm.startswith("blocked-"):
            base = algorithm.removeprefix("blocked-")
            return self._fit_blocked(X, sample_weight, algorithm="lloyd" if base == "elkan" else base)
        X = self._validate_train(X)
        k, init, n_init = self._check_params(X)
        # No weights: the core uses unit weights itself (no n-vector of ones to build and re-check).
        sw: npt.NDArray[np.float64] | None = None
        if sample_weight is not None:
            sw = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
            sw = np.ascontiguousarray(sw, dtype=np.float64)
        seed = seed_from_random_state(self.random_state)
        if self.verbose:
            print("Initialization complete")
        result = self._fit_core(X, sw, k, init, n_init, seed)
        scaled_inertia = None
        if looks_out_of_range(result["inertia"], result["cluster_centers"]) and (e := extreme_exponent(X)):
            # Squared distances left the float range: the same runs on X · 2**-e (exact; see _scale).
            rescaled = self._fit_core(scaled(X, e), sw, k, _scaled_init(init, e, X), n_init, seed)
            if np.isfinite(rescaled["cluster_centers"]).all():
                scaled_inertia = rescaled["inertia"]
                result = _unscaled_fit(rescaled, e)
        self._set_core_result(result, seed, n_init)
        warn_out_of_range(self.inertia_, scaled_inertia)
        self._warn_if_fewer_distinct(k)
        if self.verbose:
            self._print_stats(X.shape[0])
        return self

    def _fit_core(
        self, X: Any, sw: npt.NDArray[np.float64] | None, k: int, init: Any, n_init: int, seed: int
    ) -> _core.KMeansFit:
        """The runs in the core (all of them in one call; one call per run for an ``init`` callable,
        which is called with a RandomState seeded by ``seed + run``); the lowest inertia wins."""
        algorithm: Literal["hartigan", "lloyd"] = "hartigan" if self.algorithm == "hartigan" else "lloyd"
        x_arg, csr = _core_args(X)

        def core_fit(init_arg: Any, runs: int) -> _core.KMeansFit:
            return _core.kmeans_fit(
                x_arg, sw, init_arg, n_clusters=k, n_init=runs, max_iter=int(self.max_iter),
                tol=float(self.tol), algorithm=algorithm, seed=seed, n_jobs=check_n_jobs(self.n_jobs), csr=csr,
            )

        if not callable(init):
            return core_fit(init, n_init)
        if not _all_finite(X):  # before the user's callable sees the data
            raise ValueError("X contains NaN or infinity")
        best: _core.KMeansFit | None = None
        for run in range(n_init):
            centers = init(X, k, np.random.RandomState((seed + run) % (2**32)))
            res = core_fit(_check_init_array(centers, k, X.shape[1], X.dtype), 1)
            if best is None or res["inertia"] < best["inertia"]:
                best = res
        assert best is not None
        return best

    def _set_core_result(self, result: _core.KMeansFit, seed: int, n_init: int) -> None:
        self.cluster_centers_ = result["cluster_centers"]
        self.labels_ = result["labels"]
        self.inertia_ = float(result["inertia"])
        self.n_iter_ = int(result["n_iter"])
        self.converged_ = bool(result["converged"])
        self.seed_ = seed
        self.init_centers_ = result["init_centers"]
        self.iteration_stats_ = {
            key: result[key]
            for key in ("certified", "batch_moves", "relocated", "sequential_moves", "sse_after_batch", "sse_after_sequential")
        }
        self._n_features_out = len(self.cluster_centers_)
        self._n_init = n_init

    def _warn_if_fewer_distinct(self, k: int) -> None:
        distinct = len({row.tobytes() for row in self.cluster_centers_})  # np.unique(axis=0) costs ms
        if distinct < k:
            warn(
                f"Number of distinct clusters ({distinct}) found smaller than n_clusters ({k}). "
                "Possibly due to duplicate points in X.",
                ConvergenceWarning,
            )

    def _print_stats(self, n: int) -> None:
        """scikit-learn's verbose lines for the best run (printed after the fit), with our counts."""
        s = self.iteration_stats_
        print(f"{type(self).__name__}({self.algorithm}): {self.n_iter_} iterations, inertia {self.inertia_:.6g}")
        for i in range(len(s["certified"])):
            print(
                f"Iteration {i + 1}, inertia {s['sse_after_sequential'][i]:.6g}. (certified "
                f"{s['certified'][i] / n:6.1%}, batch moves {int(s['batch_moves'][i])}, sequential moves "
                f"{int(s['sequential_moves'][i])})"
            )
        last = self.n_iter_ - 1
        if len(s["batch_moves"]) and s["batch_moves"][-1] + s["sequential_moves"][-1] == 0:
            print(f"Converged at iteration {last}: strict convergence.")
        elif self.converged_:
            print(
                f"Converged at iteration {last}: center shift (sum of squares) within tolerance "
                f"{self.tol} x the mean feature variance."
            )

    # -- the blocked (scale-out) k-means: a dask array, or algorithm="blocked-*" ------------------------
    def _fit_blocked(
        self,
        X: Any,
        sample_weight: Any,
        *,
        algorithm: str,
        block_rows: int = DEFAULT_BLOCK_ROWS,
        init_rounds: int = 5,
        oversampling: float = 2.0,
        max_hartigan_rounds: int = 300,
        client: Any = None,
        on_iteration: Callable[[str, int], None] | None = None,
    ) -> HartiganKMeans:
        """The blocked k-means (:func:`thrifty.cluster._blocked.fit_blocked`) on the executor that
        suits ``X``: a :class:`DaskExecutor` for a dask array, a :class:`LocalExecutor` otherwise;
        ``n_init`` runs (seeds from ``_run_seed``), the lowest inertia wins. ``sample_weight`` goes
        with the rows into the same blocks (see :class:`thrifty.cluster._blocked.WeightPlan`)."""
        if is_dask_array(X):
            Xv, sw = X, sample_weight
        else:
            Xv = self._validate_train(X)
            sw = None
            if sample_weight is not None:
                sw = _check_sample_weight(sample_weight, Xv, dtype=np.float64, ensure_non_negative=True)
        # Data beyond the safe range (see _scale) is fitted as X · 2**-e, exactly, and scaled back.
        # Checked up front here (one extra read; the blocked fit reads X many times): its k-means||
        # seeding cannot even start when the squared distances overflow.
        e = extreme_exponent(Xv)
        Xs = scaled(Xv, e) if e else Xv
        ex: Any
        if is_dask_array(Xs):
            ex = DaskExecutor(Xs, block_rows, dask_client(client), sw)
            self.n_features_in_ = ex.d
        else:
            ex = LocalExecutor(Xs, block_rows, self.n_jobs, sw)
        k, init, n_init = self._check_blocked_init(ex.n, ex.d)
        seed = seed_from_random_state(self.random_state)
        init = _scaled_init(init, e, Xv) if e else init  # once, not per run
        best: BlockedResult | None = None
        for run in range(n_init):
            res = fit_blocked(
                ex, n_clusters=k, init=init, max_iter=int(self.max_iter), tol=float(self.tol),
                algorithm=algorithm, seed=_run_seed(seed, run), init_rounds=init_rounds,
                oversampling=oversampling, max_hartigan_rounds=max_hartigan_rounds, on_iteration=on_iteration,
            )
            if best is None or res.inertia < best.inertia:
                best = res
        assert best is not None
        scaled_inertia = best.inertia if e else None
        if e:
            best = _unscaled_blocked(best, e)
        self._set_blocked_result(best, ex, seed, n_init)
        warn_out_of_range(self.inertia_, scaled_inertia)
        return self

    def _check_blocked_init(self, n: int, d: int) -> tuple[int, Any, int]:
        """(n_clusters, init, n_init) of a blocked fit: k-means‖ ("k-means++" is its alias) or
        explicit centres (float64)."""
        k = int(self.n_clusters)
        if n < k:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
        init = self.init
        if callable(init):
            raise TypeError("init: a callable is not supported by the blocked k-means (pass centres)")
        if isinstance(init, str):
            if init not in ("k-means||", "k-means++"):
                raise ValueError(f"init must be 'k-means||', 'k-means++' or an array, got {init!r}")
            init = "k-means||"
        else:
            init = _check_init_array(init, k, d, np.float64)
        return k, init, _resolve_n_init(self.n_init, init, 1, type(self).__name__)

    def _set_blocked_result(self, res: BlockedResult, ex: Any, seed: int, n_init: int) -> None:
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
        self._n_features_out = len(self.cluster_centers_)
        self._n_init = n_init

    def _init_centroids(
        self,
        X: Any,
        x_squared_norms: Any,
        init: Any,
        random_state: Any,
        sample_weight: Any,
        init_size: int | None = None,
        n_centroids: int | None = None,
    ) -> npt.NDArray[Any]:
        """scikit-learn's private initialisation hook (its own test suite calls it): the initial
        centres ``fit`` would start from for ``init`` ("k-means++", "random", an array or a
        callable), weighted by ``sample_weight``. ``x_squared_norms`` and ``init_size`` are ignored."""
        k = int(self.n_clusters if n_centroids is None else n_centroids)
        Xv = check_array(X, dtype=[np.float64, np.float32], order="C", accept_sparse="csr")
        Xv = _canonical_csr(Xv) if sp.issparse(Xv) else Xv
        if callable(init):
            return _check_init_array(init(Xv, k, random_state), k, Xv.shape[1], Xv.dtype)
        if not isinstance(init, str):
            return _check_init_array(init, k, Xv.shape[1], Xv.dtype)
        sw = np.ascontiguousarray(_check_sample_weight(sample_weight, Xv, dtype=np.float64), dtype=np.float64)
        x_arg, csr = _core_args(Xv)
        res = _core.kmeans_fit(
            x_arg, sw, init, n_clusters=k, n_init=1, max_iter=1, tol=0.0, algorithm="lloyd",
            seed=seed_from_random_state(random_state), n_jobs=check_n_jobs(self.n_jobs), csr=csr,
        )
        return res["init_centers"]

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

    def _test_args(self, Xv: Any) -> tuple[npt.NDArray[Any], _core._CsrParts | None, npt.NDArray[Any], int]:
        """The core's arguments for ``Xv`` against the centres, and ``e``: centres beyond the safe
        range (see _scale) are compared with ``Xv`` after both are rescaled by 2**-e (exact); 0 when
        they are not, the common case (no copy)."""
        centers = self.cluster_centers_
        e = extreme_exponent(centers)
        if e:
            Xv, centers = scaled(Xv, e), scaled(centers, e)
        x_arg, csr = _core_args(Xv)
        return x_arg, csr, centers, e

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
        x_arg, csr, centers, _ = self._test_args(self._check_test_data(X))
        return _core.kmeans_predict(x_arg, centers, check_n_jobs(self.n_jobs), csr=csr)

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
        x_arg, csr, centers, e = self._test_args(Xv)
        dist = _core.kmeans_transform(x_arg, centers, check_n_jobs(self.n_jobs), csr=csr)
        if e:
            with np.errstate(over="ignore"):
                dist = np.ldexp(dist, e).astype(centers.dtype)
        return dist

    def score(self, X: Any, y: Any = None, sample_weight: npt.ArrayLike | None = None) -> float:
        """Opposite of the weighted inertia of ``X`` against the fitted centres (nearest-centre).

        Computed in O(n_samples) memory (no distance matrix); interruptible with Ctrl-C.
        Returns a float; raises as :meth:`predict`.
        """
        Xv = self._check_test_data(X)
        sw = _check_sample_weight(sample_weight, Xv, dtype=np.float64, ensure_non_negative=True)
        sw = np.ascontiguousarray(sw, dtype=np.float64)
        x_arg, csr, centers, e = self._test_args(Xv)
        return -unscaled_sq(_core.kmeans_inertia(x_arg, centers, sw, check_n_jobs(self.n_jobs), csr=csr), e)
