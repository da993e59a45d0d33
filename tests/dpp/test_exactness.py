"""Acceptance 1: exactness of every sampler by chi-square tests on singleton and pair inclusion counts."""

from __future__ import annotations

import numpy as np
import pytest
from dpp_stats_helpers import det_prob, enumerated_prob, k_dpp_distribution, pair_test, singleton_test

from thrifty.dpp import LEnsemble, ProjectionDPP, StratifiedDPP, orthonormalize

N = 20
RANK = 6
N_SAMPLES = 20_000
ALPHA = 0.01


def _basis(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return orthonormalize(rng.normal(size=(N, RANK)) * np.linspace(0.3, 2.0, N)[:, None])


def _features(seed: int = 1, d: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(N, d)) * 0.6


def _iid_same_marginals(kdiag: np.ndarray, n_samples: int, seed: int) -> list[np.ndarray]:
    """A deliberately wrong sampler: independent Bernoulli(K_ii), the right singleton marginals."""
    rng = np.random.default_rng(seed)
    draws = rng.uniform(size=(n_samples, kdiag.size)) < kdiag
    return [np.flatnonzero(r) for r in draws]


def _check(samples: list[np.ndarray], prob, label: str) -> None:
    t1, p1, df1 = singleton_test(samples, N, prob)
    t2, p2, df2 = pair_test(samples, N, prob)
    print(f"{label}: singletons chi2={t1:.1f} df={df1} p={p1:.3f}; pairs chi2={t2:.1f} df={df2} p={p2:.3f}")
    assert p1 > ALPHA, f"{label}: singleton test rejects (p={p1:.2e})"
    assert p2 > ALPHA, f"{label}: pair test rejects (p={p2:.2e})"


@pytest.mark.parametrize("method", ["chain", "accept_reject"])
def test_projection_samplers_are_exact(method: str) -> None:
    U = _basis()
    dpp = ProjectionDPP(U)
    samples = dpp.sample_many(N_SAMPLES, random_state=123, method=method)
    # Exactly rank-many distinct items in every sample.
    assert samples.shape == (N_SAMPLES, RANK)
    assert all(len(set(s.tolist())) == RANK for s in samples)
    _check(list(samples), det_prob(U @ U.T), f"projection/{method}")


def test_full_l_ensemble_is_exact() -> None:
    F = _features()
    L = F @ F.T + 0.05 * np.eye(N)
    dpp = LEnsemble(L)
    K = L @ np.linalg.inv(L + np.eye(N))
    np.testing.assert_allclose(dpp.inclusion_probabilities(), np.diag(K), atol=1e-10)
    samples = dpp.sample_many(N_SAMPLES, random_state=7)
    assert all(len(set(s.tolist())) == len(s) for s in samples)
    _check(samples, det_prob(K), "L-ensemble (full)")


def test_low_rank_l_ensemble_is_exact() -> None:
    F = _features(seed=2, d=7)
    dpp = LEnsemble(features=F)
    L = F @ F.T
    K = L @ np.linalg.pinv(L + np.eye(N))
    np.testing.assert_allclose(dpp.inclusion_probabilities(), np.diag(K), atol=1e-10)
    samples = dpp.sample_many(N_SAMPLES, random_state=8)
    assert max(len(s) for s in samples) <= 7
    _check(samples, det_prob(K), "L-ensemble (low rank)")


@pytest.mark.parametrize("k", [3, 5, 17])  # k ≥ 16 runs the accept/reject path inside the k-DPP
def test_k_dpp_is_exact(k: int) -> None:
    F = _features(seed=3, d=8)
    L = F @ F.T + 0.1 * np.eye(N)
    dpp = LEnsemble(L)
    samples = dpp.sample_k_many(k, N_SAMPLES, random_state=9)
    assert samples.shape == (N_SAMPLES, k)
    assert all(len(set(s.tolist())) == k for s in samples)
    subsets, probs = k_dpp_distribution(L, k)
    _check(list(samples), enumerated_prob(subsets, probs), f"k-DPP k={k}")


def test_stratified_sampler_is_exact() -> None:
    rng = np.random.default_rng(4)
    cells = rng.integers(0, 5, size=N)
    cells[:5] = np.arange(5)
    p = rng.uniform(0.2, 1.0, size=N)
    dpp = StratifiedDPP(cells, p)
    U = dpp.basis()
    samples = dpp.sample_many(N_SAMPLES, random_state=10)
    assert samples.shape == (N_SAMPLES, 5)
    _check(list(samples), det_prob(U @ U.T), "stratified (Haar)")


def test_the_tests_reject_an_iid_sampler_with_the_same_marginals() -> None:
    U = _basis()
    K = U @ U.T
    prob = det_prob(K)
    wrong = _iid_same_marginals(np.diag(K), N_SAMPLES, seed=5)
    _, p1, _ = singleton_test(wrong, N, prob)
    _, p2, _ = pair_test(wrong, N, prob)
    print(f"iid sampler with the DPP's marginals: singleton p={p1:.2e}, pair p={p2:.2e}")
    assert p1 < ALPHA and p2 < ALPHA
    # Also against an L-ensemble (random sizes): the pair test alone catches the missing repulsion.
    F = _features()
    L = F @ F.T + 0.05 * np.eye(N)
    K = L @ np.linalg.inv(L + np.eye(N))
    wrong = _iid_same_marginals(np.diag(K), N_SAMPLES, seed=6)
    _, p2, _ = pair_test(wrong, N, det_prob(K))
    assert p2 < ALPHA


def test_accept_reject_and_chain_agree_on_pair_frequencies() -> None:
    U = _basis(seed=11)
    dpp = ProjectionDPP(U)
    a = dpp.sample_many(N_SAMPLES, random_state=1, method="accept_reject")
    b = dpp.sample_many(N_SAMPLES, random_state=2, method="chain")
    ya = np.zeros((N, N))
    yb = np.zeros((N, N))
    for s in a:
        ya[np.ix_(s, s)] += 1
    for s in b:
        yb[np.ix_(s, s)] += 1
    K = U @ U.T
    expect = (np.outer(np.diag(K), np.diag(K)) - K**2) * N_SAMPLES
    np.fill_diagonal(expect, np.diag(K) * N_SAMPLES)
    sd = np.sqrt(expect + 1.0)
    assert np.abs(ya - expect).max() / sd.max() < 6
    assert np.abs(yb - expect).max() / sd.max() < 6
