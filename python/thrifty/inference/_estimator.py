"""PLSInference: a scikit-learn PLS1 regressor/transformer that also tests its subspace."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from thrifty import _core
from thrifty._validation import RandomState
from thrifty.inference._api import subspace_test


class PLSInference(TransformerMixin, RegressorMixin, BaseEstimator):  # type: ignore[misc]
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
    coef_ : ndarray of shape (n_features,) or (n_features, n_targets)
        Coefficients in original units (PLS1 for a 1-D y, PLS2 for a multi-column y).
    intercept_ : float or ndarray of shape (n_targets,)
    x_weights_, x_loadings_, x_rotations_ : ndarray of shape (n_features, n_components)
    y_loadings_ : ndarray of shape (n_components,) or (n_targets, n_components)
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
    >>> pipe[-1].test_.p_value < 0.001
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

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> "PLSInference":
        """Fit PLS1 on (X, y) and, if ``test``, test the subspace.

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
            Invalid input (NaN/inf, constant y, too few samples for ``n_components``...).
        """
        x, yv = validate_data(self, X, y, dtype=np.float64, y_numeric=True, order="C", multi_output=True)
        yv = np.ascontiguousarray(yv, dtype=np.float64)
        if yv.ndim == 2 and yv.shape[1] == 1:
            yv = np.ascontiguousarray(yv[:, 0])
        multi = yv.ndim == 2
        if isinstance(self.n_components, (bool, np.bool_)) or not isinstance(self.n_components, (int, np.integer)):
            raise TypeError(f"n_components must be an int, got {type(self.n_components).__name__}")
        k = int(self.n_components)
        n, p = x.shape
        if n < 2:
            raise ValueError(f"PLSInference needs at least 2 samples, got n_samples = {n}")
        if k < 1 or k > min(p, n - 1):
            raise ValueError(f"n_components must be in [1, min(n_samples - 1, n_features)] = [1, {min(p, n - 1)}], got {k}")
        if np.all(np.ptp(yv, axis=0) == 0.0):
            raise ValueError("y is constant (zero variance); there is nothing to predict")
        w = None
        if sample_weight is not None:
            w = np.ascontiguousarray(np.asarray(sample_weight, dtype=np.float64))
            if w.shape != (n,):
                raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
            if not np.isfinite(w).all() or (w < 0).any():
                raise ValueError("sample_weight must be finite and non-negative")
            if not w.sum() > 0:
                raise ValueError("sample_weight: all weights are zero; at least one weight must be non-zero")
        if multi:
            fit = _core.inference_pls2_fit(x, yv, w, k)
            self.intercept_: float | npt.NDArray[np.float64] = np.asarray(fit["intercept"])
        else:
            fit = _core.inference_pls_fit(x, yv, w, k)
            self.intercept_ = float(fit["intercept"])
        self.coef_ = np.asarray(fit["coef"])
        self.x_weights_ = np.asarray(fit["x_weights"])
        self.x_loadings_ = np.asarray(fit["x_loadings"])
        self.x_rotations_ = np.asarray(fit["x_rotations"])
        self.y_loadings_ = np.asarray(fit["y_loadings"])
        self.x_mean_ = np.asarray(fit["x_mean"])
        self.x_std_ = np.asarray(fit["x_std"])
        self.test_ = None
        if self.test:
            self.test_ = subspace_test(
                x, yv, k, "pls", self.method, n_splits=self.n_splits, n_perm=self.n_perm,  # type: ignore[arg-type]
                sample_weight=w, force=self.force, random_state=self.random_state, n_jobs=self.n_jobs,
                progress=self.progress,
            )
        return self

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Predict y, shape (n_samples,) or (n_samples, n_targets)."""
        check_is_fitted(self)
        x = validate_data(self, X, dtype=np.float64, reset=False)
        return np.asarray(x @ self.coef_ + self.intercept_, dtype=np.float64)

    def transform(self, X: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """PLS scores ``((X - x_mean_) / x_std_) @ x_rotations_``, shape (n_samples, n_components)."""
        check_is_fitted(self)
        x = validate_data(self, X, dtype=np.float64, reset=False)
        scale = np.where(self.x_std_ > 0, self.x_std_, np.inf)
        return np.asarray(((x - self.x_mean_) / scale) @ self.x_rotations_, dtype=np.float64)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        return tags
