"""Null designs for calibration checks (y independent of X)."""

from __future__ import annotations

import numpy as np

DESIGNS = ("iid", "decaying", "single-factor", "low-stable-rank")


def null_design(name: str, n: int, p: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    Z = rng.normal(size=(n, p))
    if name == "iid":
        X = Z
    elif name == "decaying":
        Q, _ = np.linalg.qr(rng.normal(size=(p, p)))
        X = (Z * (np.arange(1, p + 1) ** -0.75)) @ Q
    elif name == "single-factor":
        f = rng.normal(size=(n, 1))
        X = 0.5 * f @ np.ones((1, p)) + Z
    elif name == "low-stable-rank":
        f = rng.normal(size=(n, 1))
        X = 3.0 * f @ rng.uniform(0.5, 1.5, size=(1, p)) + Z
    else:
        raise ValueError(name)
    return X, rng.normal(size=n)
