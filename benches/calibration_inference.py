"""Two-sided null calibration of thrifty.inference's default test (``method="auto"``) for every
learner and design, and the power of the NB-asymptotic test against the NB-permutation test on the
same splits wherever ``auto`` runs the asymptotic test (issue 10, item A1).

    .venv/bin/python benches/calibration_inference.py [--reps 2000] [--learners pls,ridge,spca,transformer]

Rows: learner (PLS1, ridge probe, supervised PCA, a scikit-learn transformer: ``PLSRegression(1)``
cloned per split) x design (iid, decaying spectrum, single factor; low stable rank for PLS) x
n in {40, 100, 300}, p = 50, y independent of X. Each row reports the test ``auto`` ran, the size
(share of p <= alpha) over ``--reps`` replicates, and whether it lies in alpha +/- 3 se,
se = sqrt(alpha (1 - alpha) / reps). Permutation rows use B = 99 (pls, ridge) or B = 19 (spca,
transformer) permutations, for which P(p <= 0.05) = 0.05 exactly, and J = 50 splits (J = 2 for the
transformer, whose every split refits in Python; scikit-learn runs with ``assume_finite`` and
``skip_parameter_validation``, which only skip its input checks). Rows that ``auto`` sends to the asymptotic test
also report its power and the NB-permutation test's (B = 199, the same splits) at y = b x1 + noise.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "inference"))
from inference_designs import null_design

from thrifty.inference import GateWarning, subspace_test

DESIGNS = ("iid", "decaying", "single-factor")
P = 50
ALPHA = 0.05


def learner_args(name: str) -> tuple[dict, int, int]:
    """(subspace_test keywords, permutations, splits) of a learner row."""
    if name == "transformer":
        from sklearn.cross_decomposition import PLSRegression

        return {"learner": PLSRegression(n_components=1)}, 19, 2
    return {"learner": name}, (19 if name == "spca" else 99), 50


def size_row(name: str, design: str, n: int, reps: int) -> tuple[str, float, float]:
    kw, B, J = learner_args(name)
    rng = np.random.default_rng([n, P, len(design), len(name)])
    rej = 0
    methods: set[str] = set()
    t0 = time.perf_counter()
    for r in range(reps):
        X, y = null_design(design, n, P, rng)
        res = subspace_test(X, y, n_perm=B, n_splits=J, random_state=r, n_jobs=1, progress=False, **kw)
        methods.add(res.method)
        rej += res.pvalue <= ALPHA
    return "+".join(sorted(methods)), rej / reps, time.perf_counter() - t0


def power_row(name: str, design: str, n: int, reps: int) -> tuple[float, float]:
    kw, _, J = learner_args(name)
    b = 3.5 / np.sqrt(n)  # 0.35 at n = 100, the effect of the issue
    rng = np.random.default_rng([n, P, len(design), 99])
    hit_nb = hit_perm = 0
    for r in range(reps):
        X, y = null_design(design, n, P, rng)
        y = y + b * (X[:, 0] - X[:, 0].mean()) / X[:, 0].std()
        nb = subspace_test(X, y, n_splits=J, random_state=r, n_jobs=1, **kw)
        perm = subspace_test(X, y, method="nb-permutation", n_perm=199, splits=nb.train_indices, random_state=r, n_jobs=1, **kw)
        hit_nb += nb.pvalue <= ALPHA
        hit_perm += perm.pvalue <= ALPHA
    return hit_nb / reps, hit_perm / reps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--power-reps", type=int, default=1000)
    ap.add_argument("--learners", default="pls,ridge,spca,transformer")
    ap.add_argument("--n", default="40,100,300")
    ap.add_argument("--designs", default=",".join(DESIGNS) + ",low-stable-rank",
                    help="low-stable-rank runs for pls only")
    args = ap.parse_args()
    warnings.simplefilter("ignore", GateWarning)
    import sklearn

    sklearn.set_config(assume_finite=True, skip_parameter_validation=True)
    se = np.sqrt(ALPHA * (1 - ALPHA) / args.reps)
    lo, hi = ALPHA - 3 * se, ALPHA + 3 * se
    print(f"null size at alpha={ALPHA} (p <= alpha), p={P}, {args.reps} replicates per row; band alpha +/- 3 se = "
          f"[{lo:.4f}, {hi:.4f}]; power at y = (3.5/sqrt(n)) x1 + noise, {args.power_reps} replicates")
    print(f"{'learner':<12}{'design':<16}{'n':>4}  {'auto ran':<15}{'size':>7}  {'in band':<8}"
          f"{'power NB':>9}{'power perm':>11}{'diff':>7}{'s':>7}")
    ok = True
    for name in args.learners.split(","):
        designs = [d for d in args.designs.split(",") if d != "low-stable-rank" or name == "pls"]
        for design in designs:
            for n in (int(v) for v in args.n.split(",")):
                method, size, secs = size_row(name, design, n, args.reps)
                inside = lo <= size <= hi
                ok &= inside
                pw = ""
                if "nb" in method.split("+"):
                    p_nb, p_perm = power_row(name, design, n, args.power_reps)
                    ok &= p_nb >= p_perm - 0.03
                    pw = f"{p_nb:>9.3f}{p_perm:>11.3f}{p_nb - p_perm:>+7.3f}"
                else:
                    pw = f"{'-':>9}{'-':>11}{'':>7}"
                print(f"{name:<12}{design:<16}{n:>4}  {method:<15}{size:>7.4f}  {'yes' if inside else 'NO':<8}{pw}"
                      f"{secs:>7.0f}", flush=True)
    print("every row inside the band, NB power within 3 points of the permutation test:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
