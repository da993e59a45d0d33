"""The inference additions (issue 20, point 2) against plskit 0.7.2's counterparts (PyPI, GPL:
benchmarked as a black box, never read or copied), in one run: agreement of the fits, agreement and
power of the tests on the same data, and speed (median of several runs, one thread each).

    .venv/bin/pip install plskit      # once
    .venv/bin/python benches/compare_inference_extra.py [--reps 200] [--quick]

Rows:
- sparse PLS1 weights (thrifty ``learner="spls"``'s ``result.basis`` vs ``plskit.spls1_fit(...).W``);
  the cross-validated keep-count against ``spls1_find_keep_optimal`` on planted sparse designs; power of
  the sparse test against PLS1's (both libraries' PLS1 ``split_exact``) on a sparse signal.
- PLS-SVD: weights and singular values against ``pls3_fit``; null size, power and p-value agreement of
  ``pls_svd_test`` against ``pls3_confirmatory_test(test_method="split_exact")`` on the same data; time.
- ``select_n_components`` against ``pls1_find_k_optimal`` (1-SE rule both): share picking the planted K; time.
- ``rotation_stability`` against ``pls1_rotation_stability``: time at n_boot = 1000 (different summaries),
  (a) at the defaults (thrifty bootstraps n rows, plskit subsamples m = ceil(n^0.7)) and (b) at equal
  work (thrifty ``resample="subsample"`` at the same m).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "inference"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_inference import median_time as _median_time
from inference_extra_designs import null_blocks, planted_k, planted_sparse


def median_time(fn, reps=5):
    return _median_time(fn, reps)


def aligned_diff(a, b):
    """Largest |a - b| after flipping each column of b to a's sign."""
    s = np.sign(np.sum(a * b, axis=0))
    return float(np.max(np.abs(a - b * np.where(s == 0, 1, s))))


def shared_factor(n, effect, rng):
    z = rng.normal(size=n)
    X, Y = rng.normal(size=(n, 50)), rng.normal(size=(n, 5))
    X[:, 0] += effect * z
    Y[:, 0] += effect * z
    return X, Y


def spls_rows(plskit, reps):
    from thrifty.inference import subspace_test

    print("\n== sparse PLS1 ==")
    worst = 0.0
    for k, keep in ((1, 3), (2, 5), (3, 10)):
        X, y = planted_sparse(120, 40, (1, 7, 20), np.random.default_rng(k))
        ours = subspace_test(X, y, k, learner="spls", spls_keep=keep, method="nb-permutation", n_perm=9, n_splits=4,
                             random_state=0).basis
        worst = max(worst, aligned_diff(ours, plskit.spls1_fit(X, y, k, keep).W))
    print(f"weights, max |thrifty - plskit| over (k, keep) in (1,3), (2,5), (3,10): {worst:.2e}")
    same = 0
    for seed in range(20):
        X, y = planted_sparse(150, 50, (4, 17, 33), np.random.default_rng(seed))
        ours = subspace_test(X, y, learner="spls", spls_keep="cv", method="nb-permutation", n_perm=9, n_splits=4,
                             random_state=seed).basis
        found_t = set(np.flatnonzero(ours[:, 0]))
        found_p = set(np.flatnonzero(plskit.spls1_fit(X, y, 1, plskit.spls1_find_keep_optimal(X, y, 1, seed=seed).keep_star).W[:, 0]))
        same += {4, 17, 33} <= found_t and {4, 17, 33} <= found_p
    print(f"keep='cv' (thrifty) and spls1_find_keep_optimal (plskit) both keep the 3 planted variables: {same}/20")
    hits = {"thrifty spls cv": 0, "thrifty spls keep=3": 0, "thrifty pls": 0, "plskit pls split_exact": 0}
    for r in range(reps):
        rng = np.random.default_rng(10_000 + r)
        X = rng.normal(size=(60, 200))
        y = 0.35 * X[:, :3].sum(axis=1) + rng.normal(size=60)
        hits["thrifty spls cv"] += subspace_test(X, y, learner="spls", n_perm=99, n_splits=10, random_state=r, n_jobs=1).pvalue <= 0.05
        hits["thrifty spls keep=3"] += subspace_test(X, y, learner="spls", spls_keep=3, n_perm=99, random_state=r, n_jobs=1).pvalue <= 0.05
        hits["thrifty pls"] += subspace_test(X, y, method="nb-permutation", n_perm=99, random_state=r, n_jobs=1).pvalue <= 0.05
        hits["plskit pls split_exact"] += plskit.pls1_confirmatory_test(
            X, y, test_method="split_exact", args={"n_perm": 99}, seed=r).pvalue <= 0.05
    print(f"power on a sparse signal (n=60, p=200, 3 planted, {reps} reps): "
          + ", ".join(f"{k} {v / reps:.3f}" for k, v in hits.items()))
    X, y = planted_sparse(200, 100, (1, 2, 3), np.random.default_rng(0))
    t = median_time(lambda: subspace_test(X, y, learner="spls", spls_keep=5, random_state=0, n_jobs=1))
    t_pls = median_time(lambda: plskit.pls1_confirmatory_test(X, y, test_method="split_exact", seed=0))
    print(f"time, n=200 p=100 B=1000 J=50: thrifty spls keep=5 {t:.3f} s; plskit PLS1 split_exact {t_pls:.3f} s "
          f"(plskit has no sparse test; ratio {t_pls / t:.2f}x)")


def plssvd_rows(plskit, reps):
    from thrifty.inference import pls_svd_test

    print("\n== PLS-SVD (PLS3) ==")
    X, Y = shared_factor(200, 0.5, np.random.default_rng(0))
    ours = pls_svd_test(X, Y, 3, n_perm=9, random_state=0)
    theirs = plskit.pls3_fit(X, Y, 3)
    print(f"weights, max |thrifty - plskit|: U {aligned_diff(ours.x_weights, theirs.U):.2e}, "
          f"V {aligned_diff(ours.y_weights, theirs.V):.2e}; singular values thrifty {np.round(ours.singular_values, 4)} "
          f"plskit {np.round(np.asarray(theirs.singular_values), 4)}")
    for label, effect in (("null", 0.0), ("effect 0.6", 0.6)):
        rt = rp = 0
        pt, pp = [], []
        for r in range(reps):
            X, Y = shared_factor(100, effect, np.random.default_rng(20_000 + r)) if effect else null_blocks(
                "iid", 100, 50, 5, np.random.default_rng(20_000 + r))
            a = pls_svd_test(X, Y, n_perm=199, random_state=r, n_jobs=1).pvalue
            b = plskit.pls3_confirmatory_test(X, Y, test_method="split_exact", args={"n_perm": 199}, seed=r).pvalue
            rt += a <= 0.05
            rp += b <= 0.05
            pt.append(a), pp.append(b)
        corr = np.corrcoef(pt, pp)[0, 1]
        print(f"{label:<11} n=100 p=50 q=5, {reps} reps, B=199: rejection at 5% thrifty {rt / reps:.3f}, "
              f"plskit {rp / reps:.3f}; p-value correlation {corr:.3f}")
    X, Y = shared_factor(200, 0.3, np.random.default_rng(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = median_time(lambda: pls_svd_test(X, Y, random_state=0, n_jobs=1))
    t_p = median_time(lambda: plskit.pls3_confirmatory_test(X, Y, test_method="split_exact", seed=0), 3)
    print(f"time, n=200 p=50 q=5 B=1000 J=50: thrifty {t:.3f} s, plskit {t_p:.3f} s, ratio {t_p / t:.1f}x")


def select_rows(plskit, reps):
    from thrifty.inference import select_n_components

    print("\n== choosing K (one-SE rule) ==")
    for k in (1, 2, 3):
        ok_t = ok_p = 0
        for r in range(reps):
            X, y = planted_k(k, 300, 20, np.random.default_rng(30_000 + r))
            ok_t += select_n_components(X, y, k_max=6, random_state=r, n_jobs=1).n_components == k
            ok_p += plskit.pls1_find_k_optimal(X, y, 6, seed=r).k_star == k
        print(f"planted K={k} (n=300, p=20, {reps} reps): thrifty picks it {ok_t / reps:.3f}, plskit {ok_p / reps:.3f}")
    X, y = planted_k(2, 1000, 200, np.random.default_rng(0))
    t = median_time(lambda: select_n_components(X, y, k_max=10, random_state=0, n_jobs=1))
    t_p = median_time(lambda: plskit.pls1_find_k_optimal(X, y, 10, seed=0))
    print(f"time, n=1000 p=200 k_max=10: thrifty {t:.3f} s, plskit {t_p:.3f} s, ratio {t_p / t:.2f}x")


def stability_rows(plskit, reps=7):
    """(a) defaults: thrifty's bootstrap of n rows vs plskit's m-out-of-n subsamples; (b) equal work:
    thrifty ``resample="subsample"`` at plskit's m = ceil(n ** 0.7). The runs alternate (thrifty a,
    thrifty b, plskit) so load hits all three alike; ratios are plskit / thrifty of the medians."""
    import time

    from thrifty.inference import rotation_stability

    print("\n== rotation stability ==")
    rng = np.random.default_rng(0)
    n, p, k, B = 300, 50, 3, 1000
    X = rng.normal(size=(n, p))
    y = X[:, 0] + X[:, 1] + rng.normal(size=n)
    m_p = plskit.pls1_rotation_stability(X, y, k, n_boot=100, seed=0).m
    runs = {
        "boot": lambda: rotation_stability(X, y, k, n_boot=B, random_state=0, n_jobs=1),
        "sub": lambda: rotation_stability(X, y, k, n_boot=B, resample="subsample", random_state=0, n_jobs=1),
        "plskit": lambda: plskit.pls1_rotation_stability(X, y, k, n_boot=B, seed=0),
    }
    m_t = runs["sub"]().m
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {name: float(np.median(ts)) for name, ts in times.items()}
    print(f"n={n} p={p} k={k} n_boot={B}, one thread, medians of {reps} alternating runs "
          f"(load {os.getloadavg()[0]:.2f}); plskit m = {m_p}, thrifty subsample m = {m_t}")
    print(f"(a) defaults:   thrifty bootstrap (n={n} rows) {med['boot']:.4f} s, plskit (m={m_p}) "
          f"{med['plskit']:.4f} s, ratio plskit/thrifty {med['plskit'] / med['boot']:.2f}x")
    print(f"(b) equal work: thrifty subsample (m={m_t}) {med['sub']:.4f} s, plskit (m={m_p}) "
          f"{med['plskit']:.4f} s, ratio plskit/thrifty {med['plskit'] / med['sub']:.2f}x")
    print(f"per resample: thrifty bootstrap {1e6 * med['boot'] / B:.1f} us, subsample {1e6 * med['sub'] / B:.1f} us, "
          f"plskit {1e6 * med['plskit'] / B:.1f} us (thrifty: per-axis Tucker congruence of the resample varimax "
          "axes; plskit: subsampling variance ratios)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("spls", "plssvd", "select", "stability"), default=None,
                    help="run only this section")
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    import plskit

    from thrifty.inference import GateWarning

    warnings.simplefilter("ignore", GateWarning)
    reps = 40 if args.quick else args.reps
    sections = {"spls": lambda: spls_rows(plskit, reps), "plssvd": lambda: plssvd_rows(plskit, reps),
                "select": lambda: select_rows(plskit, reps // 2), "stability": lambda: stability_rows(plskit)}
    for name, run in sections.items():
        if args.only is None or args.only == name:
            run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
