"""Issue 10 (trust), inference part: the default route per learner (A1), undefined split correlations
(A2), a transformer's true k (A3), scale robustness and varimax (A4), absurd sizes (B8), Ctrl-C (B9),
scipy-like results and scikit-learn shapes (C14), pandas input and keyword-only arguments (C15)."""

from __future__ import annotations

import _thread
import threading
import time
import warnings

import numpy as np
import pytest
from sklearn.cross_decomposition import PLSRegression
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import SelectKBest, f_regression

from thrifty.inference import (
    GateWarning,
    PLSInference,
    UndefinedSplitWarning,
    component_tests,
    subspace_test,
    varimax,
)

rng = np.random.default_rng(10)
X = rng.normal(size=(100, 20))
y = 0.5 * X[:, 0] + rng.normal(size=100)


# ---- A1: the default route -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        {"learner": "ridge"},
        {"learner": "spca"},
        {"learner": np.eye(20)[:, :2]},
        {"learner": SelectKBest(f_regression, k=3)},
        {"n_components": 2},
    ],
)
def test_auto_runs_the_permutation_test_where_nb_is_not_calibrated(kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", GateWarning)  # the learner rule reroutes "auto" silently
        res = subspace_test(X, y, n_splits=6, n_perm=19, random_state=0, **kw)
    assert res.method == "nb-permutation" and res.gate.rerouted and res.gate.reroute
    assert any("correlated about 1/2" in r for r in res.gate.reasons), res.gate.reasons
    # asking for "nb" explicitly warns; force runs it
    with pytest.warns(GateWarning, match="correlated about 1/2"):
        subspace_test(X, y, method="nb", n_splits=6, n_perm=19, random_state=0, **kw)
    forced = subspace_test(X, y, method="nb", force=True, n_splits=6, random_state=0, **kw)
    assert forced.method == "nb" and forced.gate.forced


def test_auto_keeps_the_nb_test_for_pls1_where_it_is_calibrated():
    res = subspace_test(X, y, random_state=0)
    assert res.method == "nb" and not res.gate.reroute and res.gate.reasons == ()
    small = subspace_test(X[:50], y[:50], n_splits=6, n_perm=19, random_state=0)
    assert small.method == "nb-permutation" and "n_eff = 50.0 < 60" in small.gate.reasons[-1]


def test_nb_is_conservative_for_ridge_and_spca_which_is_why_auto_reroutes():
    # the cause in numbers: Var(mean z) (n_te - 3) is the split statistics' null correlation, which
    # the NB factor n_te/n_tr = 1 takes as 1/2; ridge and spca splits are far less correlated
    g = np.random.default_rng(1)
    for learner, low, high in (("pls", 0.38, 0.62), ("ridge", 0.1, 0.33), ("spca", 0.05, 0.3)):
        zbar = []
        for r in range(150):
            Xn, yn = g.normal(size=(100, 50)), g.normal(size=100)
            res = subspace_test(Xn, yn, learner=learner, method="nb", force=True, random_state=r, n_jobs=1)
            zbar.append(res.z_mean)
        rho = np.var(zbar) * (res.n_test - 3)
        assert low < rho < high, (learner, rho)


# ---- A2: undefined split correlations --------------------------------------------------------


def test_undefined_split_correlations_warn_and_are_left_out():
    g = np.random.default_rng(2)
    Xs = g.normal(size=(12, 4))
    ys = np.array([0, 0, 0, 0, 0, 0, 1.0, 2.0, 0.5, 3.0, 1.5, 2.5])
    trains = [np.arange(6, 12), np.arange(0, 6), np.array([0, 2, 4, 6, 8, 10]), np.array([1, 3, 5, 7, 9, 11])]
    with pytest.warns(UndefinedSplitWarning, match="undefined on 2 of 4 splits"):
        res = subspace_test(Xs, ys, learner=np.eye(4)[:, :1], splits=trains, force=True)
    assert res.n_undefined == 2 and np.isnan(res.r[:2]).all() and np.isfinite(res.r[2:]).all()
    assert res.n_splits == 4 and np.isfinite(res.pvalue) and res.df == 1
    with pytest.raises(ValueError, match="undefined on 3 of 4"):
        subspace_test(Xs, ys, learner=np.eye(4)[:, :1], splits=trains[:2] + [trains[0], trains[2]], force=True)


def test_a_zero_spread_gives_no_degenerate_interval():
    g = np.random.default_rng(3)
    Xs = g.normal(size=(60, 5))
    with pytest.warns(UndefinedSplitWarning, match="do not vary"):
        res = subspace_test(Xs, 2 * Xs[:, 0], learner=np.eye(5)[:, :1], n_splits=5, random_state=0, force=True)
    assert np.isnan(res.ci).all() and np.isnan(res.confidence_interval(0.9)).all()


# ---- A3: a transformer's number of scores ----------------------------------------------------


def test_transformer_k_is_checked_and_reported():
    res = subspace_test(X, y, learner=PCA(n_components=3), n_splits=5, n_perm=9, random_state=0)
    assert res.n_components == 3
    sel = subspace_test(X, y, learner=SelectKBest(f_regression, k=2), n_splits=5, n_perm=9, random_state=0)
    assert sel.n_components == 2
    with pytest.raises(ValueError, match="returned 3 directions/scores per sample, but n_components=2"):
        subspace_test(X, y, 2, learner=PCA(n_components=3), n_splits=5, n_perm=9, random_state=0)
    with pytest.raises(ValueError, match="n_components=1"):
        subspace_test(X, y, 1, learner=lambda a, b: np.ones((a.shape[1], 2)), n_splits=5, force=True)


# ---- A4: scale robustness, varimax, the component guard ---------------------------------------


@pytest.mark.parametrize("scale", [1e-200, 1e-150, 1e155])
def test_varimax_is_scale_invariant(scale):
    L = np.random.default_rng(4).normal(size=(15, 3))
    for normalize in (True, False):
        ref = varimax(L, normalize=normalize)
        out = varimax(L * scale, normalize=normalize)
        np.testing.assert_allclose(out.rotation, ref.rotation, atol=1e-10)
        np.testing.assert_allclose(out.loadings / scale, ref.loadings, rtol=1e-9, atol=1e-12)


def test_varimax_warns_at_max_iter():
    L = np.random.default_rng(5).normal(size=(15, 3))
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        out = varimax(L, max_iter=1)
    assert not out.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert varimax(L).converged


@pytest.mark.parametrize("sx, sy", [(1e160, 1.0), (1.0, 1e160), (1e-160, 1e-200), (1e150, 1e-150)])
def test_moments_and_gate_are_scale_robust(sx, sy):
    ref = subspace_test(X, y, n_splits=6, random_state=0)
    for learner in ("pls", "ridge"):
        ref = subspace_test(X, y, learner=learner, n_splits=6, n_perm=19, random_state=0)
        got = subspace_test(X * sx, y * sy, learner=learner, n_splits=6, n_perm=19, random_state=0)
        np.testing.assert_allclose(got.r, ref.r, atol=1e-9)
        assert got.pvalue == pytest.approx(ref.pvalue, abs=1e-9) and got.method == ref.method
    est = PLSInference(n_components=2, test=False).fit(X * sx, y * sy)
    base = PLSInference(n_components=2, test=False).fit(X, y)
    np.testing.assert_allclose(est.coef_ * sx / sy, base.coef_, rtol=1e-9)
    np.testing.assert_allclose(est.predict(X * sx) / sy, base.predict(X), rtol=1e-9, atol=1e-9)


def test_plsinference_accepts_every_n_components_sklearn_fits():
    g = np.random.default_rng(6)
    Xs = g.normal(size=(12, 20))
    ys = Xs[:, 0] + 0.1 * g.normal(size=12)
    for k in (5, 11, 12):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sk = PLSRegression(n_components=k).fit(Xs, ys)
            est = PLSInference(n_components=k, test=False).fit(Xs, ys)
        assert est.coef_.shape == sk.coef_.shape == (1, 20)
        assert est.x_weights_.shape == sk.x_weights_.shape
        np.testing.assert_allclose(est.predict(Xs), sk.predict(Xs), atol=1e-6 * np.abs(ys).max())
    with pytest.warns(UserWarning, match="y residual is constant"):
        est = PLSInference(n_components=12, test=False).fit(Xs, ys)
    assert est.n_components_fitted_ == 11
    with pytest.raises(ValueError, match="n_components must be in"):
        PLSInference(n_components=13, test=False).fit(Xs, ys)


# ---- B8: absurd sizes ------------------------------------------------------------------------


def test_absurd_sizes_raise_before_allocating():
    with pytest.raises(ValueError, match="n_splits=1000000000000 needs"):
        subspace_test(X, y, n_splits=10**12)
    with pytest.raises(ValueError, match="n_perm=1000000000000000 needs"):
        subspace_test(X, y, method="nb-permutation", n_perm=10**15, n_splits=4)
    with pytest.raises(ValueError, match="n_perm"):
        subspace_test(X, y, method="cv-permutation-q2", n_perm=10**15)
    with pytest.raises(ValueError, match="n_splits"):
        component_tests(X, y, n_splits=10**12)
    with pytest.raises(ValueError, match="n_components"):
        subspace_test(X, y, n_components=10**15)
    # the core refuses them too (no allocation-failure abort behind the Python checks)
    from thrifty import _core

    with pytest.raises(ValueError, match="n_splits"):
        _core.inference_draw_splits(100, 1, 2**62, 0)
    with pytest.raises(ValueError, match="more than can be allocated"):
        _core.inference_permutation(2**62, 0, 0)
    a = subspace_test(X, y, method="nb-permutation", n_perm=30, n_splits=5, random_state=0, n_jobs=10**6)
    b = subspace_test(X, y, method="nb-permutation", n_perm=30, n_splits=5, random_state=0, n_jobs=1)
    assert a.pvalue == b.pvalue


# ---- B9: Ctrl-C ------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["nb-permutation", "cv-permutation-q2"])
def test_long_permutation_runs_stop_on_ctrl_c(method):
    g = np.random.default_rng(7)
    Xl, yl = g.normal(size=(300, 60)), g.normal(size=300)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        subspace_test(Xl, yl, learner="spca", method=method, n_perm=10**6, random_state=0, progress=False)
    timer.cancel()
    assert time.perf_counter() - t0 < 3.0


# ---- C14 / C15: results and inputs -------------------------------------------------------------


def test_results_follow_scipy():
    res = subspace_test(X, y, random_state=0)
    stat, p = res
    assert (stat, p) == (res.statistic, res.pvalue) and res.p_value == res.pvalue
    ci = res.confidence_interval()
    assert (ci.low, ci.high) == res.ci
    wide = res.confidence_interval(0.99)
    assert wide.low < ci.low < ci.high < wide.high
    assert res.seed_ == 0
    with pytest.warns(DeprecationWarning, match="seed_"):
        assert res.seed_used == 0
    with pytest.raises(TypeError):
        subspace_test(X, y, 1, "pls")  # keyword-only after n_components


def test_plsinference_matches_plsregression_shapes_and_set_output():
    pd = pytest.importorskip("pandas")
    Y2 = np.c_[y, X[:, 1] + rng.normal(size=100)]
    for yy, shape in ((y, (100,)), (y[:, None], (100, 1)), (Y2, (100, 2))):
        est = PLSInference(n_components=2, test=False).fit(X, yy)
        sk = PLSRegression(n_components=2).fit(X, yy)
        assert est.coef_.shape == sk.coef_.shape and est.intercept_.shape == sk.intercept_.shape
        assert est.predict(X).shape == sk.predict(X).shape == shape
    est = PLSInference(n_components=2, test=False).fit(X, y)
    assert list(est.get_feature_names_out()) == ["plsinference0", "plsinference1"]
    out = est.set_output(transform="pandas").transform(pd.DataFrame(X, columns=[f"c{i}" for i in range(20)]))
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["plsinference0", "plsinference1"]


def test_pandas_nullable_input():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X[:, :5], columns=list("abcde")).astype("Float64")
    df["flag"] = pd.array(rng.integers(0, 2, size=100).astype(bool), dtype="boolean")
    ys = pd.Series(y, dtype="Float64")
    res = subspace_test(df, ys, n_splits=5, random_state=0, force=True)
    ref = subspace_test(df.to_numpy(dtype=float), y, n_splits=5, random_state=0, force=True)
    np.testing.assert_array_equal(res.r, ref.r)
    df.loc[3, "b"] = pd.NA
    with pytest.raises(ValueError, match="X contains NaN"):
        subspace_test(df, ys)
    ys[4] = pd.NA
    with pytest.raises(ValueError, match="y contains NaN"):
        subspace_test(X, ys)
