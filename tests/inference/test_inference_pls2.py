"""PLS2 (multi-column y): coefficients equal scikit-learn's PLSRegression, the held-out statistic equals
an independent implementation, calibration under the null, bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from inference_reference import heldout_r_pls2, nb_statistic
from sklearn.cross_decomposition import PLSRegression

from thrifty.inference import PLSInference, subspace_test


def _data(n=80, p=12, m=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * rng.uniform(0.5, 2, size=p) + rng.uniform(-3, 3, size=p)
    Y = np.c_[X[:, 0] + rng.normal(size=n), X[:, 1] - X[:, 0] + rng.normal(size=n), 3 * rng.normal(size=(n, m - 2))]
    return X, Y


def _sk(X, Y, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return PLSRegression(n_components=k, tol=1e-300, max_iter=20000).fit(X, Y)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_pls2_coefficients_equal_sklearn(k):
    X, Y = _data(seed=k)
    est = PLSInference(n_components=k, test=False).fit(X, Y)
    sk = _sk(X, Y, k)
    np.testing.assert_allclose(est.coef_, sk.coef_, rtol=0, atol=1e-8 * np.abs(sk.coef_).max())
    np.testing.assert_allclose(est.predict(X), sk.predict(X), atol=1e-8)
    from sklearn.datasets import load_linnerud

    Xl, Yl = load_linnerud(return_X_y=True)
    est = PLSInference(n_components=min(k, 2), test=False).fit(Xl, Yl)
    sk = _sk(Xl, Yl, min(k, 2))
    np.testing.assert_allclose(est.coef_, sk.coef_, rtol=0, atol=1e-8 * np.abs(sk.coef_).max())


@pytest.mark.parametrize("k", [1, 2, 3])
def test_pls2_nb_matches_reference(k):
    X, Y = _data(seed=10 + k)
    res = subspace_test(X, Y, n_components=k, n_splits=10, random_state=4, force=True)
    assert res.learner == "pls2" and res.method == "nb" and np.isnan(res.rho_hat)
    ref_r = [heldout_r_pls2(X, Y, t, k) for t in res.train_indices]
    np.testing.assert_allclose(res.r, ref_r, atol=1e-10)
    ntr = [t.size for t in res.train_indices]
    ref = nb_statistic(ref_r, ntr, [X.shape[0] - s for s in ntr])
    assert abs(res.t - ref["t"]) < 1e-10 and abs(res.p_value - ref["p"]) < 1e-10


@pytest.mark.parametrize(("p", "m", "k"), [(4, 9, 2), (6, 40, 3), (3, 200, 1)])
def test_pls2_with_more_responses_than_features_equals_sklearn(p, m, k):
    # a Y wider than X takes each weight from the p × p Gram matrix instead of the m × m one (before:
    # m = 20000 needed a 3.2 GB eigendecomposition per component and split, m = 150000 failed)
    X, Y = _data(n=60, p=p, m=m, seed=p + m)
    est = PLSInference(n_components=k, test=False).fit(X, Y)
    sk = _sk(X, Y, k)
    np.testing.assert_allclose(est.coef_, sk.coef_, rtol=0, atol=1e-8 * np.abs(sk.coef_).max())
    np.testing.assert_allclose(est.predict(X), sk.predict(X), atol=1e-8 * np.abs(Y).max())
    res = subspace_test(X, Y, n_components=k, n_splits=6, random_state=1, method="nb", force=True)
    ref_r = [heldout_r_pls2(X, Y, t, k) for t in res.train_indices]
    np.testing.assert_allclose(res.r, ref_r, atol=1e-10)


def test_pls2_permutation_and_null_calibration():
    X, Y = _data(seed=3)
    perm = subspace_test(X, Y, method="nb-permutation", n_perm=39, n_splits=8, random_state=0)
    assert perm.p_value == 1 / 40
    rng = np.random.default_rng(5)
    reps, rej = 200, 0
    for i in range(reps):
        Xn = rng.normal(size=(60, 20))
        rej += subspace_test(Xn, rng.normal(size=(60, 3)), n_splits=30, random_state=i, n_jobs=1).p_value < 0.05
    assert rej / reps <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)


def test_pls2_real_tecator():
    from thrifty.inference import GateWarning, datasets

    try:
        Xt, E = datasets.load_tecator()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    est = PLSInference(n_components=3, test=False).fit(Xt, E)
    sk = _sk(Xt, E, 3)
    np.testing.assert_allclose(est.coef_, sk.coef_, rtol=0, atol=1e-8 * np.abs(sk.coef_).max())
    with pytest.warns(GateWarning):
        res = subspace_test(Xt, E, n_components=3, n_perm=199, random_state=0)
    assert res.p_value == 1 / 200


def test_pls2_bad_input():
    X, Y = _data()
    with pytest.raises(ValueError, match="learner='pls'"):
        subspace_test(X, Y, learner="spca")
    with pytest.raises(ValueError, match="supports method"):
        subspace_test(X, Y, method="jackknife")
    with pytest.raises(ValueError, match="rotate"):
        subspace_test(X, Y, rotate="varimax")
    with pytest.raises(ValueError, match="every column of y is constant"):
        subspace_test(X, np.ones((80, 2)))
    with pytest.raises(ValueError, match="different lengths"):
        subspace_test(X, Y[:-1])
    Yn = Y.copy()
    Yn[0, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        subspace_test(X, Yn)
