"""False-positive rates of thrifty.inference under the null (y independent of X), >= 2000 replicates per
cell, on iid, decaying-spectrum, single-factor and low-stable-rank designs, for the test the gate
allows (``method="auto"``). Acceptance: FPR <= alpha + 3*sqrt(alpha(1-alpha)/N).

    .venv/bin/python benches/calibration_inference.py [--reps 2000] [--n 100] [--p 50]

Rows marked "forced NB" run the NB-asymptotic test where the gate would reroute (force=True), to show
why the gate exists; they are not part of the acceptance.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "inference"))
from inference_designs import DESIGNS, null_design  # noqa: E402

from thrifty.inference import GateWarning, subspace_test  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--p", type=int, default=50)
    ap.add_argument("--n-perm", type=int, default=199)
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    a, N = args.alpha, args.reps
    bound = a + 3 * np.sqrt(a * (1 - a) / N)
    warnings.simplefilter("ignore", GateWarning)
    print(f"null calibration: n={args.n}, p={args.p}, J=50 splits, B={args.n_perm} permutations when rerouted, "
          f"{N} replicates per row; bound alpha + 3 sd = {bound:.4f}")
    print(f"{'design':<18}{'k':>3}  {'test run':<22}{'FPR':>8}{'bound':>8}  {'ok':<4}{'seconds':>8}")
    all_ok = True
    for design in DESIGNS:
        for k in (1, 2):
            for forced in (False, True):
                if forced and design != "low-stable-rank":
                    continue
                rng = np.random.default_rng(1000 + 10 * k + DESIGNS.index(design))
                rej = 0
                methods: set[str] = set()
                t0 = time.perf_counter()
                for r in range(N):
                    X, y = null_design(design, args.n, args.p, rng)
                    res = subspace_test(X, y, k, n_perm=args.n_perm, random_state=r, force=forced, progress=False)
                    methods.add(res.method)
                    rej += res.p_value < a
                fpr = rej / N
                ok = fpr <= bound
                label = "forced NB" if forced else "+".join(sorted(methods))
                if not forced:
                    all_ok &= ok
                print(f"{design:<18}{k:>3}  {label:<22}{fpr:>8.4f}{bound:>8.4f}  {'yes' if ok else 'NO':<4}"
                      f"{time.perf_counter() - t0:>8.1f}", flush=True)
    print("all gate-allowed rows within the bound:", "yes" if all_ok else "NO")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
