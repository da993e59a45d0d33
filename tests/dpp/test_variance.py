"""Acceptance 2 and 3: exact variance vs Monte Carlo, unbiased weights, Haar integrates constants,
variance-reduction ratios with the exact formula, and the Daubechies 1/K_ii caveat."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty.dpp import Coreset, LEnsemble, ProjectionDPP, StratifiedDPP, discretize


def _mc_check(dpp, g: np.ndarray, n_samples: int, seed: int, sizes_vary: bool = False) -> None:
    """Weighted estimator Σ_{i∈S} g_i/K_ii: unbiased for Σ g, and its variance equals exact_variance
    (both within 3 standard errors of the Monte-Carlo estimates)."""
    kd = dpp.inclusion_probabilities()
    samples = dpp.sample_many(n_samples, random_state=seed)
    est = np.array([np.sum(g[s] / kd[s]) for s in samples])
    truth = g.sum()
    var = dpp.exact_variance(g)
    se_mean = np.sqrt(var / n_samples)
    assert abs(est.mean() - truth) < 3 * se_mean + 1e-12, (est.mean(), truth, se_mean)
    # SE of the sample variance: sqrt((μ4 − σ⁴)/n) with the empirical fourth central moment.
    c = est - est.mean()
    mc_var = np.mean(c**2) * n_samples / (n_samples - 1)
    se_var = np.sqrt(max(np.mean(c**4) - mc_var**2, 0.0) / n_samples)
    print(f"exact {var:.5g}  MC {mc_var:.5g} ± {se_var:.2g}")
    assert abs(mc_var - var) < 3 * se_var, (mc_var, var, se_var)


def test_exact_variance_projection_matches_monte_carlo() -> None:
    rng = np.random.default_rng(0)
    n = 300
    x = np.sort(rng.uniform(-1, 1, n))
    dpp = ProjectionDPP.from_features(np.vander(x, 8, increasing=True))
    g = np.cos(3 * x) + x**2
    _mc_check(dpp, g, 20_000, 1)
    # Unweighted statistic as well.
    s = dpp.sample_many(20_000, random_state=2)
    v = g[s].sum(axis=1)
    ev = dpp.exact_variance(g, weights="none")
    se = np.sqrt(max(np.mean((v - v.mean()) ** 4) - v.var() ** 2, 0) / v.size)
    assert abs(v.var() - ev) < 3 * se


def test_exact_variance_l_ensemble_matches_monte_carlo() -> None:
    rng = np.random.default_rng(3)
    F = rng.normal(size=(60, 6))
    dpp = LEnsemble(features=F)
    g = rng.normal(size=60)
    _mc_check(dpp, g, 20_000, 4)


def test_exact_variance_haar_matches_monte_carlo_and_formula() -> None:
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(2000, 2))
    dpp = discretize(X, 64, kernel="haar", density=lambda Z: 1.0 + Z[:, 0])
    assert isinstance(dpp, StratifiedDPP)
    g = np.sin(4 * X[:, 0]) + X[:, 1] ** 2
    _mc_check(dpp, g, 20_000, 6)
    # Block formula equals the dense U formula.
    dense = ProjectionDPP(dpp.basis())
    assert np.isclose(dense.exact_variance(g), dpp.exact_variance(g), rtol=1e-9)


def test_weights_make_coreset_estimator_unbiased() -> None:
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(3000, 2))
    f = np.exp(-((X - 0.3) ** 2).sum(1) / 0.05)
    for kernel in ("haar", "ope"):
        ests = np.array([Coreset(X, 32, kernel=kernel, random_state=s).estimate(f) for s in range(400)])
        exact_sd = np.sqrt(Coreset(X, 32, kernel=kernel, random_state=0).exact_variance(f))
        assert abs(ests.mean() - f.sum()) < 3 * exact_sd / np.sqrt(ests.size) + 1e-9, kernel


def test_haar_integrates_constants_exactly() -> None:
    rng = np.random.default_rng(8)
    X = rng.beta(2, 5, size=(5000, 3))
    for split in ("volume", "quantile"):
        for m in (17, 100, 512):
            cs = Coreset(X, m, kernel="haar", density="histogram", random_state=m, split=split)
            assert np.isclose(cs.weights.sum(), X.shape[0], rtol=1e-12)
            assert cs.exact_variance(np.ones(X.shape[0])) < 1e-12 * X.shape[0] ** 2
    # A known density that varies inside the cells keeps the weights unbiased but not exact.
    cs = Coreset(X, 64, kernel="haar", density=lambda Z: 1.0 + 3.0 * Z[:, 0], random_state=0)
    assert cs.exact_variance(np.ones(X.shape[0])) > 0


def test_daubechies_weights_do_not_integrate_constants_but_self_normalised_do() -> None:
    """The reference's pitfall: Σ_k φ(x−k)² is not constant for db2, so 1/K_ii weights are unbiased
    but not exact for constants; the library documents this and offers self-normalised weights."""
    from thrifty.dpp import daubechies_phi

    t = np.linspace(0, 1, 2001)[:-1]
    diag = sum(daubechies_phi(t + k, 2) ** 2 for k in range(3))
    assert diag.min() < 0.55 and diag.max() > 1.95  # ranges over about [0.517, 2.0]
    rng = np.random.default_rng(9)
    X = rng.uniform(size=(4000, 2))
    dpp = discretize(X, 64, kernel="daubechies", order=2)
    var_const = dpp.exact_variance(np.ones(X.shape[0]) / X.shape[0])
    print(f"Var of Σ 1/(n K_ii), db2, m=64: {var_const:.3g}")
    assert var_const > 1e-5
    cs = Coreset(X, 64, kernel="daubechies", order=2, random_state=1, weights="self_normalized")
    assert np.isclose(cs.weights.sum(), X.shape[0])


def _ratio_table() -> dict[tuple[str, str], float]:
    rng = np.random.default_rng(0)
    n, m = 20_000, 1024
    X = rng.uniform(size=(n, 2))
    fs = {
        "smooth": np.exp(-((X - 0.5) ** 2).sum(1) / (2 * 0.2**2)),
        "indicator": (X.sum(1) < 0.83).astype(float),
    }
    out = {}
    for kernel in ("haar", "ope"):
        dpp = discretize(X, m, kernel=kernel)
        for name, f in fs.items():
            out[(kernel, name)] = (f.var() / m) / dpp.exact_variance(f / n)
    return out


@pytest.mark.slow
def test_variance_reduction_targets() -> None:
    r = _ratio_table()
    print({k: round(v, 1) for k, v in r.items()})
    assert r[("haar", "smooth")] >= 250
    assert r[("haar", "indicator")] >= 35
    assert r[("ope", "smooth")] >= 5


def test_haar_variance_slope_is_m_to_minus_two_for_smooth_f() -> None:
    rng = np.random.default_rng(1)
    n = 20_000
    X = rng.uniform(size=(n, 2))
    f = np.exp(-((X - 0.5) ** 2).sum(1) / (2 * 0.2**2))
    v = [discretize(X, m, kernel="haar").exact_variance(f / n) for m in (64, 256, 1024)]
    slope = np.polyfit(np.log([64, 256, 1024]), np.log(v), 1)[0]
    assert -2.3 < slope < -1.7, slope
