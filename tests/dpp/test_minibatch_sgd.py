"""Acceptance 3 (second half): DPP minibatches on scikit-learn's digits after PCA (logistic loss) have
lower gradient variance than uniform minibatches of the same size."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA

from thrifty.dpp import MinibatchSampler


def _problem(d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    Z = PCA(d, random_state=0).fit_transform(X)
    Z = (Z - Z.mean(0)) / Z.std(0)
    A = np.hstack([np.ones((len(Z), 1)), Z])
    return Z, A, (y < 5).astype(float)


def _grads(A: np.ndarray, y: np.ndarray, theta: np.ndarray) -> np.ndarray:
    p = 1.0 / (1.0 + np.exp(-A @ theta))
    return (p - y)[:, None] * A  # per-example gradients of the logistic loss


@pytest.mark.parametrize("d", [2, 3])
def test_dpp_minibatch_gradients_have_lower_variance(d: int) -> None:
    Z, A, y = _problem(d)
    n, b = len(Z), 64
    sampler = MinibatchSampler(Z, b, random_state=0, n_batches=3000)
    rng = np.random.default_rng(0)
    for theta in (np.zeros(d + 1), rng.normal(size=d + 1)):
        G = _grads(A, y, theta)
        mean_grad = G.mean(0)
        # Exact: uniform minibatch without replacement vs the DPP (trace of the covariance).
        v_unif = float((G.var(0) / b * (n - b) / (n - 1)).sum())
        v_dpp = sum(sampler.dpp.exact_variance(G[:, j] / n) for j in range(d + 1))
        print(f"d={d} theta={np.round(theta, 2)}: exact variance uniform {v_unif:.3g} DPP {v_dpp:.3g} ratio {v_unif / v_dpp:.2f}")
        assert v_unif / v_dpp > 1.5
        # Monte Carlo with the sampler's own batches and weights: unbiased and lower variance.
        est = np.array([w @ G[idx] for idx, w in sampler])
        mc_dpp = float(((est - mean_grad) ** 2).sum(1).mean())
        assert np.abs(est.mean(0) - mean_grad).max() < 4 * np.sqrt(v_dpp / len(est)) + 1e-12
        uni = np.array([G[rng.choice(n, b, replace=False)].mean(0) for _ in range(3000)])
        mc_unif = float(((uni - mean_grad) ** 2).sum(1).mean())
        print(f"   Monte Carlo: uniform {mc_unif:.3g} DPP {mc_dpp:.3g}")
        assert mc_dpp < mc_unif
