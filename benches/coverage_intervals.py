"""Coverage of ``coefficient_intervals`` (subsampling intervals for PLS1's β and leverage, issue 20 point 2).

Each cell: ``--reps`` data sets, the interval at ``--level`` for every coefficient, and the share that covers the
population target of PLS1 with one component: θ = s (sᵀs) / (sᵀΣs) with s = Σβ (θ = β on iid X), leverage
h = w² with w = s / ‖s‖. Two-sided: a cell is in band when |coverage - level| <= 3·se (se of a binomial share).

    .venv/bin/python benches/coverage_intervals.py [--reps 400] [--level 0.9]   -> benches/output/coverage_intervals.txt
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from thrifty.inference import coefficient_intervals

BETA = np.array([1.0, 0.5, 0.0, 0.0])


def design(name: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = BETA.size
    if name == "ar0.5":
        sigma = 0.5 ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    else:
        sigma = np.eye(p)
    X = rng.normal(size=(n, p)) @ np.linalg.cholesky(sigma).T
    noise = rng.standard_t(3, size=n) / math.sqrt(3) if name == "t3-noise" else rng.normal(size=n)
    return X, X @ BETA + noise, sigma


def targets(sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = sigma @ BETA
    theta = s * (s @ s) / (s @ sigma @ s)
    w = s / np.linalg.norm(s)
    return theta, w**2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--level", type=float, default=0.9)
    ap.add_argument("--n-boot", type=int, default=300)
    a = ap.parse_args()
    se = math.sqrt(a.level * (1 - a.level) / a.reps)
    print(f"coefficient_intervals coverage at level {a.level}, {a.reps} reps, n_boot={a.n_boot}, m = ceil(n^0.7); "
          f"band level ± 3se = [{a.level - 3 * se:.3f}, {a.level + 3 * se:.3f}]")
    print(f"{'design':>9} {'n':>4} | {'coef (β = 1, .5, 0, 0)':>27} | {'leverage':>27} | coef in band")
    for name in ("iid", "ar0.5", "t3-noise"):
        for n in (100, 300):
            cov_c, cov_h = np.zeros(BETA.size), np.zeros(BETA.size)
            for r in range(a.reps):
                X, y, sigma = design(name, n, np.random.default_rng(r))
                theta, h = targets(sigma)
                ci = coefficient_intervals(X, y, n_boot=a.n_boot, confidence_level=a.level, random_state=r)
                cov_c += (ci.coef_ci[:, 0] <= theta) & (theta <= ci.coef_ci[:, 1])
                cov_h += (ci.leverage_ci[:, 0] <= h) & (h <= ci.leverage_ci[:, 1])
            cc, ch = cov_c / a.reps, cov_h / a.reps
            band = bool(np.all(np.abs(cc - a.level) <= 3 * se))
            print(f"{name:>9} {n:>4} | {' '.join(f'{v:6.3f}' for v in cc)} | {' '.join(f'{v:6.3f}' for v in ch)} | {band}",
                  flush=True)


if __name__ == "__main__":
    main()
