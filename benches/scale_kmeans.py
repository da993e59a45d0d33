"""Scale-out k-means (issue 11, acceptance 3): thrifty's blocked Lloyd on a Dask LocalCluster against
dask-ml's KMeans, from the same start, per iteration.

Data: a mixture of 64 Gaussians in 16-D, float32, generated block by block from (seed, block) (never
materialised whole; each block is produced on a worker). k = 64.

- comparison: a ``--rows`` slice (default 1e7) persisted on the workers (both libraries read the same
  in-memory blocks, so the figure is the algorithms' cost), thrifty vs dask-ml, ``--iters`` iterations
  each from the same initial centres; wall time per iteration (median over iterations 2.., and the
  first one), ratio dask-ml / thrifty.
- scale: ``--big-rows`` (default 1e8) regenerated block by block in every pass (nothing persisted),
  ``--big-iters`` iterations of thrifty only; time per iteration and the generation-only pass time.
- bytes moved per iteration (driver ↔ workers and between workers), counted from what the algorithm
  sends: broadcast centres, one k×(d+2)+2 total per block through the tree, the root to the driver.
- memory per worker (RSS) after each phase.

Run: ``.venv/bin/python benches/scale_kmeans.py [--rows 1e7] [--big-rows 1e8]`` (after
``bash benches/install_peers.sh``). Output: benches/output/scale_kmeans.txt. Figures taken on a loaded
2-core machine are noisy; the ratio is from the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

D, K = 16, 64


def make_block(b: int, rows: int, seed: int) -> np.ndarray:
    means = np.random.default_rng(seed).uniform(-10, 10, (K, D)).astype(np.float32)
    rng = np.random.default_rng([seed, b])
    lab = rng.integers(K, size=rows)
    x = rng.standard_normal((rows, D), dtype=np.float32)
    x += means[lab]
    return x


def dataset(n: int, block_rows: int, seed: int) -> Any:
    import dask
    import dask.array as da

    parts = []
    for b, s in enumerate(range(0, n, block_rows)):
        r = min(block_rows, n - s)
        parts.append(da.from_delayed(dask.delayed(make_block)(b, r, seed), shape=(r, D), dtype=np.float32))
    return da.concatenate(parts)


def nearest_sse(client: Any, X: Any, centers: np.ndarray) -> float:
    """Σ min_j ‖x − c_j‖² over the dask array (one pass): the same yardstick for both libraries."""
    import dask

    from thrifty import _core

    c = np.ascontiguousarray(centers, dtype=np.float32)

    def part(b: np.ndarray) -> float:
        return _core.kmeans_inertia(np.require(b, requirements=["C", "A"]), c, None, 1)

    return float(sum(client.gather(client.compute([dask.delayed(part)(blk) for blk in X.to_delayed().ravel()]))))


def rss(client: Any) -> list[float]:
    def mem() -> float:
        import psutil

        return psutil.Process().memory_info().rss / 2**20

    return [round(v) for v in client.run(mem).values()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--big-rows", type=float, default=1e8)
    ap.add_argument("--big-iters", type=int, default=2)
    ap.add_argument("--peer-iters", type=int, default=3)
    ap.add_argument("--block-rows", type=int, default=262144)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "output", "scale_kmeans.txt"))
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    from thrifty.cluster import DaskHartiganKMeans

    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"# scale_kmeans: k={K}, d={D}, float32, {args.workers} workers x 1 thread, block_rows={args.block_rows}")
    say(f"# machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start (shared, noisy)")
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, memory_limit="6GiB",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.run(lambda: __import__("thrifty.cluster"))  # imports outside the timings
        n = int(args.rows)
        init = make_block(0, K, 0).astype(np.float64)  # the same start for both: the data's first K rows
        X = dataset(n, args.block_rows, seed=0).persist()
        from distributed import wait

        wait(X)
        say(f"rows={n:.0e}: persisted over the workers; worker RSS MiB {rss(client)}")

        stamps: list[float] = []
        t0 = time.perf_counter()
        km = DaskHartiganKMeans(K, init=init, algorithm="lloyd", max_iter=args.iters, tol=0.0,
                                block_rows=args.block_rows, client=client)
        km.fit(X, _on_iteration=lambda phase, it: stamps.append(time.perf_counter()))
        per = np.diff([t0, *stamps])
        rows_computed = km.iteration_stats_["lloyd_distance_rows"] / n
        tail = statistics.median(per[1:]) if len(per) > 1 else per[0]
        say(f"thrifty  per iteration s: {np.round(per, 3).tolist()} (median of 2..: {tail:.3f}); "
            f"distance rows computed: {np.round(rows_computed, 3).tolist()}")
        nb = km.n_blocks_
        part = (K * (D + 2) + 2) * 8
        bcast = (K * D + 2 * K) * 8
        moved = bcast * args.workers + nb * part + part
        say(f"thrifty  bytes moved per iteration: {moved / 2**20:.2f} MiB (centres {bcast} B x {args.workers} "
            f"workers + {nb} block totals x {part} B; no data rows)")
        say(f"worker RSS MiB after thrifty: {rss(client)}")

        if not args.skip_peer:
            from dask_ml.cluster import KMeans as DaskMLKMeans

            ref = DaskMLKMeans(n_clusters=K, init=init, max_iter=args.peer_iters, tol=0.0, oversampling_factor=2)
            t1 = time.perf_counter()
            ref.fit(X)
            t_ref = time.perf_counter() - t1
            per_ref = t_ref / max(ref.n_iter_, 1)
            say(f"dask-ml  {ref.n_iter_} iterations in {t_ref:.2f} s: {per_ref:.3f} s per iteration")
            say(f"ratio dask-ml / thrifty per iteration: {per_ref / tail:.1f}x (thrifty iterations 2..), "
                f"{per_ref / float(np.mean(per)):.1f}x (thrifty mean incl. the first, bound-free iteration)")
            sse_t, sse_r = nearest_sse(client, X, km.cluster_centers_), nearest_sse(client, X, ref.cluster_centers_)
            say(f"nearest-centre SSE of the final centres thrifty ({km.n_iter_} it) / dask-ml ({ref.n_iter_} it): "
                f"{sse_t / sse_r:.4f} ({sse_t:.4g} vs {sse_r:.4g})")
            say(f"worker RSS MiB after dask-ml: {rss(client)}")
        del X
        client.run(lambda: __import__("gc").collect())

        if args.big_rows > 0:
            nbig = int(args.big_rows)
            Xb = dataset(nbig, args.block_rows, seed=0)
            t1 = time.perf_counter()
            Xb.sum(axis=0).compute()
            gen = time.perf_counter() - t1
            say(f"rows={nbig:.0e}: generation-only pass {gen:.1f} s (regenerated in every pass, never persisted)")
            stamps = []
            t0 = time.perf_counter()
            kb = DaskHartiganKMeans(K, init=init, algorithm="lloyd", max_iter=args.big_iters, tol=0.0,
                                    block_rows=args.block_rows, client=client)
            kb.fit(Xb, _on_iteration=lambda phase, it: stamps.append(time.perf_counter()))
            perb = np.diff([t0, *stamps])
            say(f"thrifty  per iteration s at {nbig:.0e} rows: {np.round(perb, 2).tolist()}; distance rows "
                f"computed: {np.round(kb.iteration_stats_['lloyd_distance_rows'] / nbig, 3).tolist()}")
            say(f"worker RSS MiB after the {nbig:.0e}-row fit: {rss(client)} "
                f"(bounds state {nbig * 20 / 2**30:.2f} GiB over all workers)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
