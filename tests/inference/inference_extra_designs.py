"""Designs for the inference additions: planted numbers of PLS components and planted sparse variables."""

from __future__ import annotations

import numpy as np

SCALES = np.array([4.0, 2.0, 1.0, 0.5])


def planted_k(k: int, n: int, p: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """X = T Pᵀ + 0.05 E with k latent scores of distinct variances (4, 2, 1, 0.5) on random orthonormal
    loadings, y = T (1/scale) + 0.5 e: the regression needs exactly k PLS components."""
    T = rng.normal(size=(n, k)) * SCALES[:k]
    P, _ = np.linalg.qr(rng.normal(size=(p, k)))
    X = T @ P.T + 0.05 * rng.normal(size=(n, p))
    return X, T @ (1.0 / SCALES[:k]) + 0.5 * rng.normal(size=n)


def planted_sparse(n: int, p: int, support: tuple[int, ...], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """iid X, y = sum of the ``support`` columns + N(0, 1)."""
    X = rng.normal(size=(n, p))
    return X, X[:, list(support)].sum(axis=1) + rng.normal(size=n)


def null_blocks(design: str, n: int, p: int, q: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """X from ``inference_designs.null_design`` and an independent Y (n, q) of the same design."""
    from inference_designs import null_design

    X, _ = null_design(design, n, p, rng)
    Y, _ = null_design(design, n, q, rng)
    return X, Y
