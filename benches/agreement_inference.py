"""Agreement figures for thrifty.inference (acceptance 1 and 3), printed as numbers:

- the NB statistic, t, df, p and per-split r against an independent NumPy/SciPy implementation;
- PLS coefficients against scikit-learn PLSRegression(scale=True) on random and real data;
- r and p under random orthogonal / invertible rotations of a basis and under varimax.

    .venv/bin/python benches/agreement_inference.py
"""
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "inference"))
from inference_reference import heldout_r, nb_statistic
from sklearn.cross_decomposition import PLSRegression

from thrifty.inference import PLSInference, subspace_test
from thrifty.inference.datasets import load_gasoline, load_tecator

worst = 0.0
for k in (1, 2, 3):
    for weighted in (False, True):
        rng = np.random.default_rng(k)
        X = rng.normal(size=(80, 25)) * rng.uniform(0.5, 3, 25) + rng.uniform(-5, 5, 25)
        y = 0.6 * (X[:, 0] - X[:, 3]) + rng.normal(size=80)
        w = rng.uniform(0.2, 2, 80) if weighted else None
        res = subspace_test(X, y, k, n_splits=12, sample_weight=w, random_state=3, force=True)
        r = np.array([heldout_r(X, y, t, k, w) for t in res.train_indices])
        ntr = [t.size for t in res.train_indices]
        ref = nb_statistic(r, ntr, [80 - s for s in ntr])
        d = max(np.abs(res.r - r).max(), abs(res.t - ref["t"]), abs(res.p_value - ref["p"]),
                abs(res.statistic - ref["statistic"]), abs(res.df - ref["df"]))
        worst = max(worst, d)
print(f"max |thrifty - NumPy/SciPy reference| over r, t, df, p, tanh(zbar) (k=1,2,3; weighted and not): {worst:.2e}")
worst = 0.0
cases = []
for k in (1, 2, 3, 5):
    rng = np.random.default_rng(k)
    cases.append((rng.normal(size=(70, 30)) * rng.uniform(0.5, 3, 30), rng.normal(size=70), k))
Xt, E = load_tecator()
Xg, yg = load_gasoline()
cases += [(Xt, E[:, 1], 1), (Xt, E[:, 1], 3), (Xg, yg, 2)]
for X, y, k in cases:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = PLSRegression(k, tol=1e-300, max_iter=20000).fit(X, y)
    c = PLSInference(n_components=k, test=False).fit(X, y).coef_
    worst = max(worst, np.abs(c - sk.coef_.ravel()).max() / np.abs(sk.coef_).max())
print(f"max relative |coef - sklearn PLSRegression(scale=True).coef_| (random, Tecator fat, gasoline octane): {worst:.2e}")
worst_r = worst_p = 0.0
for seed in range(20):
    rng = np.random.default_rng(100 + seed)
    X = rng.normal(size=(60, 12))
    y = X[:, :2].sum(1) * 0.5 + rng.normal(size=60)
    kk = 1 + seed % 4
    B = rng.normal(size=(12, kk))
    R = np.linalg.qr(rng.normal(size=(kk, kk)))[0] if seed % 2 else rng.normal(size=(kk, kk)) + 2 * np.eye(kk)
    a = subspace_test(X, y, learner=B, n_splits=8, random_state=seed, force=True)
    b = subspace_test(X, y, learner=B @ R, n_splits=8, random_state=seed, force=True)
    worst_r = max(worst_r, np.abs(a.r - b.r).max())
    worst_p = max(worst_p, abs(a.p_value - b.p_value))
    if kk > 1:
        c = subspace_test(X, y, kk, n_splits=8, random_state=seed, force=True)
        d = subspace_test(X, y, kk, n_splits=8, random_state=seed, force=True, rotate="varimax")
        worst_r = max(worst_r, np.abs(c.r - d.r).max())
        worst_p = max(worst_p, abs(c.p_value - d.p_value))
print(f"rotation invariance (orthogonal, invertible, varimax): max |dr| = {worst_r:.2e}, max |dp| = {worst_p:.2e}")
from inference_invariance_ref import reference_varimax

from thrifty.inference import varimax

worst = 0.0
for seed in range(50):
    rng = np.random.default_rng(seed)
    k = 2 + seed % 4
    L = rng.normal(size=(k + 2 + seed % 20, k))
    out = varimax(L)
    refL, refR, refc = reference_varimax(L)
    sign = np.sign(np.sum(out.loadings * refL, axis=0))
    worst = max(worst, np.abs(out.loadings * sign - refL).max(), abs(out.criterion - refc))
print(f"varimax vs reference SVD-iteration implementation (50 random matrices): max |diff| = {worst:.2e}")
