"""Reference varimax (criterion and SVD iteration) written from the formulas, for tests and benches."""

from __future__ import annotations

import numpy as np


def criterion(L):
    p = L.shape[0]
    return float(np.sum(np.sum(L**4, axis=0) / p - (np.sum(L**2, axis=0) / p) ** 2))


def reference_varimax(L, normalize=True, max_iter=500, tol=1e-10):
    """The SVD algorithm as in R's stats::varimax / factor_analyzer, written from the formulas."""
    L = np.array(L, dtype=float)
    p, k = L.shape
    h = np.ones(p)
    if normalize:
        h = np.sqrt((L**2).sum(axis=1))
        h[h == 0] = 1
        L = L / h[:, None]
    R = np.eye(k)
    d = 0.0
    for it in range(max_iter):
        lam = L @ R
        B = L.T @ (lam**3 - lam @ np.diag((lam**2).sum(axis=0)) / p)
        u, s, vt = np.linalg.svd(B)
        R = u @ vt
        d_old, d = d, s.sum()
        if it > 0 and d < d_old * (1 + tol):
            break
    return (L @ R) * h[:, None], R, criterion(L @ R)
