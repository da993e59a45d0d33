"""Acceptance 1: the NB statistic, t, df, p equal an independent NumPy/SciPy implementation (1e-10);
PLS coefficients equal scikit-learn's PLSRegression(scale=True) (1e-8)."""

from __future__ import annotations

import numpy as np
import pytest
from inference_reference import heldout_r, nb_statistic
from sklearn.cross_decomposition import PLSRegression

from thrifty import _core
from thrifty.inference import PLSInference, subspace_test


def _data(n=80, p=25, seed=0, signal=0.6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * rng.uniform(0.5, 3, size=p) + rng.uniform(-5, 5, size=p)
    y = signal * (X[:, 0] - X[:, 3]) + rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True])
def test_nb_matches_numpy_reference(k, weighted):
    X, y = _data(seed=k)
    w = np.random.default_rng(9).uniform(0.2, 2.0, size=X.shape[0]) if weighted else None
    res = subspace_test(X, y, n_components=k, n_splits=12, sample_weight=w, random_state=3, force=True)
    assert res.method == "nb"
    r_ref = np.array([heldout_r(X, y, t, k, w) for t in res.train_indices])
    np.testing.assert_allclose(res.r, r_ref, rtol=0, atol=1e-10)
    n_tr = [t.size for t in res.train_indices]
    n_te = [X.shape[0] - s for s in n_tr]
    ref = nb_statistic(r_ref, n_tr, n_te)
    assert abs(res.statistic - ref["statistic"]) < 1e-10
    assert abs(res.t - ref["t"]) < 1e-10
    assert res.df == ref["df"]
    assert abs(res.p_value - ref["p"]) < 1e-10
    assert np.allclose(res.ci, ref["ci"], atol=1e-10)
    if not weighted:
        assert abs(res.rho_hat - ref["rho_hat"]) < 1e-10
    else:
        assert np.isnan(res.rho_hat)


def test_user_splits_reproduce_and_unbalanced_ratio():
    X, y = _data(n=61, seed=4)
    res = subspace_test(X, y, n_splits=8, random_state=11)
    again = subspace_test(X, y, splits=res.train_indices)
    assert again.p_value == res.p_value and np.array_equal(again.r, res.r)
    # unbalanced user splits: the ratio is the mean n_te/n_tr
    rng = np.random.default_rng(0)
    trains = [np.sort(rng.choice(61, size=s, replace=False)) for s in (40, 35, 45, 38)]
    res2 = subspace_test(X, y, splits=trains)
    ref = nb_statistic([heldout_r(X, y, t, 1) for t in trains], [40, 35, 45, 38], [21, 26, 16, 23])
    assert abs(res2.t - ref["t"]) < 1e-10 and abs(res2.p_value - ref["p"]) < 1e-10


def test_confidence_interval_at_level_08():
    X, y = _data(seed=5)
    res = subspace_test(X, y, n_splits=10, random_state=1, confidence_level=0.8)
    ref = nb_statistic(res.r, [t.size for t in res.train_indices], [X.shape[0] - t.size for t in res.train_indices], 0.8)
    assert np.allclose(res.ci, ref["ci"], atol=1e-12)
    assert abs(_core.inference_norm_ppf(0.9) - 1.2815515655446004) < 1e-13


def test_t_tail_direction_and_exact_sf():
    from scipy import stats

    for t in (-3.0, -0.2, 0.0, 0.4, 2.1, 8.0):
        for df in (1, 4, 49):
            assert abs(_core.inference_t_sf(t, df) - stats.t.sf(t, df)) < 1e-13


def test_permutation_null_matches_reference():
    X, y = _data(n=40, p=12, seed=6)
    res = subspace_test(X, y, method="nb-permutation", n_splits=5, n_perm=15, random_state=2)
    null = []
    for b in range(15):
        perm = _core.inference_permutation(X.shape[0], res.seed_, b)
        yp = y[perm]
        r = [heldout_r(X, yp, t, 1) for t in res.train_indices]
        null.append(np.mean(np.arctanh(np.clip(r, -0.9999, 0.9999))))
    np.testing.assert_allclose(res.null_distribution, null, atol=1e-10)
    expected = (1 + np.sum(np.array(null) >= res.z_mean)) / 16
    assert res.p_value == expected


@pytest.mark.parametrize("k", [1, 2, 3])
def test_basis_learner_matches_reference(k):
    X, y = _data(seed=7)
    B = np.random.default_rng(k).normal(size=(X.shape[1], k))
    res = subspace_test(X, y, learner=B, n_splits=6, random_state=0, force=True)
    r_ref = [heldout_r(X, y, t, k, basis=B, standardize=False) for t in res.train_indices]
    np.testing.assert_allclose(res.r, r_ref, atol=1e-10)


def _sk_coef(X, y, k):
    sk = PLSRegression(n_components=k, scale=True, max_iter=1000, tol=1e-14).fit(X, y)
    return np.ravel(sk.coef_), float(np.ravel(sk.intercept_)[0]), sk


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_pls_coefficients_equal_sklearn_random(k):
    X, y = _data(n=70, p=30, seed=k)
    est = PLSInference(n_components=k, test=False).fit(X, y)
    coef, _, sk = _sk_coef(X, y, k)
    np.testing.assert_allclose(est.coef_.ravel(), coef, rtol=0, atol=1e-8 * np.abs(coef).max())
    # sklearn centres X in predict (its intercept_ is the mean of y); compare predictions instead
    np.testing.assert_allclose(est.predict(X), sk.predict(X).ravel(), atol=1e-8)
    # same directions up to sign
    np.testing.assert_allclose(np.abs(est.x_weights_), np.abs(sk.x_weights_), atol=1e-8)
    # p >> n
    X2, y2 = _data(n=30, p=200, seed=k + 10)
    est2 = PLSInference(n_components=k, test=False).fit(X2, y2)
    coef2, _, _ = _sk_coef(X2, y2, k)
    np.testing.assert_allclose(est2.coef_.ravel(), coef2, rtol=0, atol=1e-8 * np.abs(coef2).max())


def test_pls_coefficients_equal_sklearn_real():
    from sklearn.datasets import load_diabetes

    Xd, yd = load_diabetes(return_X_y=True)
    for k in (1, 2, 4):
        coef, _, _ = _sk_coef(Xd, yd, k)
        est = PLSInference(n_components=k, test=False).fit(Xd, yd)
        np.testing.assert_allclose(est.coef_.ravel(), coef, rtol=0, atol=1e-8 * np.abs(coef).max())
    from thrifty.inference import datasets

    try:
        Xt, e = datasets.load_tecator()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    for k in (1, 3):
        coef, _, _ = _sk_coef(Xt, e[:, 1], k)
        est = PLSInference(n_components=k, test=False).fit(Xt, e[:, 1])
        np.testing.assert_allclose(est.coef_.ravel(), coef, rtol=0, atol=1e-8 * np.abs(coef).max())
