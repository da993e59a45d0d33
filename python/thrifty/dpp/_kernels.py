"""Continuous kernels made discrete on a data set: Haar/stratified, Daubechies, Jacobi/Legendre OPE.

The pipeline (Bardenet, Ghosh & Lin 2021; Tran, Gupta, Bardenet & Ghosh 2026): map the data into the
kernel's domain, evaluate the features ``√(q/γ̃)(x_i)·Φ_k(x_i)`` with q the kernel's reference
density and γ̃ an estimate of the data density, and orthonormalise them into ``K = UUᵀ`` (a
projection DPP of rank m on the data). Never an n×n matrix.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Union

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import RandomState, check_n_jobs, seed_from_random_state
from thrifty.dpp._checks import (
    IntArray,
    check_int,
    check_matrix,
    check_matrix64,
    check_vector,
    resolve_weights,
    run_chunked,
)
from thrifty.dpp._projection import ProjectionDPP

Kernel = Literal["haar", "ope", "daubechies"]
Split = Literal["volume", "quantile"]
Density = Union[None, str, Callable[[npt.NDArray[np.float64]], Any], npt.ArrayLike]
F64 = npt.NDArray[np.float64]


class StratifiedDPP:
    """Block-diagonal projection DPP: one item per cell, item i drawn with probability ``K_ii`` in its cell.

    This is the discrete Haar wavelet DPP: ``K = UUᵀ`` with ``U_i = w_i/√(Σ_{cell(i)} w²)`` on the
    cell's column, so ``K_ii`` sums to 1 in every non-empty cell and the rank is the number of
    non-empty cells. O(n) setup, O(m log n) per sample.

    Parameters
    ----------
    cells : array-like of int, shape (n,)
        Cell index of every item (0 ≤ cell < n_cells).
    probabilities : array-like of shape (n,)
        ``K_ii`` (non-negative; renormalised to sum to one inside every cell).

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.dpp import StratifiedDPP
    >>> dpp = StratifiedDPP([0, 0, 1, 1, 1], [0.5, 0.5, 0.2, 0.3, 0.5])
    >>> dpp.sample(random_state=0).shape
    (2,)
    """

    def __init__(self, cells: Any, probabilities: Any) -> None:
        c = np.asarray(cells)
        if c.ndim != 1 or c.size == 0:
            raise ValueError(f"cells must be a non-empty 1-D array, got shape {c.shape}")
        if c.dtype.kind not in "iu":
            raise TypeError(f"cells must be an integer array, got dtype {c.dtype}")
        if c.min() < 0:
            raise ValueError("cells must be non-negative")
        n = c.shape[0]
        p = check_vector(probabilities, "probabilities", n)
        if (p < 0).any():
            raise ValueError("probabilities must be non-negative")
        # Relabel the cells 0..rank-1 and renormalise inside every cell.
        uniq, lab = np.unique(c, return_inverse=True)
        tot = np.bincount(lab, weights=p, minlength=uniq.size)
        if (tot <= 0).any():
            raise ValueError("every cell needs a positive total probability")
        self._cells: IntArray = np.ascontiguousarray(lab, dtype=np.int64)
        self._kdiag: F64 = p / tot[lab]
        self._core = _core.DppStratified(self._cells, int(uniq.size), self._kdiag)
        self.n_items: int = n
        self.rank: int = int(uniq.size)
        self.last_seed_: int | None = None

    def __repr__(self) -> str:
        return f"StratifiedDPP(n_items={self.n_items}, rank={self.rank})"

    @property
    def cells(self) -> IntArray:
        """Cell label of every item (0..rank-1)."""
        out: IntArray = self._cells.copy()
        return out

    def sample(self, random_state: RandomState = None) -> IntArray:
        """One exact sample (one item per cell, ordered by cell)."""
        out: IntArray = self.sample_many(1, random_state)[0]
        return out

    def sample_many(
        self, n_samples: int, random_state: RandomState = None, *, n_jobs: int | None = None, progress: bool | None = None
    ) -> IntArray:
        """``n_samples`` samples as an int64 array of shape (n_samples, rank) (``progress`` as in
        :meth:`ProjectionDPP.sample_many`)."""
        count = check_int(n_samples, "n_samples")
        seed = seed_from_random_state(random_state)
        self.last_seed_ = seed
        nj = check_n_jobs(n_jobs)
        parts = run_chunked(
            count, lambda off, size: np.asarray(self._core.sample_many(size, seed, nj, off)), progress, "DPP samples"
        )
        return np.asarray(np.concatenate(parts), dtype=np.int64)

    def inclusion_probabilities(self) -> F64:
        """``K_ii`` (sums to one inside every cell)."""
        out: F64 = self._kdiag.copy()
        return out

    def basis(self) -> F64:
        """Dense ``U`` (n×rank) with ``K = UUᵀ`` (for checks on small problems)."""
        u = np.zeros((self.n_items, self.rank))
        u[np.arange(self.n_items), self._cells] = np.sqrt(self._kdiag)
        return u

    def exact_variance(self, g: Any, *, weights: Any = "unbiased") -> float:
        """Exact variance of ``Σ_{i∈S} w_i g_i``: ``Σ h_i² K_ii − Σ_cells (Σ_{i∈c} h_i K_ii)²``, h = w·g."""
        gv = check_vector(g, "g", self.n_items)
        h = resolve_weights(weights, self._kdiag, self.n_items) * gv
        per_cell = np.bincount(self._cells, weights=h * self._kdiag, minlength=self.rank)
        return float(max(np.sum(h * h * self._kdiag) - np.sum(per_cell**2), 0.0))


def map_to_domain(X: F64, domain: Any, lo: float, hi: float) -> F64:
    """Affine map of the data box (``domain`` of shape (d, 2), or the data's bounding box slightly
    enlarged when None) onto ``[lo, hi]^d``; points outside ``domain`` raise a ValueError."""
    d = X.shape[1]
    if domain is None:
        a, b = X.min(axis=0), X.max(axis=0)
        span = np.where(b > a, b - a, 1.0)
        a, b = a - 1e-6 * span, b + 1e-6 * span
    else:
        box = np.asarray(domain, dtype=np.float64)
        if box.shape != (d, 2) or not np.isfinite(box).all() or not (box[:, 1] > box[:, 0]).all():
            raise ValueError(f"domain must be a finite array of shape ({d}, 2) with low < high on every axis")
        a, b = box[:, 0], box[:, 1]
        outside = ((X < a) | (X > b)).any(axis=1)
        if outside.any():
            raise ValueError(f"X has {int(outside.sum())} point(s) outside the kernel's domain {box.tolist()}")
    z = lo + (hi - lo) * (X - a) / (b - a)
    return np.ascontiguousarray(np.clip(z, lo, hi))


def estimate_density(Z: F64, density: Density, X: F64) -> F64:
    """Values of the data density γ̃ at the data (up to a constant factor).

    ``density``: None/"uniform" (constant), "histogram" (≈10 points per bin on average), "kde"
    (Gaussian KDE with Scott's bandwidth on a k-d tree, never O(n²)), a callable ``f(X) -> (n,)`` or
    an array of n positive values. ``Z`` is the data mapped into the unit box, ``X`` the original data.
    """
    n, d = Z.shape
    if density is None or (isinstance(density, str) and density == "uniform"):
        return np.ones(n)
    if isinstance(density, str):
        if density == "histogram":
            bins = max(1, int(round((n / 10.0) ** (1.0 / d))))
            lo, hi = Z.min(axis=0), Z.max(axis=0)
            hist, edges = np.histogramdd(Z, bins=bins, range=list(zip(lo, hi + 1e-12)))
            idx = tuple(np.clip(np.searchsorted(edges[a], Z[:, a], side="right") - 1, 0, bins - 1) for a in range(d))
            return np.asarray(hist[idx], dtype=np.float64)
        if density == "kde":
            from sklearn.neighbors import KernelDensity

            sd = Z.std(axis=0)
            scale = np.where(sd > 0, sd, 1.0)
            bw = float(n ** (-1.0 / (d + 4)))
            kde = KernelDensity(kernel="gaussian", bandwidth=bw, algorithm="kd_tree", rtol=1e-3)
            kde.fit(Z / scale)
            return np.asarray(np.exp(kde.score_samples(Z / scale)), dtype=np.float64)
        raise ValueError(f"density must be None, 'uniform', 'histogram', 'kde', a callable or an array, got {density!r}")
    vals = density(X) if callable(density) else density
    v = check_vector(vals, "density", n)
    if (v <= 0).any():
        raise ValueError("density values at the data must be positive")
    return v


def discretize(
    X: Any,
    m: int,
    *,
    kernel: Kernel = "haar",
    density: Density = None,
    domain: Any = None,
    split: Split = "volume",
    order: int = 2,
    jacobi_params: tuple[float, float] = (0.0, 0.0),
) -> ProjectionDPP | StratifiedDPP:
    """The discrete projection DPP of rank ≤ m that a continuous kernel induces on the data X.

    Parameters
    ----------
    X : array-like of shape (n, d)
    m : int
        Target rank (= sample size). ``"haar"``: any m (anisotropic k-d split into m boxes);
        ``"daubechies"``: a power of two (anisotropic levels Σ J_a = log₂ m); ``"ope"``: any m.
        Always at most n.
    kernel : {"haar", "ope", "daubechies"}
        ``"haar"`` is the default and the safe choice: its weights 1/K_ii integrate constants
        exactly. Periodised Daubechies scaling functions have a non-constant diagonal
        ``Σ_k φ(x−k)²`` (from 0.52 to 2 for db2), so ``Σ_{i∈S} 1/(n K_ii)`` is unbiased for 1 but
        not equal to 1 — see :class:`Coreset` ``weights="self_normalized"``.
    density : see :func:`estimate_density`
        γ̃; the features are multiplied by ``√(q/γ̃)``. For ``"haar"``, ``"histogram"`` means the
        histogram on the Haar cells themselves (constant on each cell, so ``K_ii = 1/n_cell`` and
        the weights integrate constants exactly), and ``split="quantile"`` ignores ``density``
        (the partition already follows the data).
    domain : array-like of shape (d, 2), optional
        The box mapped onto the kernel's domain ([0,1]^d for Haar/Daubechies, [−1,1]^d for the
        OPE). Points outside raise a ValueError. Default: the data's bounding box.
    split : {"volume", "quantile"}
        Haar only: equal-volume boxes (the Haar wavelet of the uniform measure; empty boxes lower
        the rank) or equal-count boxes (the Haar wavelet of the empirical measure; rank exactly m).
    order : int
        Daubechies order (1–4; 1 is Haar).
    jacobi_params : (a, b)
        Jacobi exponents (> −1) of the OPE weight ``Π(1−x)^a(1+x)^b``; (0, 0) is Legendre.
    """
    x = check_matrix64(X, "X")
    n, d = x.shape
    mm = check_int(m, "m", minimum=1)
    if kernel == "haar":
        if split not in ("volume", "quantile"):
            raise ValueError(f"split must be 'volume' or 'quantile', got {split!r}")
        if mm > n:
            raise ValueError(f"m = {mm} exceeds the number of points ({n})")
        z = map_to_domain(x, domain, 0.0, 1.0)
        cells, _vol = _core.dpp_partition(z, mm, split)
        # A histogram on the Haar cells themselves ("histogram at level J") is constant on every
        # cell, so it cancels: K_ii = 1/n_cell and the weights integrate constants exactly. A
        # density that varies inside a cell keeps the estimator unbiased but not exact for constants.
        if split == "quantile" or (isinstance(density, str) and density == "histogram"):
            g = np.ones(n)
        else:
            g = estimate_density(z, density, x)
        kdiag, _rank = _core.dpp_haar_diagonal(cells, mm, np.ascontiguousarray(g))
        return StratifiedDPP(np.asarray(cells), np.asarray(kdiag))
    if kernel in ("daubechies", "ope") and mm > n:
        raise ValueError(f"m = {mm} exceeds the number of points ({n})")
    if kernel == "daubechies":
        o = check_int(order, "order", minimum=1, maximum=4)
        if mm & (mm - 1):
            raise ValueError(f"m must be a power of two for the Daubechies kernel, got {mm}")
        z = map_to_domain(x, domain, 0.0, 1.0)
        g = estimate_density(z, density, x)
        feats = _core.dpp_daubechies_features(z, mm, o, np.ascontiguousarray(g))
    elif kernel == "ope":
        if len(jacobi_params) != 2:
            raise ValueError("jacobi_params must be a pair (a, b)")
        a, b = (float(v) for v in jacobi_params)
        if not (a > -1 and b > -1):
            raise ValueError(f"jacobi_params must be > -1, got {jacobi_params}")
        z = map_to_domain(x, domain, -1.0, 1.0)
        g = estimate_density(z, density, x)
        feats = _core.dpp_jacobi_features(z, mm, a, b, np.ascontiguousarray(g))
    else:
        raise ValueError(f"kernel must be 'haar', 'ope' or 'daubechies', got {kernel!r}")
    return ProjectionDPP.from_features(np.asarray(feats))


def daubechies_phi(t: Any, order: int = 2) -> F64:
    """The Daubechies scaling function φ (cascade algorithm, in-house filters) at the points t."""
    tv = np.ascontiguousarray(np.asarray(t, dtype=np.float64).ravel())
    if not np.isfinite(tv).all():
        raise ValueError("t contains NaN or infinity")
    return np.asarray(_core.dpp_daubechies_phi(tv, check_int(order, "order", minimum=1, maximum=4)))
