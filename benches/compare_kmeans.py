"""Side-by-side timing of thrifty's k-means against scikit-learn's Lloyd and hartigan-kmeans.

One thread everywhere (``n_jobs=1`` for thrifty, ``threadpool_limits(1)`` for scikit-learn's OpenMP
and BLAS), the same greedy k-means++ initial centres for all three, ``tol=0`` (run to a fixed
point, capped at ``--max-iter``; cells with n = 1e6 use ``--max-iter-large``), median of
``--repeats`` interleaved runs. Data: ``make_blobs(n, d, centers=k, cluster_std=2)``, float64.

Prints, per cell: fit times, our Lloyd's speed-up over scikit-learn's Lloyd (target >= 1.5x),
batched Hartigan's time relative to scikit-learn's Lloyd (target <= 1.2x, goal <= 1.0x), the
inertia ratio, and the fraction of points the bounds certified unmovable in each Hartigan
iteration. Then the empty-cluster case of issue 10 (64 Gaussians in 64 dimensions, n = 1e5, float32,
random-rows start: our Lloyd's inertia equals scikit-learn's, our Hartigan's is below it on average), and
batched Hartigan against the sequential ``hartigan-kmeans`` package at n=1e5, d=16, k=64 (target
>= 20x; install it with ``bash benches/install_peers.sh``).

    .venv/bin/python benches/compare_kmeans.py            # the full grid (about 20-40 min)
    .venv/bin/python benches/compare_kmeans.py --quick    # n in {1e4, 1e5} only
    .venv/bin/python benches/compare_kmeans.py --only-empty --seeds 10   # the Hartigan-vs-Lloyd table

The empty-cluster table (issue 10, A6) runs Hartigan and scikit-learn's Lloyd from the same
random-rows start over classes of Gaussian mixtures (k, d, separation, n, dtype varied; many seeds)
and prints the mean, min and max of inertia(Hartigan) / inertia(sklearn Lloyd) per class (target:
mean < 1 in every class; by construction every ratio is <= 1 up to rounding). A CSR row compares
fit times and inertia on sparse data against scikit-learn's KMeans on the same CSR matrix.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

from thrifty.cluster import HartiganKMeans


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fmt_cert(frac: np.ndarray) -> str:
    if len(frac) <= 6:
        return " ".join(f"{v:.2f}" for v in frac)
    return " ".join(f"{v:.2f}" for v in frac[:4]) + " … " + " ".join(f"{v:.2f}" for v in frac[-2:])


def run_cell(n: int, d: int, k: int, repeats: int, max_iter: int) -> dict[str, Any]:
    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=2.0, random_state=0)
    X = np.ascontiguousarray(X)
    init = HartiganKMeans(k, random_state=0, max_iter=1, n_jobs=1).fit(X).init_centers_
    sk_t, ll_t, ha_t = [], [], []
    sk = ll = ha = None
    for _ in range(repeats):
        with threadpool_limits(1):
            t, sk = timed(lambda: KMeans(k, init=init, n_init=1, tol=0, max_iter=max_iter).fit(X))
        sk_t.append(t)
        t, ll = timed(lambda: HartiganKMeans(k, init=init, tol=0, max_iter=max_iter, algorithm="lloyd", n_jobs=1).fit(X))
        ll_t.append(t)
        t, ha = timed(lambda: HartiganKMeans(k, init=init, tol=0, max_iter=max_iter, n_jobs=1).fit(X))
        ha_t.append(t)
    assert sk is not None and ll is not None and ha is not None
    cert = ha.iteration_stats_["certified"] / n
    return dict(
        n=n, d=d, k=k, sk=statistics.median(sk_t), ll=statistics.median(ll_t), ha=statistics.median(ha_t),
        sk_it=sk.n_iter_, ll_it=ll.n_iter_, ha_it=ha.n_iter_, inertia=ha.inertia_ / sk.inertia_,
        ll_inertia=ll.inertia_ / sk.inertia_, cert=cert,
    )


def versus_sequential(repeats: int) -> None:
    try:
        from hkmeans import HKMeans
    except ImportError:
        print("\nhartigan-kmeans is not installed: run `bash benches/install_peers.sh` for the sequential-Hartigan row")
        return
    n, d, k = 100_000, 16, 64
    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=2.0, random_state=0)
    ours_pp, ours_rp, theirs = [], [], []

    def best_of(runs: int, fn: Callable[[], Any]) -> tuple[float, Any]:
        results = [timed(fn) for _ in range(runs)]
        return min(results, key=lambda tr: tr[0])

    for r in range(repeats):  # one seed per repeat; each timing is the best of 3 runs
        # Default starts: ours greedy k-means++ (its time included), theirs a random partition.
        t, pp = best_of(3, lambda: HartiganKMeans(k, random_state=r, tol=0, n_init=1, n_jobs=1).fit(X))
        ours_pp.append((t, pp.n_iter_, pp.inertia_))
        # The same kind of start as theirs: the means of a random partition.
        part = np.random.default_rng(r).permutation(np.arange(n) % k)
        init = np.stack([X[part == j].mean(axis=0) for j in range(k)])
        t, rp = best_of(3, lambda: HartiganKMeans(k, init=init, tol=0, n_jobs=1).fit(X))
        ours_rp.append((t, rp.n_iter_, rp.inertia_))
        with threadpool_limits(1):
            t, hk = best_of(3, lambda: HKMeans(n_clusters=k, random_state=r, n_init=1, n_jobs=1, max_iter=300, tol=0.0).fit(X))
        theirs.append((t, hk.n_iter_, hk.inertia_))

    def summary(rows: list[tuple[float, int, float]]) -> tuple[float, float, float]:
        return (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows),
                statistics.median(r[2] for r in rows))

    (tp, ip, sp), (tr, ir, sr), (th, ih, sh) = summary(ours_pp), summary(ours_rp), summary(theirs)
    print(f"\nBatched Hartigan vs hartigan-kmeans 0.0.6 (sequential Hartigan), n={n}, d={d}, k={k}, 1 thread, "
          f"to convergence, median over {repeats} seeds of the best of 3 runs:")
    print(f"  hartigan-kmeans (random partition start): {th:.3f} s, {ih:.0f} passes, inertia {sh:.4g}")
    print(f"  thrifty, random-partition start         : {tr:.3f} s, {ir:.0f} iterations, inertia {sr:.4g}"
          f"  -> {th / tr:.1f}x faster (target >= 20x)")
    print(f"  thrifty, k-means++ start (init timed)   : {tp:.3f} s, {ip:.0f} iterations, inertia {sp:.4g}"
          f"  -> {th / tp:.1f}x faster")


def empty_clusters(repeats: int) -> None:
    """Issue 10 (A6): 64 well-separated Gaussians in 64 dimensions, n = 1e5, float32, a random-rows
    start (clusters empty along the way). scikit-learn relocates emptied clusters to the points
    farthest from their centres; our Lloyd must end at the same inertia (it follows KMeans step for
    step) and our Hartigan below it on average."""
    n, d, k = 100_000, 64, 64
    rows = []
    for seed in range(max(repeats, 3)):
        X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=1.5, random_state=seed)
        X = X.astype(np.float32)
        init = X[np.random.default_rng(seed).choice(n, k, replace=False)]
        with threadpool_limits(1):
            t_sk, sk = timed(lambda: KMeans(k, init=init, n_init=1, tol=0, max_iter=300).fit(X))  # noqa: B023
        t_ll, ll = timed(lambda: HartiganKMeans(k, init=init, tol=0, algorithm="lloyd", n_jobs=1).fit(X))  # noqa: B023
        t_ha, ha = timed(lambda: HartiganKMeans(k, init=init, tol=0, n_jobs=1).fit(X))  # noqa: B023
        rows.append((sk.inertia_, ll.inertia_ / sk.inertia_, ha.inertia_ / sk.inertia_, t_sk, t_ll, t_ha,
                     int(ll.iteration_stats_["relocated"].sum())))
        print(f"  seed {seed}: sklearn {sk.inertia_:.5g} ({t_sk:.2f} s) | our Lloyd / sklearn {rows[-1][1]:.6f} "
              f"({t_ll:.2f} s, {rows[-1][6]} relocations) | Hartigan / sklearn {rows[-1][2]:.6f} ({t_ha:.2f} s)",
              flush=True)
    ll_r, ha_r = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    print(f"Empty clusters (n={n}, d={d}, k={k}, float32, random rows, 1 thread): our Lloyd / sklearn Lloyd "
          f"max |ratio - 1| {np.abs(ll_r - 1).max():.2e} (target: to rounding); Hartigan / sklearn Lloyd mean "
          f"{ha_r.mean():.5f}, max {ha_r.max():.5f} (target: mean < 1)")


# (n, d, k, cluster_std, dtype): classes of mixtures where clusters empty from a random-rows start.
EMPTY_CLASSES = [
    (3_000, 16, 16, 1.0, np.float32),
    (3_000, 16, 16, 1.5, np.float64),
    (10_000, 8, 32, 1.0, np.float64),
    (10_000, 32, 40, 2.0, np.float32),
    (10_000, 32, 32, 1.5, np.float32),
    (5_000, 2, 20, 0.5, np.float64),
    (20_000, 64, 128, 3.0, np.float32),
    (100_000, 64, 64, 1.5, np.float32),  # the case
]


def empty_cluster_table(seeds: int) -> None:
    """Mean inertia ratio Hartigan / scikit-learn Lloyd from the same random-rows start, per class."""
    print(f"\nHartigan vs scikit-learn Lloyd, same random-rows start, tol=0, 1 thread, {seeds} seeds per class")
    print(f"{'n':>7} {'d':>3} {'k':>4} {'std':>4} {'dtype':>7} | {'mean ratio':>10} {'min':>8} {'max':>8} | "
          f"{'our Lloyd/sk max|r-1|':>21} | {'H time/sk':>9}")
    means = []
    for n, d, k, std, dtype in EMPTY_CLASSES:
        ratios, lloyd_dev, times = [], [], []
        for seed in range(seeds if n < 100_000 else max(3, seeds // 3)):
            X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=std, random_state=seed)
            X = X.astype(dtype)
            init = X[np.random.default_rng(seed).choice(n, k, replace=False)]
            with threadpool_limits(1):
                t_sk, sk = timed(lambda: KMeans(k, init=init, n_init=1, tol=0).fit(X))  # noqa: B023
            t_ha, ha = timed(lambda: HartiganKMeans(k, init=init, tol=0, n_jobs=1).fit(X))  # noqa: B023
            ll = HartiganKMeans(k, init=init, tol=0, n_jobs=1, algorithm="lloyd").fit(X)
            ratios.append(ha.inertia_ / sk.inertia_)
            lloyd_dev.append(abs(ll.inertia_ / sk.inertia_ - 1))
            times.append(t_ha / t_sk)
        r = np.array(ratios)
        means.append(r.mean())
        print(f"{n:>7} {d:>3} {k:>4} {std:>4} {dtype.__name__:>7} | {r.mean():>10.6f} {r.min():>8.5f} {r.max():>8.5f} | "
              f"{max(lloyd_dev):>21.2e} | {statistics.median(times):>9.2f}", flush=True)
    print(f"Hartigan / sklearn Lloyd: largest class mean {max(means):.6f} (target < 1 in every class: "
          f"{'met' if max(means) < 1 else 'NOT met'})")


def sparse_row(repeats: int) -> None:
    """CSR input: our fit (sparse kernels, no dense copy) vs scikit-learn's KMeans on the same CSR."""
    import scipy.sparse as sp

    n, d, k = 50_000, 2_000, 32
    rng = np.random.default_rng(0)
    X = sp.random(n, d, density=0.01, format="csr", random_state=0, dtype=np.float64)
    X = sp.csr_matrix(X + sp.csr_matrix((np.ones(n) * 3, (np.arange(n), rng.integers(0, k, n) * 7)), shape=(n, d)))
    init = X[rng.choice(n, k, replace=False)].toarray()
    sk_t, ll_t, ha_t = [], [], []
    for _ in range(repeats):
        with threadpool_limits(1):
            t, sk = timed(lambda: KMeans(k, init=init, n_init=1, tol=0, max_iter=100).fit(X))
        sk_t.append(t)
        t, ll = timed(lambda: HartiganKMeans(k, init=init, tol=0, max_iter=100, algorithm="lloyd", n_jobs=1).fit(X))
        ll_t.append(t)
        t, ha = timed(lambda: HartiganKMeans(k, init=init, tol=0, max_iter=100, n_jobs=1).fit(X))
        ha_t.append(t)
    print(f"\nCSR n={n} d={d} density 1% k={k}, 1 thread, median of {repeats}: sklearn {statistics.median(sk_t):.3f} s "
          f"({sk.n_iter_} it) | our Lloyd {statistics.median(ll_t):.3f} s ({ll.n_iter_} it, inertia / sklearn "
          f"{ll.inertia_ / sk.inertia_:.8f}, speed-up {statistics.median(sk_t) / statistics.median(ll_t):.2f}x) | "
          f"Hartigan {statistics.median(ha_t):.3f} s (inertia / sklearn {ha.inertia_ / sk.inertia_:.6f})")


def versus_faiss(repeats: int) -> None:
    """Our Lloyd vs faiss-cpu's Lloyd (`faiss.Kmeans`), 1 thread each, float32, the same initial
    centres, 20 iterations each (faiss: no subsampling, `max_points_per_centroid` raised to n)."""
    try:
        import faiss
    except ImportError:
        print("\nfaiss-cpu is not installed (pip install faiss-cpu): no faiss row")
        return
    faiss.omp_set_num_threads(1)
    iters = 20
    print(f"\nLloyd vs faiss-cpu {faiss.__version__}, 1 thread, float32, same init, {iters} iterations, median of {repeats}")
    ratios = []
    for n, d, k in ((100_000, 16, 64), (100_000, 64, 64), (100_000, 64, 256)):
        X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=2.0, random_state=0)
        X = np.ascontiguousarray(X, dtype=np.float32)
        init = X[np.random.default_rng(0).choice(n, k, replace=False)].copy()
        f_t, o_t = [], []
        for _ in range(repeats):
            km = faiss.Kmeans(d, k, niter=iters, max_points_per_centroid=n, min_points_per_centroid=1, seed=0)
            t, _ = timed(lambda: km.train(X, init_centroids=init))  # noqa: B023
            f_t.append(t)
            t, ours = timed(lambda: HartiganKMeans(k, init=init, tol=0, max_iter=iters, algorithm="lloyd", n_jobs=1).fit(X))  # noqa: B023
            o_t.append(t)
        f_dist, _ = km.index.search(X, 1)  # squared distances to the nearest centroid
        ft, ot = statistics.median(f_t), statistics.median(o_t)
        print(f"  n={n} d={d} k={k}: faiss {ft:.3f} s | our Lloyd {ot:.3f} s -> {ft / ot:.2f}x "
              f"(inertia ours / faiss {ours.inertia_ / float(f_dist.sum(dtype=np.float64)):.5f})", flush=True)
        ratios.append(ft / ot)
    print(f"  smallest speed-up over faiss: {min(ratios):.2f}x (target >= 2x in every cell: "
          f"{'met' if min(ratios) >= 2.0 else 'NOT met'})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="only n = 1e4 and 1e5")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--max-iter-large", type=int, default=50, help="iteration cap for n = 1e6 cells")
    ap.add_argument("--n", type=int, nargs="*", default=None)
    ap.add_argument("--d", type=int, nargs="*", default=[2, 16, 64])
    ap.add_argument("--k", type=int, nargs="*", default=[8, 64, 256])
    ap.add_argument("--skip-sequential", action="store_true")
    ap.add_argument("--skip-empty", action="store_true", help="skip the empty-cluster case (issue 10)")
    ap.add_argument("--only-empty", action="store_true", help="only the empty-cluster table and the CSR row")
    ap.add_argument("--seeds", type=int, default=8, help="seeds per class of the empty-cluster table")
    args = ap.parse_args()
    if args.only_empty:
        empty_cluster_table(args.seeds)
        sparse_row(args.repeats)
        versus_faiss(args.repeats)
        return
    ns = args.n or ([10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000])

    print("k-means fit time, 1 thread, same k-means++ init, tol=0; median of", args.repeats, "runs")
    head = (f"{'n':>8} {'d':>3} {'k':>4} | {'sklearn':>9} {'it':>4} | {'our Lloyd':>9} {'it':>4} {'speed-up':>8} | "
            f"{'Hartigan':>9} {'it':>4} {'H/sk':>6} | {'inertia H/sk':>12} | certified fraction per Hartigan iteration")
    print(head)
    print("-" * len(head))
    rows = []
    for n in ns:
        for d in args.d:
            for k in args.k:
                if n * d * 8 * 3 > 20 * 2**30:
                    continue
                reps = args.repeats if n < 1_000_000 else 1
                mi = args.max_iter if n < 1_000_000 else args.max_iter_large
                r = run_cell(n, d, k, reps, mi)
                rows.append(r)
                print(f"{n:>8} {d:>3} {k:>4} | {r['sk']:>8.3f}s {r['sk_it']:>4} | {r['ll']:>8.3f}s {r['ll_it']:>4} "
                      f"{r['sk'] / r['ll']:>7.2f}x | {r['ha']:>8.3f}s {r['ha_it']:>4} {r['ha'] / r['sk']:>6.2f} | "
                      f"{r['inertia']:>12.5f} | {fmt_cert(r['cert'])}", flush=True)
    if rows:
        sp = np.array([r["sk"] / r["ll"] for r in rows])
        hr = np.array([r["ha"] / r["sk"] for r in rows])
        print(f"\nour Lloyd speed-up over sklearn: min {sp.min():.2f}x, median {np.median(sp):.2f}x "
              f"(target >= 1.5x in every cell: {'met' if sp.min() >= 1.5 else 'NOT met'})")
        print(f"Hartigan time / sklearn Lloyd time: max {hr.max():.2f}, median {np.median(hr):.2f} "
              f"(target <= 1.2 in every cell: {'met' if hr.max() <= 1.2 else 'NOT met'}; goal <= 1.0)")
    if not args.skip_empty:
        print("\nEmpty clusters: same random-rows start for all three")
        empty_clusters(args.repeats)
        empty_cluster_table(args.seeds)
        sparse_row(args.repeats)
    if not args.skip_sequential:
        versus_sequential(args.repeats)
    versus_faiss(args.repeats)


if __name__ == "__main__":
    main()
