"""pls_svd_test: the two-block symmetric PLS-SVD ("PLS3", PLSC) confirmatory test."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from thrifty import _core
from thrifty._validation import (
    RandomState,
    check_allocation,
    check_finite_matrix,
    check_float,
    check_inference_n_jobs,
    check_int,
    from_pandas,
    seed_from_random_state,
)
from thrifty._warn import warn
from thrifty.inference._api import _check_n_perm, _perm_chunk
from thrifty.inference._problem import (
    GateWarning,
    Route,
    check_splits,
    power_of_two_scaled,
    route_of,
    split_test_result,
)
from thrifty.inference._results import FloatArray, IntArray, SubspaceTestResult

# The NB-asymptotic reference is not trusted for PLS-SVD (benches/calibration_inference_extra.py --nb,
# two-sided): the Nadeau–Bengio factor is PLS1's heuristic and is not derived for two blocks, and the
# split statistics of one data set are much less correlated than 1/2 under the null, so the NB test is
# conservative (size 0.7% at alpha = 5% on the iid design with n = 300) and loses power. The core's
# learner rule (``inference::route::nb_reason`` for ``"pls-svd"``) therefore routes "auto" to the
# NB-permutation test on every design; "nb" runs only with force=True.


@dataclass(frozen=True, repr=False, eq=False)
class PLSSVDTestResult:
    """Outcome of :func:`pls_svd_test`.

    Attributes
    ----------
    test : SubspaceTestResult
        The split test of the first latent pair (``learner="pls-svd"``): ``pvalue``, ``statistic``
        (tanh of the mean Fisher z of the held-out latent correlations), per-split ``r``, ``ci``, the
        gate and the splits used.
    x_weights : ndarray of shape (n_features_X, n_components)
        X-block weights U of the PLS-SVD fitted on all rows (standardised blocks; orthonormal columns,
        the largest-magnitude entry of each column positive).
    y_weights : ndarray of shape (n_features_Y, n_components)
        Y-block weights V (flipped together with U).
    singular_values : ndarray of shape (n_components,)
        Singular values of the standardised cross-covariance X̃ᵀỸ / n: the covariances of the latent pairs.
    """

    test: SubspaceTestResult
    x_weights: FloatArray
    y_weights: FloatArray
    singular_values: FloatArray

    @property
    def pvalue(self) -> float:
        """One-sided p-value of the first latent pair (H1: positive held-out latent correlation)."""
        return self.test.pvalue

    @property
    def statistic(self) -> float:
        """``tanh(mean z)`` of the held-out latent correlations."""
        return self.test.statistic

    @property
    def method(self) -> str:
        """The test that ran (``"nb"`` or ``"nb-permutation"``)."""
        return self.test.method

    def __iter__(self) -> Iterator[float]:
        """``statistic, pvalue = result``."""
        return iter((self.statistic, self.pvalue))

    def __repr__(self) -> str:
        t = self.test
        return (
            f"PLSSVDTestResult(method={t.method!r}, p-value={t.pvalue:.4g}, held-out latent r={t.statistic:.4f}, "
            f"CI=[{t.ci[0]:.4f}, {t.ci[1]:.4f}], splits={t.n_splits}, permutations={t.n_perm}, "
            f"x_weights {self.x_weights.shape}, y_weights {self.y_weights.shape})"
        )


def _check_blocks(X: Any, Y: Any) -> tuple[FloatArray, FloatArray]:
    x = check_finite_matrix(from_pandas(X), "X", np.float64, min_rows=6)
    yv = from_pandas(Y)
    ya = np.asarray(yv)
    if ya.ndim == 1:
        ya = ya[:, None]
    y = check_finite_matrix(ya, "Y", np.float64, min_rows=6)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"Y has {y.shape[0]} rows, but X has {x.shape[0]}")
    for name, a in (("X", x), ("Y", y)):
        if np.all(np.ptp(a, axis=0) == 0.0):
            raise ValueError(f"every column of {name} is constant; there is no covariance to find")
    return x, y


def _route(xs: FloatArray, method: Any, force: Any) -> tuple[Route, str | None]:
    if method not in ("auto", "nb", "nb-permutation"):
        raise ValueError(f"method must be 'auto', 'nb' or 'nb-permutation', got {method!r}")
    if not isinstance(force, (bool, np.bool_)):
        raise TypeError(f"force must be a bool, got {type(force).__name__}")
    # the gate looks at X only; the learner rule of "pls-svd" adds its reason
    return route_of(_core.inference_route(xs, None, method, bool(force), "pls-svd", 1, False), method)


def _null(xs: FloatArray, ys: FloatArray, trains: list[IntArray], seed: int, B: int, jobs: int | None) -> FloatArray:
    out = np.empty(B)
    # the core keeps a chunk's permutations (count × n indices), not permuted copies of Y, and prepares
    # X and, on the row-space route, its Gram root once per split and call: chunks bound the indices only
    chunk = max(1, _perm_chunk(B, xs.shape[0], False))
    for start in range(0, B, chunk):
        count = min(chunk, B - start)
        out[start : start + count] = _core.inference_plssvd_permutation(xs, ys, trains, seed, start, count, jobs)
    return out


def pls_svd_test(
    X: npt.ArrayLike,
    Y: npt.ArrayLike,
    n_components: int = 1,
    *,
    method: Literal["auto", "nb", "nb-permutation"] = "auto",
    n_splits: int = 50,
    n_perm: int = 1000,
    splits: Sequence[npt.ArrayLike] | None = None,
    force: bool = False,
    random_state: RandomState = None,
    n_jobs: int | None = None,
    confidence_level: float = 0.95,
) -> PLSSVDTestResult:
    """Test whether two blocks covary, by the held-out correlation of their first PLS-SVD pair.

    Symmetric two-block PLS (PLS-SVD, PLSC, plskit's PLS3): neither block is the outcome. On each of
    ``n_splits`` balanced random splits both blocks are standardised with train moments, the first
    singular pair (u₁, v₁) of X̃_trᵀỸ_tr is found and the split is scored by
    ``r = cor(X̃_te u₁, Ỹ_te v₁)`` (a joint sign flip of the pair leaves r unchanged). The
    NB-asymptotic test averages ``atanh(r)`` and applies the Nadeau–Bengio corrected t (one-sided);
    the NB-permutation test shuffles the rows of Y against X with the splits held fixed,
    ``p = (1 + #{mean z* >= mean z}) / (n_perm + 1)``, exact under row exchangeability.

    When both blocks are wider than the train rows, the pair comes from train-row Gram matrices
    (n_tr × n_tr) and the p × q cross matrix is never formed: memory follows ``n * (p + q)``, time
    ``n_tr**2 * (p + q)`` per split and permutation (X and Y of 300 × 75000 each: about 10 s for the
    NB-asymptotic test here).

    Parameters
    ----------
    X : array-like of shape (n_samples, p)
        First block (NaN/inf rejected; constant columns drop out).
    Y : array-like of shape (n_samples, q) or (n_samples,)
        Second block.
    n_components : int, default=1
        Pairs reported in ``x_weights`` / ``y_weights`` (fitted on all rows); the test is of the first
        pair (above it the train-half ordering of components need not survive to the test half).
    method : {"auto", "nb", "nb-permutation"}, default="auto"
        ``"auto"``: the NB-permutation test (the reason is in ``result.test.gate.reasons``): the
        NB-asymptotic reference is conservative for two blocks (null size about 1% at 5%), so ``"nb"``
        runs it only with ``force=True`` (a :class:`GateWarning` reroutes it otherwise). The gate looks
        at X only (Y is often narrow by design).
    n_splits, n_perm, splits, force, random_state, n_jobs, confidence_level
        As in :func:`subspace_test`.

    Returns
    -------
    PLSSVDTestResult
        ``pvalue``, ``statistic``, ``test`` (the full :class:`SubspaceTestResult`), and both blocks'
        weights with the singular values; unpacks as ``statistic, pvalue``.

    Raises
    ------
    ValueError
        NaN/inf, fewer than 6 rows, mismatched rows, an all-constant block, ``n_components`` above
        ``min(p, q)``, invalid splits or out-of-range parameters.
    TypeError
        Non-numeric arrays or wrongly typed parameters.

    Warns
    -----
    GateWarning
        When the gate reroutes a requested NB-asymptotic test.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.inference import pls_svd_test
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=300)
    >>> X = rng.normal(size=(300, 10)); X[:, 0] += z
    >>> Y = rng.normal(size=(300, 4)); Y[:, 1] += z
    >>> res = pls_svd_test(X, Y, random_state=0)
    >>> bool(res.pvalue < 0.01), res.method, int(np.argmax(np.abs(res.y_weights[:, 0])))
    (True, 'nb-permutation', 1)
    """
    x, y = _check_blocks(X, Y)
    n = x.shape[0]
    k = check_int(n_components, "n_components", 1)
    if k > min(x.shape[1], y.shape[1]):
        raise ValueError(f"n_components={k} exceeds min(p, q) = {min(x.shape[1], y.shape[1])}")
    level = check_float(confidence_level, "confidence_level", 0.0, 1.0)
    jobs = check_inference_n_jobs(n_jobs)
    seed = seed_from_random_state(random_state)
    xs, ys = power_of_two_scaled(x), power_of_two_scaled(y)
    route, message = _route(xs, method, force)
    if message is not None:
        warn(message, GateWarning)
    if splits is not None:
        trains = check_splits(splits, n)
        if any(t.size < 3 for t in trains):  # the core's rule for one pair (n_components + 2 train rows)
            raise ValueError("every split needs at least 3 train rows")
    else:
        nsp = check_int(n_splits, "n_splits", 2)
        check_allocation("n_splits", nsp, 8 * n)
        trains = list(_core.inference_draw_splits(n, 1, nsp, seed))
    B = _check_n_perm(n_perm, n) if route.run == "nb-permutation" else 0
    rs = np.asarray(_core.inference_plssvd_split_correlations(xs, ys, trains, jobs), dtype=np.float64)
    test = split_test_result(
        rs, np.array([t.size for t in trains], dtype=float), n, route, B,
        (lambda: _null(xs, ys, trains, seed, B, jobs)) if B else None,
        level=level, rho_hat_defined=True, k=1, learner="pls-svd", seed=seed, trains=tuple(trains), rotate=None,
    )
    # the blocks are standardised, so the exact power-of-two rescaling of their columns cancels
    fit = _core.inference_plssvd_fit(xs, ys, k)
    return PLSSVDTestResult(
        test, np.asarray(fit["x_weights"]), np.asarray(fit["y_weights"]), np.asarray(fit["singular_values"])
    )
