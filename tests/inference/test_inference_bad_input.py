"""Acceptance 6: bad input gives clear errors (or a documented, warned result); nothing panics."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty import _core
from thrifty.inference import (
    ConstantColumnWarning,
    PLSInference,
    check_gate,
    component_tests,
    subspace_test,
    varimax,
)

rng = np.random.default_rng(0)
X = rng.normal(size=(40, 8))
y = X[:, 0] + rng.normal(size=40)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite(bad):
    Xb = X.copy()
    Xb[3, 2] = bad
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        subspace_test(Xb, y)
    yb = y.copy()
    yb[1] = bad
    with pytest.raises(ValueError, match="y contains NaN or infinity"):
        subspace_test(X, yb)
    with pytest.raises(ValueError, match="sample_weight"):
        subspace_test(X, y, sample_weight=np.where(np.arange(40) == 0, bad, 1.0))
    with pytest.raises(ValueError, match="NaN"):
        component_tests(Xb, y)
    with pytest.raises(ValueError, match="NaN"):
        varimax(np.array([[1.0, bad], [0.0, 1.0]]))
    with pytest.raises(ValueError):
        PLSInference(test=False).fit(Xb, y)
    with pytest.raises(ValueError, match="NaN"):
        check_gate(Xb)


def test_shapes_and_lengths():
    with pytest.raises(ValueError, match="different lengths"):
        subspace_test(X, y[:-1])
    with pytest.raises(ValueError, match="2-D"):
        subspace_test(X[:, 0], y)
    with pytest.raises(ValueError, match="at least"):
        subspace_test(np.empty((0, 3)), [])
    with pytest.raises(ValueError, match="sample_weight has length"):
        subspace_test(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        subspace_test(X, y, sample_weight=-np.ones(40))
    with pytest.raises(TypeError, match="real numeric"):
        subspace_test(X.astype(str), y)
    with pytest.raises(ValueError):
        PLSInference(test=False).fit(X, y[:-2])


def test_constant_y():
    with pytest.raises(ValueError, match="y is constant"):
        subspace_test(X, np.ones(40))
    with pytest.raises(ValueError, match="constant"):
        component_tests(X, np.full(40, 2.5))
    with pytest.raises(ValueError, match="constant"):
        PLSInference(test=False).fit(X, np.ones(40))


def test_constant_columns_warn_and_drop_out():
    Xc = X.copy()
    Xc[:, 5] = 7.0
    with pytest.warns(ConstantColumnWarning, match="constant column"):
        res = subspace_test(Xc, y, n_splits=6, random_state=1, force=True)
    ref = subspace_test(np.delete(Xc, 5, axis=1), y, n_splits=6, random_state=1, force=True)
    np.testing.assert_allclose(res.r, ref.r, atol=1e-12)
    with pytest.raises(ValueError, match="every column of X is constant"), pytest.warns(ConstantColumnWarning):
        subspace_test(np.ones((40, 3)), y)
    est = PLSInference(test=False).fit(Xc, y)
    assert est.coef_[0, 5] == 0.0 and np.isfinite(est.transform(Xc)).all()


def test_n_too_small_and_rank():
    with pytest.raises(ValueError, match="too few"):
        subspace_test(X[:6], y[:6], n_components=2)
    with pytest.raises(ValueError, match="exceeds the number of features"):
        subspace_test(X, y, n_components=9)
    Xr = np.repeat(X[:, :1], 8, axis=1) + 0.0
    with pytest.raises(ValueError, match="rank"):
        subspace_test(Xr, y, n_components=2, force=True, n_splits=4)
    with pytest.raises(ValueError, match="n_components"):
        PLSInference(n_components=0, test=False).fit(X, y)
    with pytest.raises(ValueError, match="n_components"):
        PLSInference(n_components=50, test=False).fit(X, y)


def test_invalid_splits():
    with pytest.raises(ValueError, match="outside"):
        subspace_test(X, y, splits=[np.arange(20), np.arange(30, 45)])
    with pytest.raises(ValueError, match="repeats"):
        subspace_test(X, y, splits=[np.array([0, 0, 1, 2, 3]), np.arange(20)])
    with pytest.raises(ValueError, match="at least 2"):
        subspace_test(X, y, splits=[np.arange(20)])
    with pytest.raises(TypeError, match="integer"):
        subspace_test(X, y, splits=[np.arange(20.0), np.arange(20.0)])
    with pytest.raises(ValueError, match="test rows"):
        subspace_test(X, y, splits=[np.arange(39), np.arange(20)])
    with pytest.raises(ValueError, match="train rows"):
        subspace_test(X, y, n_components=3, splits=[np.arange(3), np.arange(20)])
    with pytest.raises(TypeError):
        subspace_test(X, y, splits=5)


def test_parameters():
    with pytest.raises(ValueError, match="method"):
        subspace_test(X, y, method="bogus")
    with pytest.raises(ValueError, match="learner"):
        subspace_test(X, y, learner="bogus")
    with pytest.raises(ValueError, match="basis learner must have shape"):
        subspace_test(X, y, learner=np.ones((3, 2)))
    with pytest.raises(ValueError, match="n_splits"):
        subspace_test(X, y, n_splits=1)
    with pytest.raises(ValueError, match="n_perm"):
        subspace_test(X, y, method="nb-permutation", n_perm=0)
    with pytest.raises(TypeError, match="n_components"):
        subspace_test(X, y, n_components=1.5)
    with pytest.raises(ValueError, match="rotate"):
        subspace_test(X, y, rotate="promax")
    with pytest.raises(ValueError, match="confidence_level"):
        subspace_test(X, y, confidence_level=1.5)
    with pytest.raises(ValueError, match="ridge_alpha"):
        subspace_test(X, y, learner="ridge", ridge_alpha=-1)
    with pytest.raises(ValueError, match="n_components must be 1"):
        subspace_test(X, y, learner="ridge", n_components=2, force=True)
    with pytest.raises(ValueError, match="n_jobs"):
        subspace_test(X, y, n_jobs=0)
    with pytest.raises(ValueError, match="random_state"):
        subspace_test(X, y, random_state=-3)
    with pytest.raises(TypeError, match="force"):
        subspace_test(X, y, force="yes")
    with pytest.raises(ValueError, match="n_folds"):
        subspace_test(X, y, method="cv-permutation-q2", n_folds=1)
    with pytest.raises(ValueError, match="jackknife"):
        subspace_test(X, y, method="jackknife", learner="ridge")
    with pytest.raises(ValueError, match="callable"):
        subspace_test(X, y, method="cv-permutation-q2", learner=lambda a, b: a.T @ b)
    with pytest.raises(ValueError, match="must return a basis"):
        subspace_test(X, y, learner=lambda a, b: np.ones(3))
    with pytest.raises(ValueError, match="alpha"):
        component_tests(X, y, alpha=0)
    with pytest.raises(ValueError, match="max_components"):
        component_tests(X, y, max_components=100)
    with pytest.raises(ValueError, match="max_iter"):
        varimax(np.eye(3), max_iter=0)
    with pytest.raises(ValueError, match="tol"):
        varimax(np.eye(3), tol=-1.0)


def test_core_validates_too():
    # the binding rejects what Python would have caught, without panicking
    with pytest.raises(ValueError):
        _core.inference_split_correlations(X, y[:5], None, "pls", 1, [np.arange(20)])
    with pytest.raises(ValueError):
        _core.inference_split_correlations(X, y, None, "pls", 1, [np.array([0, 99])])
    with pytest.raises(ValueError):
        _core.inference_split_correlations(X, y, None, "nope", 1, [np.arange(20)])
    with pytest.raises(ValueError):
        _core.inference_draw_splits(4, 1, 10, 0)
    with pytest.raises(ValueError):
        _core.inference_nb_outcome(np.array([0.1]), np.array([20.0]), 40, 0.95, False)
    with pytest.raises(ValueError):
        _core.inference_pls_fit(X, y, None, 0)
    with pytest.raises(ValueError):
        _core.inference_split_correlations(X, y, None, "pls", 1, [np.arange(20)], n_jobs=0)
    with pytest.raises(ValueError):
        _core.inference_split_correlations(X, y, None, "bases", 1, [np.arange(20)], bases=[np.ones((3, 1))])
