"""PLSInference: a scikit-learn PLS1 regressor/transformer that also tests its subspace."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.utils.validation import check_is_fitted, validate_data

from thrifty import _core
from thrifty._validation import RandomState, check_int, power_of_two_scale
from thrifty._warn import warn
from thrifty.inference._api import test_problem
from thrifty.inference._intervals import CoefficientIntervals, coefficient_intervals, standardise
from thrifty.inference._results import BaselineResult, FloatArray, SubspaceTestResult


class PLSInference(ClassNamePrefixFeaturesOutMixin, TransformerMixin, RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """PLS1 regression with a held-out test of its supervised subspace.

    ``fit`` fits PLS1 on all rows (X and y standardised with population SD; the coefficients equal
    scikit-learn's ``PLSRegression(scale=True)``) and, when ``test`` is True, runs
    :func:`thrifty.inference.subspace_test` with the same number of components; the result is
    ``test_``. ``predict`` and ``transform`` make it usable inside a :class:`~sklearn.pipeline.Pipeline`.

    Parameters
    ----------
    n_components : int, default=1
        Number of PLS components.
    method : str, default="auto"
        Test method (see :func:`~thrifty.inference.subspace_test`).
    n_splits : int, default=50
    n_perm : int, default=1000
    force : bool, default=False
    test : bool, default=True
        Run the test during ``fit``.
    random_state : None, int or numpy Generator
    n_jobs : int, optional
    progress : bool, optional

    Attributes
    ----------
    coef_ : ndarray of shape (n_targets, n_features)
        Coefficients in original units (PLS1 for a 1-D y, PLS2 for a multi-column y), laid out as
        scikit-learn's ``PLSRegression.coef_``; ``predict(X) = X @ coef_.T + intercept_``.
    intercept_ : ndarray of shape (n_targets,)
    x_weights_, x_loadings_, x_rotations_ : ndarray of shape (n_features, n_components)
    y_loadings_ : ndarray of shape (n_targets, n_components)
    n_components_fitted_ : int
        Components actually extracted: fewer than ``n_components`` when the y residual vanishes
        first (the rest are zero, as in scikit-learn, with a warning).
    x_mean_, x_std_ : ndarray of shape (n_features,)
        Standardisation moments (population SD; 0 marks a constant column, which drops out).
    test_ : SubspaceTestResult or None
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import FunctionTransformer
    >>> from thrifty.inference import PLSInference
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 15)); y = X[:, 0] + 0.5 * rng.normal(size=120)
    >>> pipe = make_pipeline(FunctionTransformer(), PLSInference(random_state=0)).fit(X, y)
    >>> pipe[-1].test_.pvalue < 0.001
    True
    """

    def __init__(
        self,
        n_components: int = 1,
        method: str = "auto",
        n_splits: int = 50,
        n_perm: int = 1000,
        force: bool = False,
        test: bool = True,
        random_state: RandomState = None,
        n_jobs: int | None = None,
        progress: bool | None = None,
    ) -> None:
        self.n_components = n_components
        self.method = method
        self.n_splits = n_splits
        self.n_perm = n_perm
        self.force = force
        self.test = test
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.progress = progress

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> PLSInference:
        """Fit PLS1 (PLS2 for a multi-column y) on (X, y) and, if ``test``, test the subspace.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Invalid input (NaN/inf, constant y, ``n_components`` outside [1, n_features]...).
        """
        x, yv = validate_data(self, X, y, dtype=np.float64, y_numeric=True, order="C", multi_output=True)
        yv = np.ascontiguousarray(yv, dtype=np.float64)
        self._predict_1d = yv.ndim == 1
        if yv.ndim == 2 and yv.shape[1] == 1:
            yv = np.ascontiguousarray(yv[:, 0])
        multi = yv.ndim == 2
        k = check_int(self.n_components, "n_components", 1)
        n, p = x.shape
        if n < 2:
            raise ValueError(f"PLSInference needs at least 2 samples, got n_samples = {n}")
        if k > min(n, p):  # scikit-learn's PLSRegression bound
            raise ValueError(f"n_components must be in [1, min(n_samples, n_features)] = [1, {min(n, p)}], got {k}")
        if np.all(np.ptp(yv, axis=0) == 0.0):
            raise ValueError("y is constant (zero variance); there is nothing to predict")
        w = None
        if sample_weight is not None:
            w = np.ascontiguousarray(np.asarray(sample_weight, dtype=np.float64))
            if w.shape != (n,):
                raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
            if not np.isfinite(w).all() or (w < 0).any():
                raise ValueError("sample_weight must be finite and non-negative")
            if not w.max() > 0:
                raise ValueError("sample_weight: all weights are zero; at least one weight must be non-zero")
            # only relative weights matter: rescaled exactly (1e308 everywhere, whose sum overflows, or
            # 1e-320, whose squares vanish, is the unit-weight fit), as subspace_test does
            w = np.ldexp(w, -power_of_two_scale(w).astype(np.int64))
        self._fit_pls(x, yv, w, k, multi)
        self.test_ = None
        if self.test:
            self.test_ = self._run_test(x, yv, w, k)
        return self

    def _fit_pls(self, x: FloatArray, yv: FloatArray, w: FloatArray | None, k: int, multi: bool) -> None:
        """The full-data fit in scikit-learn's attribute layout. The data reach the core rescaled
        exactly by powers of two (per column), so 1e±150-scaled inputs neither overflow nor underflow;
        the moments and coefficients are scaled back. Columns far from the origin relative to their
        spread (X + 1e12) are first moved to it exactly, as the core's tests do
        (``inference::route::location_shifts``); the means and the intercept are moved back."""
        mx = _core.inference_location_shifts(np.ascontiguousarray(x))
        my = _core.inference_location_shifts(np.ascontiguousarray(yv.reshape(yv.shape[0], -1)))
        if mx is not None:
            x = x - mx
        if my is not None:
            yv = yv - (my if multi else my[0])
        ex = power_of_two_scale(x, 0)
        ey = power_of_two_scale(yv, 0 if multi else None)
        xs = np.ascontiguousarray(np.ldexp(x, -ex.astype(np.int64)))
        ys = np.ascontiguousarray(np.ldexp(yv, -np.asarray(ey).astype(np.int64)))
        fit = (_core.inference_pls2_fit if multi else _core.inference_pls_fit)(xs, ys, w, k)
        n_eff = int(fit["n_components_fitted"])
        if n_eff < k:
            warn(
                f"y residual is constant after {n_eff} components: the last {k - n_eff} of n_components={k} are "
                "zero (as scikit-learn's PLSRegression leaves them)",
                UserWarning,
            )
        coef = np.asarray(fit["coef"]).reshape(x.shape[1], -1)  # (p, m) in the rescaled units
        scale = np.ldexp(1.0, (np.atleast_1d(ey)[None, :] - ex[:, None]).astype(np.int64))
        self.coef_ = np.ascontiguousarray((coef * scale).T)  # (n_targets, n_features), as scikit-learn
        x_mean = np.ldexp(np.asarray(fit["x_mean"]), ex.astype(np.int64))
        self.intercept_ = np.atleast_1d(np.ldexp(np.asarray(fit["intercept"], dtype=np.float64), np.asarray(ey).astype(np.int64)))
        self.x_weights_ = np.asarray(fit["x_weights"])
        self.x_loadings_ = np.asarray(fit["x_loadings"])
        self.x_rotations_ = np.asarray(fit["x_rotations"])
        self.y_loadings_ = np.asarray(fit["y_loadings"]).reshape(-1, k)  # (n_targets, n_components)
        if mx is not None:
            x_mean = x_mean + mx
        if mx is not None or my is not None:
            shift_y = np.zeros(self.coef_.shape[0]) if my is None else my
            self.intercept_ = self.intercept_ + shift_y - (0.0 if mx is None else self.coef_ @ mx)
        self.x_mean_ = x_mean
        self.x_std_ = np.ldexp(np.asarray(fit["x_std"]), ex.astype(np.int64))
        self.n_components_fitted_ = n_eff
        self._n_features_out = k

    def _run_test(
        self, x: FloatArray, yv: FloatArray, w: FloatArray | None, k: int
    ) -> SubspaceTestResult | BaselineResult | None:
        """The subspace test of the fitted number of components (the steps of ``subspace_test``)."""
        if x.shape[0] < k + 5:
            warn(
                f"the subspace test needs n_samples >= n_components + 5 = {k + 5}; test_ is None",
                UserWarning,
            )
            return None
        return test_problem(
            x, yv, k, "pls", w, self.method, self.n_splits, self.n_perm, self.force, self.random_state,
            self.n_jobs, self.progress,
        )

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Predict y: shape (n_samples,) for a 1-D y, (n_samples, n_targets) for a 2-D y."""
        check_is_fitted(self)
        x = validate_data(self, X, dtype=np.float64, reset=False)
        out = np.asarray(x @ self.coef_.T + self.intercept_, dtype=np.float64)
        return out.ravel() if self._predict_1d else out

    def transform(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """PLS scores ``((X - x_mean_) / x_std_) @ x_rotations_``, shape (n_samples, n_components)."""
        check_is_fitted(self)
        x = validate_data(self, X, dtype=np.float64, reset=False)
        return np.asarray(standardise(x, self.x_mean_, self.x_std_) @ self.x_rotations_, dtype=np.float64)

    def confidence_intervals(self, X: npt.ArrayLike, y: npt.ArrayLike, **options: Any) -> CoefficientIntervals:
        """Subsampling intervals for β and the per-variable leverage at the fitted number of components:
        :func:`thrifty.inference.coefficient_intervals` on ``X, y`` (``options``: ``n_boot``, ``m_rate``,
        ``confidence_level``, ``sample_weight``; ``random_state`` and ``n_jobs`` default to the estimator's)."""
        check_is_fitted(self)
        options.setdefault("random_state", self.random_state)
        options.setdefault("n_jobs", self.n_jobs)
        return coefficient_intervals(X, y, int(self.n_components_fitted_), **options)

    def get_feature_names_out(self, input_features: Any = None) -> npt.NDArray[np.object_]:
        """Output names ``plsinference0 ... plsinference{k-1}`` of :meth:`transform` (enables ``set_output``)."""
        return super().get_feature_names_out(input_features)  # type: ignore[no-any-return]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        return tags
