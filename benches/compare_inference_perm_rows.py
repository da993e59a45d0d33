"""Interleaved NB-permutation rows of compare_inference.py (same data and calls), thrifty vs plskit's
split_exact, one thread, alternating the two libraries run by run.

    .venv/bin/python benches/compare_inference_perm_rows.py [k ...]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings

os.environ["RAYON_NUM_THREADS"] = "1"  # before plskit/thrifty start their pools

import numpy as np
import plskit

from thrifty.inference import GateWarning, subspace_test


def main() -> None:
    warnings.simplefilter("ignore", GateWarning)
    rng = np.random.default_rng(0)
    n = p = 1000
    X = rng.normal(size=(n, p))
    y = 0.1 * X[:, 0] + rng.normal(size=n)
    ks = [int(a) for a in sys.argv[1:]] or [1, 2]
    for k in ks:
        tt, tp = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            subspace_test(X, y, k, method="nb-permutation", random_state=1, n_jobs=1, progress=False)
            tt.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            plskit.pls1_confirmatory_test(X, y, k, test_method="split_exact", seed=1)
            tp.append(time.perf_counter() - t0)
        a, b = statistics.median(tt), statistics.median(tp)
        runs = f"{[round(x, 3) for x in tt]} / {[round(x, 3) for x in tp]}"
        print(f"NB-permutation k={k}: thrifty {a:.3f} s plskit {b:.3f} s ratio {b / a:.2f}  (runs {runs})", flush=True)


if __name__ == "__main__":
    main()
