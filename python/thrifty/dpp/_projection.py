"""Projection DPPs K = UUᵀ and orthonormalisation of feature matrices."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._dask_util import is_dask_array
from thrifty._validation import RandomState, seed_from_random_state
from thrifty._warn import warn
from thrifty.dpp import _dask
from thrifty.dpp._checks import (
    DeprecatedAlias,
    FloatArray,
    IntArray,
    ReducedRankWarning,
    check_int,
    check_jobs,
    check_matrix,
    check_positive_float,
    check_result_size,
    check_vector,
    readonly_copy,
    resolve_weights,
    run_chunked,
)

Method = Literal["accept_reject", "chain"]
Check = Literal["randomized", "exact"]

#: Random unit probes of the default orthonormality check.
_PROBES = 2
#: Below this many multiply-adds (n·p²) the exact check is cheaper than thinking about it.
_EXACT_BELOW = 2_000_000


def _default_rtol(dtype: np.dtype[Any]) -> float:
    return 1e-3 if dtype == np.float32 else 1e-6


def orthonormalize(features: Any, *, rtol: float | None = None, equilibrate: bool = True) -> FloatArray:
    """Orthonormal basis of the column space of a tall feature matrix.

    Direct TSQR (Householder QR of fixed blocks of 8192 rows, combined by one fixed binary tree; in
    float64 whatever the input precision), the numerical rank from the SVD of the p×p factor R, and
    ``Q = X·W``; a second TSQR pass refines the basis when R is ill-conditioned. Never forms an n×n
    matrix: O(np²) time, O(np) memory. Ctrl-C interrupts it (checked between row blocks).

    A tall ``dask.array`` is accepted too: the same tree runs over the chunks (re-cut to the 8192-row
    blocks if needed) and a lazy dask array ``Q`` comes back, equal bit for bit to the NumPy result
    on the same data, whatever the chunking or the number of workers.

    Parameters
    ----------
    features : array-like or dask.array of shape (n, p)
        float32 or float64 (kept); other real dtypes become float64; pandas frames accepted.
    rtol : float, optional
        Relative rank tolerance: directions with singular value below ``rtol · σ_max`` are dropped.
        Default ``1e-6`` (float64) or ``1e-3`` (float32).
    equilibrate : bool, default True
        Scale every column to unit norm first (the column space is unchanged), so the rank
        tolerance applies to the equilibrated matrix: a column of scale 1e-9 beside columns of
        scale 1 keeps its direction instead of being dropped. ``False`` applies ``rtol`` to the
        singular values of ``features`` as given.

    Returns
    -------
    Q : ndarray of shape (n, r), same float dtype (a lazy dask array for dask input)
        ``QᵀQ = I_r`` and ``span(Q) = span(features)`` up to the tolerance; ``r`` is the numerical rank.

    Raises
    ------
    ValueError
        Empty input, NaN/inf, all-zero features, or ``rtol`` outside (0, 1).
    TypeError
        Non-numeric input.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import orthonormalize
    >>> X = np.random.default_rng(0).normal(size=(1000, 5))
    >>> Q = orthonormalize(X)
    >>> Q.shape, bool(np.allclose(Q.T @ Q, np.eye(5)))
    ((1000, 5), True)
    """
    if is_dask_array(features):
        tol = _default_rtol(features.dtype) if rtol is None else check_positive_float(rtol, "rtol")
        if not tol < 1:
            raise ValueError(f"rtol must be strictly between 0 and 1, got {tol}")
        lazy: FloatArray = _dask.orthonormalize(features, tol, bool(equilibrate))
        return lazy
    x = check_matrix(features, "features", finite=False)
    tol = _default_rtol(x.dtype) if rtol is None else check_positive_float(rtol, "rtol")
    if not tol < 1:
        raise ValueError(f"rtol must be strictly between 0 and 1, got {tol}")
    out = _core.dpp_orthonormalize(x, tol, bool(equilibrate))
    return np.asarray(out["basis"])


class ProjectionDPP:
    """Projection DPP with marginal kernel ``K = UUᵀ`` (``UᵀU = I_p``): every sample has exactly p items.

    Parameters
    ----------
    U : array-like of shape (n, p)
        Orthonormal columns (use :func:`orthonormalize` or :meth:`from_features` otherwise).
        float32 is kept end to end.
    copy : bool, default False
        ``False`` (like SciPy's ``cKDTree(copy_data=False)`` and scikit-learn's fitted data): the
        sampler keeps a read-only view of U, no 8·n·p-byte copy; U itself stays writeable, and
        modifying it afterwards changes what the sampler draws. ``True`` stores a private
        read-only copy (one more pass over U and its memory).
    check : True, "randomized", "exact" or False, default True
        How orthonormality is verified, with ``tol = 1e-6`` (float64) or ``1e-3`` (float32).
        ``True``/``"randomized"``: O(np), fused with the pass that computes the leverage scores:
        ``‖(UᵀU − I)z‖ ≤ tol`` for two independent random unit vectors z. Every U with
        ``‖UᵀU − I‖₂ ≤ tol`` passes; a U with ``max |UᵀU − I| ≥ ε`` (hence ``‖UᵀU − I‖₂ ≥ ε``)
        passes with probability at most ``(0.8·√p·tol/ε)²`` (e.g. ≤ 6.4e-5 for p = 100 and
        ε = 1000·tol; for a U that is not orthonormal at all, ε ≈ 1, ≤ 1e-10). Small problems
        (n·p² ≤ 2e6) are checked exactly. ``"exact"``: ``max |UᵀU − I| ≤ tol``, O(np²).
        ``False`` trusts the caller (e.g. for a basis from :func:`orthonormalize`); the samplers
        still clamp and renormalise residuals.
    method : {"accept_reject", "chain"}, default "accept_reject"
        Exact sampler. ``"accept_reject"`` proposes items ∝ the leverage scores ``K_ii`` (a guide
        table: O(1) expected per draw) and accepts with probability residual/leverage (Barthelmé, Tremblay & Amblard
        2023): O(np) setup once, then O(p³ log p) per sample independent of n. ``"chain"`` is the
        chain rule with a full residual update per step (O(np²) per sample). Both are the same
        pivoted-Cholesky loop of the core and draw from the same distribution.

    Attributes
    ----------
    U : ndarray of shape (n, p)
    n_items, rank : int
    seed_ : int or None
        Seed used by the last sampling call (pass it back as ``random_state`` to reproduce it).
        ``last_seed_`` is a deprecated alias.

    Raises
    ------
    ValueError
        Empty U, NaN/inf, more columns than rows, or columns that are not orthonormal.

    Notes
    -----
    Instances pickle and deep-copy (the sampler is rebuilt from U without a new check) and sample
    the same after a round trip.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import ProjectionDPP
    >>> dpp = ProjectionDPP.from_features(np.random.default_rng(0).normal(size=(500, 10)))
    >>> dpp.sample(random_state=0).shape
    (10,)
    >>> dpp.sample_many(3, random_state=0).shape
    (3, 10)
    >>> bool(np.isclose(dpp.inclusion_probabilities().sum(), 10))
    True
    """

    last_seed_ = DeprecatedAlias[int]("seed_")

    def __init__(
        self, U: Any, *, method: Method = "accept_reject", copy: bool = False, check: bool | Check = True
    ) -> None:
        u = check_matrix(U, "U", finite=False)
        if u.shape[1] > u.shape[0]:
            raise ValueError(f"U must have at most as many columns as rows, got shape {u.shape}")
        self._method = self._check_method(method)
        mode = self._check_mode(check, u.shape)
        if copy:
            self.U: FloatArray = readonly_copy(u)
        else:
            self.U = u.view()
            self.U.setflags(write=False)
        tol = 1e-3 if u.dtype == np.float32 else 1e-6
        probe_seed = seed_from_random_state(None)
        self._core = _core.DppProjection(self.U, mode, tol, _PROBES, probe_seed)
        self._kdiag_cache: npt.NDArray[np.float64] | None = None
        self.n_items: int = int(u.shape[0])
        self.rank: int = int(u.shape[1])
        self.seed_: int | None = None

    @staticmethod
    def _check_mode(check: Any, shape: tuple[int, ...]) -> Literal["skip", "randomized", "exact"]:
        if check is False or (isinstance(check, (bool, np.bool_)) and not check):
            return "skip"
        if check is True or (isinstance(check, (bool, np.bool_)) and check) or check == "randomized":
            return "exact" if shape[0] * shape[1] ** 2 <= _EXACT_BELOW else "randomized"
        if check == "exact":
            return "exact"
        raise ValueError(f"check must be True, False, 'randomized' or 'exact', got {check!r}")

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_core", "_kdiag_cache")}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        u = np.ascontiguousarray(self.U)
        u.setflags(write=False)
        self.U = u
        self._core = _core.DppProjection(self.U, "skip")
        self._kdiag_cache = None

    @classmethod
    def from_features(
        cls, features: Any, *, rtol: float | None = None, method: Method = "accept_reject", equilibrate: bool = True
    ) -> ProjectionDPP:
        """The projection DPP onto the column space of ``features`` (orthonormalised first).

        The columns are equilibrated before the rank decision (see :func:`orthonormalize`), so
        badly scaled columns keep their directions. If the features are still numerically rank
        deficient (e.g. duplicated columns), the DPP has rank r < p: every sample has r items, and
        a :class:`ReducedRankWarning` says so (``rank`` records r).

        Given a tall ``dask.array``, returns a :class:`~thrifty.dpp.DistributedProjectionDPP`
        whose samples equal those of this method on the same data in NumPy, for the same seed.
        """
        if is_dask_array(features):
            dist: ProjectionDPP = _distributed_from_features(features, rtol, method, equilibrate)
            return dist
        x = check_matrix(features, "features", finite=False)
        q = orthonormalize(x, rtol=rtol, equilibrate=equilibrate)
        if q.shape[1] < x.shape[1]:
            warn(
                f"features have numerical rank {q.shape[1]} < {x.shape[1]} columns: the projection DPP has "
                f"rank {q.shape[1]}, so every sample has {q.shape[1]} items",
                ReducedRankWarning,
            )
        return cls(q, method=method, copy=False, check=False)

    @staticmethod
    def _check_method(method: Any) -> Method:
        if method not in ("accept_reject", "chain"):
            raise ValueError(f"method must be 'accept_reject' or 'chain', got {method!r}")
        m: Method = method
        return m

    def __repr__(self) -> str:
        return f"ProjectionDPP(n_items={self.n_items}, rank={self.rank}, dtype={self.U.dtype}, method={self._method!r})"

    def sample(self, random_state: RandomState = None, *, method: Method | None = None) -> IntArray:
        """One exact sample: int64 array of ``rank`` distinct item indices (in order of selection)."""
        out: IntArray = self.sample_many(1, random_state, method=method)[0]
        return out

    def sample_many(
        self,
        n_samples: int,
        random_state: RandomState = None,
        *,
        method: Method | None = None,
        n_jobs: int | None = None,
        progress: bool | None = None,
    ) -> IntArray:
        """``n_samples`` independent exact samples as an int64 array of shape (n_samples, rank).

        Sample ``s`` draws from its own random stream (seed, s), so results are identical for any
        ``n_jobs``. Long runs show a progress bar (``progress=None``: when longer than about a
        second; ``False`` never) and can be interrupted with Ctrl-C.
        """
        count = check_int(n_samples, "n_samples", minimum=1)
        check_result_size(count, self.rank, "n_samples", what="the samples (n_samples × sample size)")
        m = self._method if method is None else self._check_method(method)
        seed = seed_from_random_state(random_state)
        self.seed_ = seed
        nj = check_jobs(n_jobs)
        parts = run_chunked(count, lambda off, size: self._sample_range(size, seed, off, nj, m), progress, "DPP samples")
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _sample_range(
        self, count: int, seed: int, offset: int = 0, n_jobs: int | None = None, method: Method | None = None
    ) -> IntArray:
        """Samples number ``offset .. offset + count`` of the family seeded by ``seed``."""
        m = self._method if method is None else method
        out: IntArray = np.asarray(self._core.sample_many(count, m, seed, n_jobs, offset), dtype=np.int64)
        return out

    @property
    def _kdiag(self) -> npt.NDArray[np.float64]:
        # Copied out of the core on first use: a one-off sample does not pay for it.
        if self._kdiag_cache is None:
            self._kdiag_cache = np.asarray(self._core.leverage())
        return self._kdiag_cache

    def inclusion_probabilities(self) -> npt.NDArray[np.float64]:
        """``P(i ∈ S) = K_ii = ‖U_i‖²`` (float64, shape (n,), sums to rank)."""
        out: npt.NDArray[np.float64] = self._kdiag.copy()
        return out

    def exact_variance(self, g: Any, *, weights: Any = "unbiased") -> float:
        """Exact variance of the linear statistic ``Σ_{i∈S} w_i g_i``, without sampling.

        ``Var = Σ_i (w_i g_i)² K_ii − ‖Uᵀ diag(w g) U‖_F²`` — O(np²), no n×n matrix.

        Parameters
        ----------
        g : array-like of shape (n,)
        weights : "unbiased" (default), "none" or array-like of shape (n,)
            ``"unbiased"`` uses ``w_i = 1/K_ii``, so ``Σ_{i∈S} g_i/K_ii`` is an unbiased estimator of
            ``Σ_i g_i``; ``"none"`` uses ``w_i = 1``.
        """
        gv = check_vector(g, "g", self.n_items)
        w = resolve_weights(weights, self._kdiag, self.n_items)
        return float(_core.dpp_exact_variance(self.U, np.ascontiguousarray(w * gv, dtype=np.float64)))


def _distributed_from_features(features: Any, rtol: float | None, method: Method, equilibrate: bool) -> Any:
    """``ProjectionDPP.from_features`` on a dask array (TSQR on the cluster; see ``_dask``)."""
    if method != "accept_reject":
        raise ValueError(f"method must be 'accept_reject' for a dask array (the chain rule reads every row per step), got {method!r}")
    X = _dask.aligned(features, "features")
    tol = _default_rtol(X.dtype) if rtol is None else check_positive_float(rtol, "rtol")
    if not tol < 1:
        raise ValueError(f"rtol must be strictly between 0 and 1, got {tol}")
    W, rank = _dask.whitening(X, tol, bool(equilibrate))
    if rank < X.shape[1]:
        warn(
            f"features have numerical rank {rank} < {X.shape[1]} columns: the projection DPP has "
            f"rank {rank}, so every sample has {rank} items",
            ReducedRankWarning,
        )
    return _dask.DistributedProjectionDPP(X, W, rank)
