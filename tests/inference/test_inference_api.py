"""Behaviour of the public API: reproducibility, threads, learners, baselines, component tests."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from sklearn.decomposition import PCA

from thrifty.inference import (
    GateWarning,
    SubspaceTestResult,
    check_gate,
    component_tests,
    subspace_test,
)

rng = np.random.default_rng(0)
X = rng.normal(size=(120, 20))
y = 0.6 * X[:, 0] + 0.4 * X[:, 1] + rng.normal(size=120)


def test_result_is_frozen_and_readable():
    res = subspace_test(X, y, random_state=0)
    assert isinstance(res, SubspaceTestResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.p_value = 0.5  # type: ignore[misc]
    text = repr(res)
    assert "p-value" in text and "held-out r" in text and "seed_" in text
    assert res.seed_ == 0 and len(res.train_indices) == 50 and res.r.shape == (50,)
    assert res.df == 49 and res.ci[0] < res.statistic < res.ci[1]
    assert abs(res.r2 - res.statistic**2) < 1e-15


def test_inputs_are_not_modified():
    Xc, yc = X.copy(), y.copy()
    Xf = np.asfortranarray(X)
    subspace_test(Xf, y, random_state=0, n_splits=5)
    subspace_test(X.astype(np.float32), y, random_state=0, n_splits=5)
    np.testing.assert_array_equal(X, Xc)
    np.testing.assert_array_equal(y, yc)


def test_seed_and_threads_reproduce_exactly():
    a = subspace_test(X, y, method="nb-permutation", n_perm=100, random_state=5, n_jobs=1)
    b = subspace_test(X, y, method="nb-permutation", n_perm=100, random_state=5, n_jobs=2)
    assert a.p_value == b.p_value
    np.testing.assert_array_equal(a.r, b.r)
    np.testing.assert_array_equal(a.null_distribution, b.null_distribution)
    c = subspace_test(X, y, method="nb-permutation", n_perm=100, random_state=np.random.default_rng(3))
    d = subspace_test(X, y, method="nb-permutation", n_perm=100, random_state=c.seed_)
    assert c.p_value == d.p_value
    for k in (2, 3):
        e = subspace_test(X, y, n_components=k, method="nb-permutation", n_perm=60, random_state=1, n_jobs=1)
        f = subspace_test(X, y, n_components=k, method="nb-permutation", n_perm=60, random_state=1, n_jobs=2)
        np.testing.assert_array_equal(e.null_distribution, f.null_distribution)


def test_progress_bar_does_not_change_results(capsys):
    a = subspace_test(X, y, method="nb-permutation", n_perm=60, random_state=5, progress=True)
    b = subspace_test(X, y, method="nb-permutation", n_perm=60, random_state=5, progress=False)
    assert a.p_value == b.p_value


@pytest.mark.parametrize("learner", ["pls", "spca", "ridge"])
def test_builtin_learners_detect_signal_and_permutation_agrees(learner):
    # a latent factor carried by five columns drives y (supervised PCA's home ground)
    g = np.random.default_rng(4)
    u = g.normal(size=120)
    Xl = g.normal(size=(120, 20))
    Xl[:, :5] += 1.5 * u[:, None]
    yl = u + g.normal(size=120)
    res = subspace_test(Xl, yl, learner=learner, random_state=0)
    assert res.p_value < 1e-3
    perm = subspace_test(Xl, yl, learner=learner, method="nb-permutation", n_perm=99, n_splits=10, random_state=0)
    assert perm.p_value == 0.01


def test_callable_and_transformer_learners():
    res = subspace_test(X, y, learner=lambda Xt, yt: (Xt - Xt.mean(0)).T @ (yt - yt.mean()), random_state=0)
    # a callable's NB test is not calibrated: auto runs the permutation test (B = 1000)
    assert res.learner == "callable" and res.method == "nb-permutation" and res.p_value < 2e-3
    pca = subspace_test(X, y, learner=PCA(n_components=3), random_state=0, n_splits=10)
    assert pca.learner == "transformer" and 0 <= pca.p_value <= 1
    perm = subspace_test(
        X, y, learner=lambda Xt, yt: Xt.T @ yt, method="nb-permutation", n_perm=19, n_splits=5, random_state=0
    )
    assert perm.p_value == 0.05  # minimum attainable with 19 permutations


def test_transformer_matches_basis_learner():
    B = rng.normal(size=(20, 2))

    class Fixed:
        def fit(self, Xt, yt):
            self.mean_ = Xt.mean(axis=0)
            return self

        def transform(self, Xa):
            return (Xa - self.mean_) @ B

        def get_params(self, deep=True):
            return {}

        def set_params(self, **kw):
            return self

    a = subspace_test(X, y, learner=B, n_splits=6, random_state=2)
    b = subspace_test(X, y, learner=Fixed(), n_splits=6, random_state=2)
    np.testing.assert_allclose(a.r, b.r, atol=1e-10)


def test_gate_decision_recorded_and_force():
    f = rng.normal(size=(80, 1))
    Xf = 4 * f @ np.ones((1, 10)) + rng.normal(size=(80, 10))
    yf = Xf[:, 0] + rng.normal(size=80)
    assert check_gate(Xf).reroute
    with pytest.warns(GateWarning, match="stable rank"):
        res = subspace_test(Xf, yf, n_perm=99, random_state=0)
    assert res.method == "nb-permutation" and res.gate.rerouted and not res.gate.forced
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        forced = subspace_test(Xf, yf, force=True, random_state=0)
    assert forced.method == "nb" and forced.gate.forced and not forced.gate.rerouted
    small = check_gate(X[:20])
    assert small.reroute and any("n_eff" in r for r in small.reasons)
    w = np.r_[np.full(10, 100.0), np.full(110, 0.01)]
    assert check_gate(X, sample_weight=w).n_eff < 25


def test_baselines():
    q2 = subspace_test(X, y, method="cv-permutation-q2", n_perm=49, random_state=0)
    assert q2.p_value == 0.02 and 0.1 < q2.statistic < 1 and q2.null_distribution.shape == (49,)
    ps = subspace_test(X, y, method="permutation-score", n_perm=49, random_state=0)
    assert ps.p_value == 0.02
    jk = subspace_test(X, y, method="jackknife", n_folds=10, random_state=0)
    assert jk.df == 9 and jk.p_value < 0.01 and jk.details["t"].shape == (20,)
    # pooled Q² equals a direct computation with the same folds
    null = subspace_test(X, rng.permutation(y), method="cv-permutation-q2", n_perm=49, random_state=0)
    assert null.p_value > 0.05


def test_weighted_test_runs_and_unit_weights_change_nothing():
    a = subspace_test(X, y, sample_weight=np.full(120, 3.0), random_state=0)
    b = subspace_test(X, y, random_state=0)
    np.testing.assert_allclose(a.r, b.r, atol=1e-12)
    assert np.isnan(a.rho_hat) and not np.isnan(b.rho_hat)


def test_component_tests_sequence():
    Z = rng.normal(size=(400, 15))
    yz = Z[:, 0] + 0.7 * Z[:, 1] + rng.normal(size=400)
    out = component_tests(Z, yz, random_state=0)
    assert out.k_star >= 1 and out.p_values[0] < 0.05
    assert len(out.steps) == len(out.p_values) and out.p_values[-1] >= 0.05 or len(out.p_values) == 10
    assert "k_star" in repr(out)
    null = component_tests(Z, np.random.default_rng(99).normal(size=400), random_state=0, max_components=3)
    assert null.k_star == 0 and len(null.p_values) == 1
