"""The inference additions of issue 20 (point 2): sparse PLS1 (``learner="spls"``), the two-block
``pls_svd_test``, ``select_n_components`` and ``rotation_stability``: exact values against
independent NumPy references, planted-signal recovery, fast two-sided null calibration (the full
table is benches/calibration_inference_extra.py) and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from inference_designs import null_design
from inference_extra_designs import null_blocks, planted_k, planted_sparse

from thrifty.inference import (
    GateWarning,
    pls_svd_test,
    rotation_stability,
    select_n_components,
    subspace_test,
)

ALPHA = 0.05


def _standardise(a):
    sd = a.std(axis=0)
    return (a - a.mean(axis=0)) / np.where(sd > 0, sd, np.inf)


def _spls_reference(x, y, k, keep):
    """Independent sparse PLS1 (hard keep-count on X_a'y_a, NIPALS deflation): weights W, coef R q."""
    x, y = x.copy(), y.copy()
    W, P, q = [], [], []
    for _ in range(k):
        w = x.T @ y
        order = sorted(range(w.size), key=lambda j: (-abs(w[j]), j))
        w[order[keep:]] = 0.0
        w /= np.linalg.norm(w)
        t = x @ w
        tt = t @ t
        pl = x.T @ t / tt
        qa = y @ t / tt
        x -= np.outer(t, pl)
        y -= qa * t
        W.append(w), P.append(pl), q.append(qa)
    W, P = np.array(W).T, np.array(P).T
    return W, W @ np.linalg.solve(P.T @ W, np.array(q))


def _held_out_r(X, y, train, coef_fn):
    test = np.setdiff1d(np.arange(len(y)), train)
    m, s = X[train].mean(0), X[train].std(0)
    xs = (X[train] - m) / s
    ys = (y[train] - y[train].mean()) / y[train].std()
    coef = coef_fn(xs, ys)
    return np.corrcoef((X[test] - m) / s @ coef, y[test])[0, 1]


# ---- sparse PLS1 --------------------------------------------------------------------------------


def test_spls_with_all_features_is_pls1():
    # bit for bit in the core's NIPALS (spls.rs tests); PLS1 at k = 1 takes a Gram route here, so to rounding
    rng = np.random.default_rng(0)
    X, y = planted_sparse(80, 12, (0, 1), rng)
    for k in (1, 2):
        kw = {"n_components": k, "method": "nb-permutation", "n_perm": 49, "random_state": 3, "n_splits": 8}
        pls = subspace_test(X, y, **kw)
        spls = subspace_test(X, y, learner="spls", spls_keep=12, **kw)
        np.testing.assert_allclose(pls.r, spls.r, rtol=0, atol=1e-13)
        assert pls.pvalue == spls.pvalue


@pytest.mark.parametrize("k, keep", [(1, 3), (2, 4), (3, 2)])
def test_spls_matches_an_independent_reference(k, keep):
    rng = np.random.default_rng(k)
    X, y = planted_sparse(60, 10, (0, 3, 5), rng)
    res = subspace_test(X, y, k, learner="spls", spls_keep=keep, method="nb-permutation", n_perm=9, n_splits=4,
                        random_state=1)
    W, _ = _spls_reference(_standardise(X), _standardise(y[:, None])[:, 0], k, keep)
    np.testing.assert_allclose(res.basis, W, atol=1e-10)
    assert all(np.count_nonzero(res.basis[:, a]) == keep for a in range(k))
    for j, train in enumerate(res.train_indices):
        ref = _held_out_r(X, y, train, lambda xs, ys: _spls_reference(xs, ys, k, keep)[1])
        assert res.r[j] == pytest.approx(ref, abs=1e-10)


def test_spls_recovers_planted_variables():
    support = (4, 17, 33)
    for seed in range(3):
        X, y = planted_sparse(150, 50, support, np.random.default_rng(seed))
        fixed = subspace_test(X, y, learner="spls", spls_keep=3, n_perm=99, random_state=seed)
        assert tuple(np.flatnonzero(fixed.basis[:, 0])) == support
        assert fixed.pvalue <= 0.01
        cv = subspace_test(X, y, learner="spls", spls_keep="cv", n_perm=19, n_splits=10, random_state=seed)
        assert set(support) <= set(np.flatnonzero(cv.basis[:, 0]))
        assert np.count_nonzero(cv.basis[:, 0]) <= 8  # the one-SE choice stays sparse


def test_spls_size_under_the_null_two_sided():
    reps, hits = 200, 0
    rng = np.random.default_rng(2024)
    for i in range(reps):
        X, y = null_design("iid", 60, 30, rng)
        res = subspace_test(X, y, learner="spls", spls_keep=5, n_perm=19, n_splits=10, random_state=i, n_jobs=1)
        assert res.method == "nb-permutation"
        hits += res.pvalue <= ALPHA
    se = np.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert ALPHA - 3 * se <= hits / reps <= ALPHA + 3 * se


@pytest.mark.parametrize(
    "kw, err",
    [
        ({"learner": "spls", "spls_keep": 0}, ValueError),
        ({"learner": "spls", "spls_keep": 31}, ValueError),
        ({"learner": "spls", "spls_keep": 2.5}, TypeError),
        ({"learner": "spls", "spls_keep": "all"}, TypeError),
        ({"learner": "pls", "spls_keep": 3}, ValueError),
    ],
)
def test_spls_bad_keep(kw, err):
    X, y = null_design("iid", 40, 30, np.random.default_rng(0))
    with pytest.raises(err, match="spls_keep"):
        subspace_test(X, y, **kw)


# ---- PLS-SVD -------------------------------------------------------------------------------------


def test_pls_svd_weights_are_the_svd_of_the_cross_covariance():
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(90, 7)), rng.normal(size=(90, 4))
    Y[:, 0] += X[:, 2]
    res = pls_svd_test(X, Y, 3, n_perm=19, n_splits=5, random_state=0)
    U, S, Vt = np.linalg.svd(_standardise(X).T @ _standardise(Y))
    for a in range(3):
        sign = np.sign(U[np.argmax(np.abs(U[:, a])), a])
        np.testing.assert_allclose(res.x_weights[:, a], sign * U[:, a], atol=1e-10)
        np.testing.assert_allclose(res.y_weights[:, a], sign * Vt[a], atol=1e-10)
    np.testing.assert_allclose(res.singular_values, S[:3] / 90, rtol=1e-12)


def test_pls_svd_split_statistic_matches_a_reference():
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(50, 6)), rng.normal(size=(50, 3))
    Y[:, 1] += 0.5 * X[:, 0]
    res = pls_svd_test(X, Y, n_perm=9, n_splits=6, random_state=2)
    for j, train in enumerate(res.test.train_indices):
        test = np.setdiff1d(np.arange(50), train)
        mx, sx, my, sy = X[train].mean(0), X[train].std(0), Y[train].mean(0), Y[train].std(0)
        U, _, Vt = np.linalg.svd(((X[train] - mx) / sx).T @ ((Y[train] - my) / sy))
        ref = np.corrcoef((X[test] - mx) / sx @ U[:, 0], (Y[test] - my) / sy @ Vt[0])[0, 1]
        assert res.test.r[j] == pytest.approx(ref, abs=1e-10)


def test_pls_svd_on_blocks_wider_than_the_rows_matches_the_svd():
    # both blocks wider than the train rows take the n_tr × n_tr route (no p × q cross matrix): the
    # per-split r, the weights fitted on all rows and the singular values are still those of the SVD
    rng = np.random.default_rng(12)
    n, p, q = 30, 60, 45
    X, Y = rng.normal(size=(n, p)), rng.normal(size=(n, q))
    Y[:, 1] += X[:, 0] + X[:, 5]
    res = pls_svd_test(X, Y, 3, n_perm=9, n_splits=6, random_state=4)
    for j, train in enumerate(res.test.train_indices):
        test = np.setdiff1d(np.arange(n), train)
        mx, sx, my, sy = X[train].mean(0), X[train].std(0), Y[train].mean(0), Y[train].std(0)
        U, _, Vt = np.linalg.svd(((X[train] - mx) / sx).T @ ((Y[train] - my) / sy))
        ref = np.corrcoef((X[test] - mx) / sx @ U[:, 0], (Y[test] - my) / sy @ Vt[0])[0, 1]
        assert res.test.r[j] == pytest.approx(ref, abs=1e-9)
    U, S, Vt = np.linalg.svd(_standardise(X).T @ _standardise(Y))
    for a in range(3):
        sign = np.sign(U[np.argmax(np.abs(U[:, a])), a])
        np.testing.assert_allclose(res.x_weights[:, a], sign * U[:, a], atol=1e-8)
        np.testing.assert_allclose(res.y_weights[:, a], sign * Vt[a], atol=1e-8)
    np.testing.assert_allclose(res.singular_values, S[:3] / n, rtol=1e-10)


def test_pls_svd_finds_a_shared_factor_and_reproduces():
    rng = np.random.default_rng(7)
    z = rng.normal(size=120)
    X, Y = rng.normal(size=(120, 15)), rng.normal(size=(120, 5))
    X[:, 3] += z
    Y[:, 2] += z
    res = pls_svd_test(X, Y, n_perm=199, random_state=11)
    assert res.method == "nb-permutation" and res.pvalue <= 0.01
    assert np.argmax(np.abs(res.x_weights[:, 0])) == 3 and np.argmax(np.abs(res.y_weights[:, 0])) == 2
    again = pls_svd_test(X, Y, n_perm=199, random_state=res.test.seed_, n_jobs=1)
    assert again.pvalue == res.pvalue
    np.testing.assert_array_equal(again.test.r, res.test.r)
    stat, p = res
    assert (stat, p) == (res.statistic, res.pvalue)


def test_pls_svd_nb_needs_force():
    rng = np.random.default_rng(8)
    X, Y = null_blocks("iid", 300, 20, 4, rng)
    with pytest.warns(GateWarning, match="two blocks"):
        assert pls_svd_test(X, Y, method="nb", n_perm=9, random_state=0).method == "nb-permutation"
    assert pls_svd_test(X, Y, method="nb", force=True, random_state=0).method == "nb"


@pytest.mark.parametrize(
    "design, p, q",
    # the last two: both blocks wider than the 20 train rows (the row-space route)
    [("iid", 20, 4), ("decaying", 20, 4), ("single-factor", 20, 4), ("iid", 50, 35), ("single-factor", 35, 50)],
)
def test_pls_svd_size_under_the_null_two_sided(design, p, q):
    reps, hits = 200, 0
    rng = np.random.default_rng(99)
    n = 60 if p < 30 else 40
    for i in range(reps):
        X, Y = null_blocks(design, n, p, q, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GateWarning)  # the design gate fires on the decaying X
            res = pls_svd_test(X, Y, n_perm=19, n_splits=10, random_state=i, n_jobs=1)
        hits += res.pvalue <= ALPHA
    se = np.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert ALPHA - 3 * se <= hits / reps <= ALPHA + 3 * se, (design, hits / reps)


@pytest.mark.parametrize(
    "X, Y, kw, err, match",
    [
        (np.full((20, 3), np.nan), np.ones((20, 2)), {}, ValueError, "X"),
        (np.ones((20, 3)), np.ones((19, 2)), {}, ValueError, "rows"),
        ("rand", "const", {}, ValueError, "constant"),
        ("rand", "rand", {"n_components": 3}, ValueError, "n_components"),
        ("rand", "rand", {"method": "score"}, ValueError, "method"),
        ("rand", "rand", {"force": 1}, TypeError, "force"),
        ("rand", "rand", {"n_perm": 0}, ValueError, "n_perm"),
    ],
)
def test_pls_svd_bad_input(X, Y, kw, err, match):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3)) if isinstance(X, str) else X
    if isinstance(Y, str):
        Y = np.ones((20, 2)) if Y == "const" else rng.normal(size=(20, 2))
    x0, y0 = X.copy(), Y.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)
        with pytest.raises(err, match=match):
            pls_svd_test(X, Y, **kw)
    np.testing.assert_array_equal(X, x0)
    np.testing.assert_array_equal(Y, y0)


# ---- select_n_components ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_select_n_components_picks_the_planted_k(k):
    for seed in range(3):
        X, y = planted_k(k, 300, 20, np.random.default_rng(seed))
        res = select_n_components(X, y, k_max=6, random_state=0)
        assert res.n_components == k, (seed, res.cv_r2)
        assert res.cv_r2.shape == (6,) and res.fold_r2.shape == (6, 5)
        np.testing.assert_allclose(res.cv_r2, res.fold_r2.mean(axis=1))
        best = np.argmax(res.cv_r2)
        assert select_n_components(X, y, k_max=6, rule="max", random_state=0).n_components == best + 1


def test_select_n_components_cv_matches_a_reference():
    rng = np.random.default_rng(3)
    X, y = planted_k(2, 60, 8, rng)
    res = select_n_components(X, y, k_max=3, n_folds=3, random_state=4)
    # the core's folds are not exposed; recover them from a spls run with keep = p (same CV path)? No: refit
    # every fold assignment would be needed, so check the R² definition on the curve's own invariants
    assert np.all(res.fold_r2 <= 1.0) and np.all(np.isfinite(res.fold_r2))
    same = select_n_components(X, y, k_max=3, n_folds=3, random_state=4, spls_keep=8)
    np.testing.assert_array_equal(res.fold_r2, same.fold_r2)  # keep = p is PLS1 bit for bit


def test_select_n_components_warns_about_the_k_it_could_not_score():
    # before: k beyond the data's rank came back as -inf in cv_r2 without a word
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3)) @ rng.standard_normal((3, 10))  # rank 3
    y = X[:, 0] + rng.standard_normal(60)
    with pytest.warns(UserWarning, match=r"k = 4, 5, 6 could not be fitted on every fold") as caught:
        res = select_n_components(X, y, k_max=6, random_state=0)
    assert len(caught) == 1
    assert np.isfinite(res.cv_r2[:3]).all() and np.isneginf(res.cv_r2[3:]).all() and res.n_components <= 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a full-rank design scores every k: no warning
        select_n_components(rng.standard_normal((60, 10)), y, k_max=6, random_state=0)


def test_select_n_components_sequence_rule():
    X, y = planted_k(2, 300, 20, np.random.default_rng(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GateWarning)  # planted factors dominate X's spectrum
        res = select_n_components(X, y, k_max=5, rule="sequence", random_state=0, n_perm=99)
    assert res.sequence is not None and res.n_components == res.sequence.k_star >= 2


@pytest.mark.parametrize(
    "kw, err",
    [({"k_max": 0}, ValueError), ({"k_max": 31}, ValueError), ({"rule": "bic"}, ValueError),
     ({"n_folds": 1}, ValueError), ({"spls_keep": 0}, ValueError), ({"alpha": 0.1}, ValueError),
     ({"k_max": 2.0}, TypeError)],
)
def test_select_n_components_bad_input(kw, err):
    X, y = null_design("iid", 40, 30, np.random.default_rng(0))
    with pytest.raises(err):
        select_n_components(X, y, **kw)


# ---- rotation_stability --------------------------------------------------------------------------


def test_rotation_stability_reads_stable_and_unstable_axes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12))
    y = X[:, 0] + X[:, 6] + rng.normal(scale=0.5, size=300)
    res = rotation_stability(X, y, 2, n_boot=200, random_state=0)
    assert res.congruence.shape == (200, 2) and res.axes.shape == (12, 2)
    assert np.all((res.congruence >= 0) & (res.congruence <= 1 + 1e-12))
    assert res.mean[0] > 0.95 and res.mean[1] < 0.85
    assert np.all(res.ci[:, 0] <= res.mean) and np.all(res.mean <= res.ci[:, 1])
    one = rotation_stability(X, y, 2, n_boot=50, random_state=5, n_jobs=1)
    two = rotation_stability(X, y, 2, n_boot=50, random_state=5, n_jobs=2)
    np.testing.assert_array_equal(one.congruence, two.congruence)


def test_rotation_stability_reference_axes_are_the_varimax_of_the_pls_weights():
    from sklearn.cross_decomposition import PLSRegression

    from thrifty.inference import varimax

    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 8))
    y = X[:, 0] - X[:, 4] + rng.normal(size=100)
    res = rotation_stability(X, y, 3, n_boot=5, random_state=0)
    W = PLSRegression(3, scale=True).fit(X, y).x_weights_
    np.testing.assert_allclose(np.abs(res.weights), np.abs(W), atol=1e-8)
    np.testing.assert_allclose(res.axes, varimax(res.weights).loadings, atol=1e-10)


def test_rotation_stability_subsample_reads_stable_and_unstable_axes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 12))
    y = X[:, 0] + X[:, 6] + rng.normal(scale=0.5, size=300)
    res = rotation_stability(X, y, 2, n_boot=200, resample="subsample", random_state=0)
    assert (res.resample, res.m) == ("subsample", 55)  # ceil(300 ** 0.7), plskit's m
    assert res.congruence.shape == (200, 2)
    assert np.all((res.congruence >= 0) & (res.congruence <= 1 + 1e-12))
    # the planted axis replicates on 55-row subsamples, the noise axis does not
    assert res.mean[0] > 0.9 and res.mean[1] < 0.85
    boot = rotation_stability(X, y, 2, n_boot=200, random_state=0)
    assert (boot.resample, boot.m) == ("bootstrap", 300)
    assert not np.array_equal(res.congruence, boot.congruence)
    # the reference is the same fit on all rows
    np.testing.assert_array_equal(res.axes, boot.axes)
    one = rotation_stability(X, y, 2, n_boot=50, resample="subsample", subsample_rate=0.8, random_state=5, n_jobs=1)
    two = rotation_stability(X, y, 2, n_boot=50, resample="subsample", subsample_rate=0.8, random_state=5, n_jobs=2)
    assert one.m == 96
    np.testing.assert_array_equal(one.congruence, two.congruence)
    np.testing.assert_array_equal(one.congruence_unrotated, two.congruence_unrotated)
    # rate 1 draws every row: each resample is the full fit
    full = rotation_stability(X, y, 2, n_boot=3, resample="subsample", subsample_rate=1.0, random_state=5)
    assert full.m == 300
    np.testing.assert_allclose(full.congruence, 1.0, atol=1e-9)


@pytest.mark.parametrize(
    ("kw", "err", "match"),
    [({"resample": "jackknife"}, ValueError, "resample"), ({"resample": 1}, TypeError, "resample"),
     ({"resample": "subsample", "subsample_rate": 0.2}, ValueError, "subsample_rate"),
     ({"resample": "subsample", "subsample_rate": 0.0}, ValueError, "subsample_rate"),
     ({"resample": "subsample", "subsample_rate": 1.5}, ValueError, "subsample_rate"),
     ({"subsample_rate": "0.7"}, TypeError, "subsample_rate")],
)
def test_rotation_stability_resample_arguments(kw, err, match):
    X, y = null_design("iid", 40, 12, np.random.default_rng(0))
    with pytest.raises(err, match=match):
        rotation_stability(X, y, 3, n_boot=5, **kw)


@pytest.mark.parametrize("kw", [{"n_components": 1}, {"n_components": 9}, {"n_boot": 0}, {"confidence_level": 1.0}])
def test_rotation_stability_bad_input(kw):
    X, y = null_design("iid", 40, 12, np.random.default_rng(0))
    args = {"n_components": 2} | kw
    with pytest.raises(ValueError):
        rotation_stability(X, y, **args)


def test_spls_fast_null_equals_the_refit_null():
    from thrifty import _core

    X, y = planted_sparse(90, 40, (2, 9), np.random.default_rng(12))
    res = subspace_test(X, y, learner="spls", spls_keep=4, n_perm=9, n_splits=6, random_state=5)
    trains = list(res.train_indices)
    fast = _core.inference_nb_permutation(X, y, None, "spls", 1, trains, res.seed_, 0, 100, spca_n_features=4)
    slow = _core.inference_nb_permutation(X, y, None, "spls", 1, trains, res.seed_, 0, 100, spca_n_features=4, refit=True)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-13)


# ---- coefficient intervals and preprocess ------------------------------------------------------------


def test_coefficient_intervals_cover_and_detect():
    from thrifty.inference import coefficient_intervals

    beta = np.array([1.0, 0.5, 0.0, 0.0])
    covered, reps = np.zeros(4), 60
    for r in range(reps):
        rng = np.random.default_rng(r)
        X = rng.normal(size=(300, 4))
        y = X @ beta + rng.normal(size=300)
        ci = coefficient_intervals(X, y, n_boot=150, confidence_level=0.9, random_state=r, n_jobs=1)
        covered += (ci.coef_ci[:, 0] <= beta) & (beta <= ci.coef_ci[:, 1])
        assert np.all(ci.leverage >= 0) and ci.leverage.sum() == pytest.approx(1.0)
        assert abs(ci.coef_z[0]) > 5
    # iid X: PLS1 at k = 1 targets beta itself. Two-sided: every coefficient's coverage within 0.9 ± 3 se
    # (benches/coverage_intervals.py, 400 reps: 0.84-0.93 over designs and n; 0.78-0.86 without the
    # finite-population correction)
    se = np.sqrt(0.9 * 0.1 / reps)
    assert np.all(np.abs(covered / reps - 0.9) <= 3 * se), covered / reps


def test_coefficient_intervals_full_data_values_are_plsregression():
    from sklearn.cross_decomposition import PLSRegression

    from thrifty.inference import coefficient_intervals

    rng = np.random.default_rng(2)
    X = rng.normal(size=(120, 6))
    y = X[:, 0] - X[:, 2] + rng.normal(size=120)
    ci = coefficient_intervals(X, y, 2, n_boot=20, random_state=0)
    pls = PLSRegression(2).fit(X, y)
    np.testing.assert_allclose(ci.coef, pls.coef_.ravel(), rtol=1e-10)
    np.testing.assert_allclose(ci.leverage, (pls.x_weights_**2).sum(axis=1), rtol=1e-10)
    with pytest.raises(ValueError, match="m_rate"):
        coefficient_intervals(X, y, m_rate=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        coefficient_intervals(X, y, n_boot=0)


def test_preprocess_matches_numpy_and_the_estimator():
    from thrifty.inference import PLSInference, preprocess

    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 4)) * [1.0, 10.0, 0.1, 1.0] + 3.0
    X[:, 3] = 2.0
    y = X[:, 0] + rng.normal(size=50)
    w = rng.uniform(0.5, 2.0, size=50)
    pre = preprocess(X, y, sample_weight=w)
    m = np.average(X, axis=0, weights=w)
    sd = np.sqrt(np.average((X - m) ** 2, axis=0, weights=w))
    np.testing.assert_allclose(pre.X[:, :3], (X[:, :3] - m[:3]) / sd[:3], rtol=1e-12)
    assert np.all(pre.X[:, 3] == 0.0) and pre.X_scale[3] == 0.0
    assert pre.sample_weight.mean() == pytest.approx(1.0)
    np.testing.assert_allclose(pre.transform(X), pre.X)
    est = PLSInference(n_components=2, test=False).fit(X, y)
    plain = preprocess(X)
    np.testing.assert_allclose(est.transform(X), plain.X @ est.x_rotations_, atol=1e-12)
    ci = est.confidence_intervals(X, y, n_boot=30, random_state=0)
    np.testing.assert_allclose(ci.coef, est.coef_.ravel(), rtol=1e-10)
    with pytest.raises(ValueError):
        preprocess(np.full((5, 2), np.nan))


def test_pls_svd_with_one_column_is_the_pls1_test():
    # q = 1: v = ±1 and u ∝ X̃ᵀỹ, so the held-out latent correlation is PLS1's held-out r
    X, y = planted_sparse(70, 9, (0,), np.random.default_rng(4))
    two = pls_svd_test(X, y, n_perm=9, n_splits=7, random_state=3)
    one = subspace_test(X, y, method="nb-permutation", n_perm=9, splits=two.test.train_indices)
    np.testing.assert_allclose(two.test.r, one.r, rtol=0, atol=1e-12)


def test_pls_svd_test_given_splits_need_three_train_rows():
    # the same rule as the core (and so R and the C ABI): a split with 2 train rows is refused, naming splits
    from thrifty.inference import pls_svd_test

    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(30, 4)), rng.normal(size=(30, 3))
    with pytest.raises(ValueError, match="3 train rows"):
        pls_svd_test(X, Y, splits=[np.arange(15), np.arange(2)])
    assert np.isfinite(pls_svd_test(X, Y, splits=[np.arange(15), np.arange(3, 6)], n_perm=9).pvalue)
