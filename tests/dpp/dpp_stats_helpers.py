"""Exact inclusion statistics of small DPPs and the chi-square tests of the dpp suite."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

ProbFn = Callable[[tuple[int, ...]], float]


def det_prob(K: np.ndarray) -> ProbFn:
    """P(A ⊆ S) = det K_A for a DPP with marginal kernel K."""

    def f(a: tuple[int, ...]) -> float:
        idx = list(a)
        return float(np.linalg.det(K[np.ix_(idx, idx)]))

    return f


def enumerated_prob(subsets: np.ndarray, probs: np.ndarray) -> ProbFn:
    """P(A ⊆ S) from the full distribution over fixed-size subsets (rows of ``subsets``)."""
    n = int(subsets.max()) + 1
    member = np.zeros((subsets.shape[0], n), dtype=bool)
    np.put_along_axis(member, subsets, True, axis=1)

    def f(a: tuple[int, ...]) -> float:
        return float(probs[member[:, list(a)].all(axis=1)].sum())

    return f


def k_dpp_distribution(L: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    n = L.shape[0]
    subsets = np.array(list(itertools.combinations(range(n), k)))
    dets = np.linalg.det(L[subsets[:, :, None], subsets[:, None, :]])
    dets = np.clip(dets, 0, None)
    return subsets, dets / dets.sum()


def indicator_matrix(samples: Sequence[np.ndarray], n: int) -> np.ndarray:
    y = np.zeros((len(samples), n), dtype=np.float64)
    for r, s in enumerate(samples):
        y[r, np.asarray(s, dtype=np.int64)] = 1.0
    return y


def _mahalanobis_pvalue(obs: np.ndarray, mu: np.ndarray, cov: np.ndarray, n_samples: int) -> tuple[float, float, int]:
    vals, vecs = np.linalg.eigh(cov)
    keep = vals > 1e-9 * vals.max()
    z = vecs[:, keep].T @ (obs - mu)
    t = float(n_samples * np.sum(z * z / vals[keep]))
    df = int(keep.sum())
    # Deviations along directions the exact covariance forbids (e.g. a fixed sample size).
    resid = vecs[:, ~keep].T @ (obs - mu)
    if resid.size and np.abs(resid).max() > 1e-6:
        return t, 0.0, df
    return t, float(stats.chi2.sf(t, df)), df


def singleton_test(samples: Sequence[np.ndarray], n: int, prob: ProbFn) -> tuple[float, float, int]:
    """Chi-square test (Mahalanobis form, exact covariance) of the singleton inclusion counts.

    Under H0 the statistic n·(p̂−μ)ᵀΣ⁺(p̂−μ) is asymptotically χ² with rank(Σ) degrees of freedom,
    where μ_i = P(i ∈ S) and Σ_ij = P({i,j} ⊆ S) − μ_iμ_j. Returns (statistic, p-value, df).
    """
    y = indicator_matrix(samples, n)
    mu = np.array([prob((i,)) for i in range(n)])
    cov = np.empty((n, n))
    for i in range(n):
        cov[i, i] = mu[i] - mu[i] ** 2
        for j in range(i + 1, n):
            cov[i, j] = cov[j, i] = prob((i, j)) - mu[i] * mu[j]
    return _mahalanobis_pvalue(y.mean(axis=0), mu, cov, len(samples))


def pair_test(
    samples: Sequence[np.ndarray], n: int, prob: ProbFn, *, min_expected: float = 20.0
) -> tuple[float, float, int]:
    """Chi-square test of the pair inclusion counts against P({i,j} ⊆ S) (K_iiK_jj − K_ij² for a DPP),
    over the pairs with at least ``min_expected`` expected counts, with the exact covariance
    P(A∪B ⊆ S) − P(A)P(B) (sets of up to 4 items)."""
    m = len(samples)
    pairs = [p for p in itertools.combinations(range(n), 2) if prob(p) * m >= min_expected]
    y = indicator_matrix(samples, n)
    obs = np.array([np.mean(y[:, i] * y[:, j]) for i, j in pairs])
    mu = np.array([prob(p) for p in pairs])
    q = len(pairs)
    cov = np.empty((q, q))
    cache: dict[tuple[int, ...], float] = {}
    for a in range(q):
        for b in range(a, q):
            u = tuple(sorted(set(pairs[a]) | set(pairs[b])))
            if u not in cache:
                cache[u] = prob(u)
            cov[a, b] = cov[b, a] = cache[u] - mu[a] * mu[b]
    return _mahalanobis_pvalue(obs, mu, cov, m)
