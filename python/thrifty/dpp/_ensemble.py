"""L-ensembles ``P(S) ∝ det L_S`` and k-DPPs."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import RandomState, seed_from_random_state
from thrifty.dpp._checks import (
    DeprecatedAlias,
    IntArray,
    check_int,
    check_jobs,
    check_matrix,
    check_result_size,
    check_vector,
    resolve_weights,
    run_chunked,
)


class LEnsemble:
    """L-ensemble DPP, ``P(S = A) = det(L_A) / det(L + I)``, from a full kernel or low-rank features.

    Exactly one of ``L`` and ``features`` must be given.

    - ``L`` (n×n, symmetric positive semi-definite): eigendecomposition, O(n³) once.
    - ``features`` Φ (n×d, ``L = ΦΦᵀ``): thin SVD of Φ, i.e. the dual kernel ``ΦᵀΦ`` (d×d), O(nd²)
      once and never an n×n matrix.

    Sampling is spectral (HKPV): eigenvector ``c`` is kept with probability ``λ_c/(1+λ_c)``
    (:meth:`sample`) or exactly ``k`` eigenvectors are chosen through elementary symmetric
    polynomials computed in log space (:meth:`sample_k`, no overflow for n = 10⁴, k = 10³), then the
    projection DPP they span is sampled by the core's pivoted-Cholesky loop (residuals clamped at 0
    and renormalised by their actual sum, so probabilities always sum to one).

    Parameters
    ----------
    L : array-like of shape (n, n), optional
        float32 or float64 (or pandas). The checks are scaled to the input's precision ``eps``
        (2.2e-16 for float64, 1.2e-7 for float32): an asymmetry up to ``max(1e-10, 64·eps)·max|L|``
        and negative eigenvalues down to ``−max(1e-9, 64·√n·eps)·max(λ_max, max|L|)`` are rounding
        of a PSD kernel; those eigenvalues are **clipped to zero** (dropped from the spectrum), as
        are, for float32 input, positive eigenvalues below the same level (rounding noise). Larger
        violations raise a ValueError.
    features : array-like of shape (n, d), optional
        float32 or float64.

    Attributes
    ----------
    n_items : int
    rank : int
        Number of eigenvalues kept (above ``1e-13 · λ_max`` for float64 input; above the rounding
        level above for float32 input); the others are treated as 0.
    eigenvalues_ : ndarray of shape (rank,)
    expected_size : float
        ``E|S| = Σ λ/(1+λ)``.
    seed_ : int or None
        Seed used by the last sampling call; ``last_seed_`` is a deprecated alias.

    Raises
    ------
    ValueError
        Both or neither argument, empty, NaN/inf, non-square, non-symmetric or non-PSD ``L``.

    Notes
    -----
    Instances pickle and deep-copy (the spectrum is saved, not recomputed) and sample the same after
    a round trip. Sampling can be interrupted with Ctrl-C; the eigendecomposition itself cannot.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import LEnsemble
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> dpp = LEnsemble(features=X)
    >>> dpp.sample_k(2, random_state=1).shape
    (2,)
    >>> len(dpp.sample_many(5, random_state=0))
    5
    """

    last_seed_ = DeprecatedAlias[int]("seed_")

    def __init__(self, L: Any = None, *, features: Any = None) -> None:
        if (L is None) == (features is None):
            raise ValueError("give exactly one of L and features")
        if L is not None:
            lm = check_matrix(L, "L")
            if lm.shape[0] != lm.shape[1]:
                raise ValueError(f"L must be square, got shape {lm.shape}")
            eps = float(np.finfo(lm.dtype).eps)
            self._core = _core.DppEnsemble.from_kernel(np.ascontiguousarray(lm, dtype=np.float64), eps)
            self.n_items: int = int(lm.shape[0])
        else:
            f = check_matrix(features, "features")
            self._core = _core.DppEnsemble.from_features(f)
            self.n_items = int(f.shape[0])
        self.rank: int = int(self._core.rank)
        self.eigenvalues_: npt.NDArray[np.float64] = np.asarray(self._core.eigenvalues())
        self.expected_size: float = float(np.sum(self.eigenvalues_ / (1.0 + self.eigenvalues_)))
        self._kdiag: npt.NDArray[np.float64] = np.asarray(self._core.inclusion())
        self.seed_: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k != "_core"}
        state["_eigenvectors"] = np.asarray(self._core.eigenvectors())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vectors = np.ascontiguousarray(state.pop("_eigenvectors"), dtype=np.float64)
        self.__dict__.update(state)
        self._core = _core.DppEnsemble.from_parts(vectors, np.ascontiguousarray(self.eigenvalues_, dtype=np.float64))

    def __repr__(self) -> str:
        return f"LEnsemble(n_items={self.n_items}, rank={self.rank}, expected_size={self.expected_size:.3g})"

    def sample(self, random_state: RandomState = None) -> IntArray:
        """One exact sample (int64 indices; its size is random with mean :attr:`expected_size`)."""
        out: IntArray = self.sample_many(1, random_state)[0]
        return out

    def sample_many(
        self, n_samples: int, random_state: RandomState = None, *, n_jobs: int | None = None, progress: bool | None = None
    ) -> list[IntArray]:
        """``n_samples`` independent samples (a list of int64 arrays; sample s uses stream (seed, s)).

        ``progress`` as in :meth:`ProjectionDPP.sample_many` (Ctrl-C interrupts long runs).
        """
        count = check_int(n_samples, "n_samples")
        check_result_size(count, max(1, int(np.ceil(self.expected_size))), "n_samples", what="the samples (n_samples × sample size)")
        seed = seed_from_random_state(random_state)
        self.seed_ = seed
        nj = check_jobs(n_jobs)

        def chunk(off: int, size: int) -> list[IntArray]:
            out = self._core.sample_many(size, seed, nj, off)
            f = np.asarray(out["flat"], dtype=np.int64)
            o = np.asarray(out["offsets"])
            return [f[o[s] : o[s + 1]] for s in range(size)]

        return [s for part in run_chunked(count, chunk, progress, "DPP samples") for s in part]

    def sample_k(self, k: int, random_state: RandomState = None) -> IntArray:
        """One exact k-DPP sample (``P(S) ∝ det L_S`` restricted to ``|S| = k``)."""
        out: IntArray = self.sample_k_many(k, 1, random_state)[0]
        return out

    def sample_k_many(
        self,
        k: int,
        n_samples: int,
        random_state: RandomState = None,
        *,
        n_jobs: int | None = None,
        progress: bool | None = None,
    ) -> IntArray:
        """``n_samples`` k-DPP samples as an int64 array of shape (n_samples, k).

        Raises
        ------
        ValueError
            If ``k`` is not in ``[1, rank]``.
        """
        kk = check_int(k, "k")
        if kk > self.rank:
            raise ValueError(f"k = {kk} exceeds the rank of L ({self.rank})")
        count = check_int(n_samples, "n_samples")
        check_result_size(count, kk, "n_samples", what="the samples (n_samples × sample size)")
        seed = seed_from_random_state(random_state)
        self.seed_ = seed
        nj = check_jobs(n_jobs)
        parts = run_chunked(
            count, lambda off, size: np.asarray(self._core.sample_k_many(kk, size, seed, nj, off)), progress, "k-DPP samples"
        )
        return np.asarray(parts[0] if len(parts) == 1 else np.concatenate(parts), dtype=np.int64)

    def inclusion_probabilities(self) -> npt.NDArray[np.float64]:
        """``P(i ∈ S) = K_ii`` with the marginal kernel ``K = L(L + I)⁻¹`` (float64, shape (n,))."""
        out: npt.NDArray[np.float64] = self._kdiag.copy()
        return out

    def marginal_kernel_factor(self) -> npt.NDArray[np.float64]:
        """``W`` (n×rank) with ``K = WWᵀ``: eigenvectors scaled by ``√(λ/(1+λ))``."""
        v = np.asarray(self._core.eigenvectors())
        return np.asarray(v * np.sqrt(self.eigenvalues_ / (1.0 + self.eigenvalues_)))

    def exact_variance(self, g: Any, *, weights: Any = "unbiased") -> float:
        """Exact variance of ``Σ_{i∈S} w_i g_i`` (see :meth:`ProjectionDPP.exact_variance`)."""
        gv = check_vector(g, "g", self.n_items)
        w = resolve_weights(weights, self._kdiag, self.n_items)
        return float(self._core.exact_variance(np.ascontiguousarray(w * gv)))
