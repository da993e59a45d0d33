"""An independent NumPy/SciPy implementation of the held-out refit and the NB statistic (for tests)."""

from __future__ import annotations

import numpy as np
from scipy import stats


def weighted_moments(a: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = np.average(a, axis=0, weights=w)
    sd = np.sqrt(np.average((a - m) ** 2, axis=0, weights=w))
    return m, sd


def pls1_weights(X: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Textbook PLS1 NIPALS with X and y deflation; returns (rotations R, y-loadings q), X scores = X @ R."""
    X = X.copy()
    y = y.copy()
    W, P, Q = [], [], []
    for _ in range(k):
        w = X.T @ y
        w /= np.linalg.norm(w)
        t = X @ w
        tt = t @ t
        p = X.T @ t / tt
        q = y @ t / tt
        X -= np.outer(t, p)
        y -= q * t
        W.append(w)
        P.append(p)
        Q.append(q)
    W_, P_ = np.array(W).T, np.array(P).T
    return W_ @ np.linalg.inv(P_.T @ W_), np.array(Q)


def heldout_r(X, y, train, k, w=None, basis=None, standardize=True):
    """Held-out OLS refit r of one split (PLS when ``basis`` is None, else the fixed basis on centred X)."""
    n = X.shape[0]
    test = np.setdiff1d(np.arange(n), train)
    w = np.ones(n) if w is None else np.asarray(w, float)
    wtr = w[train] / w[train].mean()
    wte = w[test] / w[test].mean()
    m, sd = weighted_moments(X[train], wtr)
    if not standardize:
        sd = np.ones_like(sd)
    sd = np.where(sd > 1e-12 * np.abs(m), sd, np.inf)
    Ztr = (X[train] - m) / sd
    Zte = (X[test] - m) / sd
    my, sy = weighted_moments(y[train], wtr)
    ytr = (y[train] - my) / sy
    sw = np.sqrt(wtr)
    if basis is None:
        R, _ = pls1_weights(Ztr * sw[:, None], ytr * sw, k)
    else:
        R = basis
    S = (Ztr @ R) * sw[:, None]
    beta, *_ = np.linalg.lstsq(S, ytr * sw, rcond=None)
    pred = Zte @ R @ beta
    yte = y[test]
    # weighted Pearson r
    a = pred - np.average(pred, weights=wte)
    b = yte - np.average(yte, weights=wte)
    return float(np.sum(wte * a * b) / np.sqrt(np.sum(wte * a * a) * np.sum(wte * b * b)))


def nb_statistic(r, n_train, n_test, level=0.95):
    r = np.clip(np.asarray(r), -0.9999, 0.9999)
    z = np.arctanh(r)
    J = z.size
    zbar = z.mean()
    sz = z.std(ddof=1)
    se = sz * np.sqrt(1.0 / J + np.mean(np.asarray(n_test) / np.asarray(n_train)))
    t = zbar / se
    df = J - 1
    p = stats.t.sf(t, df)
    zc = stats.norm.ppf(1 - (1 - level) / 2)
    ci = (np.tanh(zbar - zc * se), np.tanh(zbar + zc * se))
    nte = np.mean(n_test)
    rho = np.clip(1 - sz**2 * (nte - 3), 0, 1)
    return {"statistic": np.tanh(zbar), "t": t, "df": df, "p": p, "ci": ci, "rho_hat": rho, "z_mean": zbar, "se": se}


def heldout_r_pls2(X, Y, train, k):
    """PLS2 held-out r via scikit-learn's PLSRegression (unweighted): pooled Pearson r between predicted
    and observed test responses in train-standardised (population SD) units."""
    import warnings

    from sklearn.cross_decomposition import PLSRegression

    n = X.shape[0]
    test = np.setdiff1d(np.arange(n), train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = PLSRegression(n_components=k, tol=1e-300, max_iter=20000).fit(X[train], Y[train])
    m, sd = Y[train].mean(axis=0), Y[train].std(axis=0)
    pred = (sk.predict(X[test]) - m) / sd
    obs = (Y[test] - m) / sd
    return float(np.corrcoef(pred.ravel(), obs.ravel())[0, 1])
