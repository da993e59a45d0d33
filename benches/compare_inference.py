"""thrifty.inference against plskit (PyPI, GPL: benchmarked as a black box, never read or copied),
in one run. Prints timings (median of several runs), ratios, the NB vs CV-permutation-Q² cost ratio at
their defaults, and a power curve (power vs n at a fixed effect) for NB and CV-permutation-Q².

    .venv/bin/pip install plskit      # once
    .venv/bin/python benches/compare_inference.py [--threads 1] [--quick]

Both libraries get the same thread count (RAYON_NUM_THREADS for plskit, n_jobs for thrifty).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np


def median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer replicates in the power curve")
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)  # before plskit/thrifty start their pools

    from thrifty.inference import GateWarning, subspace_test

    warnings.simplefilter("ignore", GateWarning)
    try:
        import plskit
    except ImportError:
        plskit = None
        print("plskit is not installed (pip install plskit): thrifty-only figures below")

    rng = np.random.default_rng(0)
    n = p = 1000
    X = rng.normal(size=(n, p))
    y = 0.1 * X[:, 0] + rng.normal(size=n)
    J = args.threads
    print(f"== 1000x1000, {args.threads} thread(s), median of {args.reps} runs ==")
    print(f"{'task':<34}{'thrifty s':>11}{'plskit s':>11}{'plskit/thrifty':>16}")

    def row(name, ft, fp, reps):
        tt = median_time(ft, reps)
        tp = median_time(fp, reps) if fp is not None else float("nan")
        print(f"{name:<34}{tt:>11.3f}{tp:>11.3f}{tp / tt:>16.2f}", flush=True)
        return tt, tp

    for k in (1, 2, 3):
        row(
            f"NB-asymptotic k={k} (J=50)",
            lambda: subspace_test(X, y, k, method="nb", force=True, random_state=1, n_jobs=J),
            (lambda: plskit.pls1_confirmatory_test(X, y, k, test_method="split_nb", seed=1)) if plskit else None,
            args.reps,
        )
    for k in (1, 2):
        row(
            f"NB-permutation k={k} (J=50, B=1000)",
            lambda: subspace_test(X, y, k, method="nb-permutation", random_state=1, n_jobs=J, progress=False),
            (lambda: plskit.pls1_confirmatory_test(X, y, k, test_method="split_exact", seed=1)) if plskit else None,
            max(1, args.reps // 2),
        )
    # same p-value check (different RNGs, so p agree in distribution, not bitwise): print both
    if plskit:
        a = subspace_test(X, y, 1, method="nb", force=True, random_state=1)
        b = plskit.pls1_confirmatory_test(X, y, 1, test_method="split_nb", seed=1)
        print(f"(NB k=1 p-values: thrifty {a.p_value:.3f}, plskit {b.pvalue:.3f}; statistic {a.statistic:.4f} vs {b.statistic:.4f})")

    print("\n== cost at defaults: NB-asymptotic (J=50) vs CV-permutation-Q2 (B=1000, K=5), k=1, 1000x1000 ==")
    t_nb = median_time(lambda: subspace_test(X, y, 1, method="nb", force=True, random_state=1, n_jobs=J), args.reps)
    t_q2 = median_time(
        lambda: subspace_test(X, y, 1, method="cv-permutation-q2", random_state=1, n_jobs=J, progress=False), 1
    )
    print(f"thrifty NB {t_nb:.3f} s, thrifty CV-permutation-Q2 {t_q2:.2f} s  ->  ratio {t_q2 / t_nb:.0f}x")
    if plskit:
        tp_nb = median_time(lambda: plskit.pls1_confirmatory_test(X, y, 1, test_method="split_nb", seed=1), args.reps)
        tp_q2 = median_time(lambda: plskit.pls1_confirmatory_test(X, y, 1, test_method="raw_perm", seed=1), 1)
        print(f"plskit  NB {tp_nb:.3f} s, plskit raw_perm {tp_q2:.2f} s  ->  ratio {tp_q2 / tp_nb:.0f}x")

    print("\n== power vs n at a fixed effect (p=20, y = 0.45*x0 + noise, alpha=0.05) ==")
    reps = 100 if args.quick else 200
    ns = (40, 60, 80, 100, 130, 160, 200, 250)
    print(f"{'n':>5}{'NB power':>10}{'CV-Q2 power':>13}   ({reps} replicates; CV-Q2 with B=199, K=5)")
    power = {"nb": [], "q2": []}
    g = np.random.default_rng(2024)
    for nn in ns:
        hits = {"nb": 0, "q2": 0}
        for r in range(reps):
            Xs = g.normal(size=(nn, 20))
            ys = 0.45 * Xs[:, 0] + g.normal(size=nn)
            hits["nb"] += subspace_test(Xs, ys, random_state=r, n_jobs=J, n_perm=199).p_value < 0.05
            hits["q2"] += (
                subspace_test(Xs, ys, method="cv-permutation-q2", n_perm=199, random_state=r, n_jobs=J, progress=False).p_value
                < 0.05
            )
        for m in hits:
            power[m].append(hits[m] / reps)
        print(f"{nn:>5}{power['nb'][-1]:>10.2f}{power['q2'][-1]:>13.2f}", flush=True)

    def n_at(pw, target=0.8):
        """First n where the power curve crosses ``target`` (linear interpolation), None if never."""
        if pw[0] >= target:
            return float(ns[0])
        for i in range(1, len(ns)):
            if pw[i] >= target:
                return ns[i - 1] + (target - pw[i - 1]) * (ns[i] - ns[i - 1]) / (pw[i] - pw[i - 1])
        return None

    a, b = n_at(power["nb"]), n_at(power["q2"])
    fa = f"{a:.0f}" if a is not None else f"> {ns[-1]}"
    fb = f"{b:.0f}" if b is not None else f"> {ns[-1]}"
    print(f"n for 80% power (interpolated): NB {fa}, CV-permutation-Q2 {fb}", end="")
    if a is not None and b is not None:
        print(f"  ->  NB needs {100 * (1 - a / b):.0f}% fewer samples")
    else:
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
