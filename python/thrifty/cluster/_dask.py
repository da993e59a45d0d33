"""`DaskHartiganKMeans`: k-means on a ``dask.array`` (or a NumPy array, the same blocked algorithm on
one machine) with scikit-learn's KMeans interface. See :mod:`thrifty.cluster._blocked` for the algorithm
and ``docs/scale.md`` for how it distributes."""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from thrifty import _core
from thrifty._dask_util import is_dask_array
from thrifty._validation import RandomState
from thrifty.cluster._blocked import DEFAULT_BLOCK_ROWS
from thrifty.cluster._dask_executor import WorkerLostError
from thrifty.cluster._hartigan import _MAX_INT, HartiganKMeans


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
    n_init : "auto" or int, default="auto"
        Runs from different k-means‖ seeds, the lowest inertia wins (``"auto"``: 1, k-means‖
        already oversamples; explicit centres run once). Run 0 uses ``random_state`` itself.
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
        ``sample_weight`` NaN/inf, negative, all zero or of the wrong length; bad parameters; no
        client for dask input.
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

    _parameter_constraints: dict[str, Any] = {
        **HartiganKMeans._parameter_constraints,
        "init": [StrOptions({"k-means||", "k-means++"}), "array-like"],
        "algorithm": [StrOptions({"hartigan", "lloyd"})],
        "block_rows": [Interval(Integral, 1, _MAX_INT, closed="both")],
        "init_rounds": [Interval(Integral, 0, _MAX_INT, closed="both")],
        "oversampling": [Interval(Real, 0, np.finfo(np.float64).max, closed="right")],
        "max_hartigan_rounds": [Interval(Integral, 0, _MAX_INT, closed="both")],
        "client": "no_validation",
    }

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

    def fit(self, X: Any, y: Any = None, sample_weight: npt.ArrayLike | None = None,
            *, _on_iteration: Callable[[str, int], None] | None = None) -> DaskHartiganKMeans:
        """Compute the clustering.

        Parameters
        ----------
        X : dask.array.Array or array-like of shape (n_samples, n_features)
            float32 stays float32, other real dtypes become float64. Chunks along the features are
            merged (rechunked to full rows); the rows are rechunked to ``block_rows``.
        y : ignored
        sample_weight : dask.array.Array or array-like of shape (n_samples,), default=None
            Non-negative weights, not all zero, cut into the same blocks as ``X``: weighted means,
            inertia, k-means‖ sampling and Hartigan size factors. Equal weights give the unit-weight
            centres and labels bit for bit; a zero-weight point never moves a centre and is labelled
            with its nearest one.

        Returns
        -------
        self
        """
        self._validate_params()
        self._fit_blocked(
            X, sample_weight, algorithm=str(self.algorithm), block_rows=int(self.block_rows),
            init_rounds=int(self.init_rounds), oversampling=float(self.oversampling),
            max_hartigan_rounds=int(self.max_hartigan_rounds), client=self.client, on_iteration=_on_iteration,
        )
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


__all__ = ["DaskHartiganKMeans", "WorkerLostError", "is_dask_array"]
