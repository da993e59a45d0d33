"""Subspace tests beyond one process (issue 11): an NB-permutation test with B = 10⁴ spread over a
Dask LocalCluster, and a large-n dask-array NB test generated block by block (never materialised).

    .venv/bin/python benches/scale_inference.py [--workers 2] [--perm 10000] [--rows 10000000] [--p 50]

Prints wall times (median of --reps for the permutation test), the ratio cluster / one process, the
bytes shipped, the peak resident memory of every worker, and checks that the cluster's p-value and
null distribution equal the single-process run's bit for bit. Writes the same text to
benches/output/scale_inference.txt. Figures taken on a shared, loaded machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "output" / "scale_inference.txt"
LINES: list[str] = []


def say(text: str = "") -> None:
    print(text, flush=True)
    LINES.append(text)


def median_time(fn, reps):
    ts, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


class PeakMemory:
    """Samples every worker's resident memory (RSS) twice a second; keeps the peak per worker."""

    def __init__(self, client):
        self.client, self.peak, self._stop, self.missed = client, {}, threading.Event(), 0
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            try:
                sample = self.client.run(_rss)
            except Exception:  # noqa: BLE001 - a sample lost while workers are busy
                self.missed += 1
                sample = {}
            for w, rss in sample.items():
                self.peak[w] = max(self.peak.get(w, 0), rss)
            self._stop.wait(0.5)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    def text(self) -> str:
        return ", ".join(f"{v / 2**20:.0f} MiB" for _, v in sorted(self.peak.items()))


def _warm() -> None:
    import thrifty.inference  # noqa: F401


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--perm", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n", type=int, default=300, help="rows of the permutation problem")
    ap.add_argument("--perm-p", type=int, default=100, help="columns of the permutation problem")
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows of the dask-array X")
    ap.add_argument("--p", type=int, default=50, help="columns of the dask-array X")
    ap.add_argument("--chunk", type=int, default=250_000, help="rows per generated chunk")
    ap.add_argument("--out", default=str(OUT), help="where the printed figures are saved")
    ap.add_argument("--skip-array", action="store_true", help="only the permutation part")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    from thrifty.inference import GateWarning, subspace_test

    warnings.simplefilter("ignore", GateWarning)
    say(f"scale_inference: {args.workers} workers x 1 thread, os.cpu_count()={os.cpu_count()}, "
        f"load average {os.getloadavg()[0]:.1f} (shared machine: timings are noisy)")
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                           memory_limit="3GiB")
    client = Client(cluster)
    # warm the workers (imports of thrifty, numpy, scikit-learn) so that the timings below are steady
    client.run(_warm)
    try:
        # ---- 1. NB-permutation test, B = 10^4 -------------------------------------------------------
        g = np.random.default_rng(0)
        n, p = args.n, args.perm_p
        X = g.normal(size=(n, p))
        y = 0.1 * X[:, 0] + g.normal(size=n)
        say(f"\n[1] NB-permutation, PLS1 k=1 and k=2, n={n}, p={p}, J=50 splits, B={args.perm}")
        for k in (1, 2):
            def run(backend, jobs, k=k):
                return subspace_test(X, y, n_components=k, method="nb-permutation", n_perm=args.perm, random_state=1,
                                     backend=backend, n_jobs=jobs)
            t1, local1 = median_time(lambda: run("local", 1), args.reps)
            t2, local2 = median_time(lambda: run("local", min(2, os.cpu_count() or 1)), args.reps)
            with PeakMemory(client) as mem:
                tc, dist = median_time(lambda: run("dask", None), args.reps)
            same = (dist.pvalue == local1.pvalue and np.array_equal(dist.null_distribution, local1.null_distribution)
                    and local2.pvalue == local1.pvalue)
            say(f"  k={k}: one process 1 thread {t1:.2f} s | 2 threads {t2:.2f} s | cluster {args.workers} workers "
                f"{tc:.2f} s | ratio cluster/1-thread {tc / t1:.2f} | p = {dist.pvalue:.6g} "
                f"identical to the local run: {same}")
            say(f"       shipped once per worker: X+y {(X.nbytes + y.nbytes) / 2**20:.2f} MiB + 50 train-index arrays "
                f"{50 * (n // 2) * 8 / 2**20:.2f} MiB; back per permutation and split: one float "
                f"({50 * args.perm * 8 / 2**20:.1f} MiB in all); peak RSS per worker: {mem.text()}")
            if not same:
                say("  MISMATCH between the cluster and the local run")
                return 1

        # ---- 2. large-n dask-array NB test ----------------------------------------------------------
        if args.skip_array:
            return _save(args.out)
        rows, p = args.rows, args.p
        say(f"\n[2] dask-array X {rows} x {p} float64 ({rows * p * 8 / 2**30:.1f} GiB, generated per chunk of "
            f"{args.chunk} rows, never materialised), NB-asymptotic PLS1 test, J=50")
        rs = da.random.RandomState(42)
        Xd = rs.standard_normal(size=(rows, p), chunks=(args.chunk, p))
        yd = 0.002 * Xd[:, 0] + rs.standard_normal(size=rows, chunks=args.chunk)
        from thrifty.inference._dask_array import logical_rows

        L = logical_rows(rows, p)
        with PeakMemory(client) as mem:
            t0 = time.perf_counter()
            res = subspace_test(Xd, yd, random_state=0)
            tl = time.perf_counter() - t0
        blocks = -(-rows // L)
        say(f"  wall {tl:.1f} s ({rows / tl / 1e3:.1f} k rows/s for two reads of X; {blocks} logical blocks of {L} rows)")
        say(f"  p = {res.pvalue:.3g}, statistic {res.statistic:.5f}, stable rank {res.gate.stable_rank:.2f}, "
            f"method {res.method}; peak RSS per worker: {mem.text()}")
        per_block_1 = (p * p + 3 * 50 * p + 4 * 50 + 2 * p + 4) * 8
        per_block_2 = 6 * 50 * 8
        say(f"  network per logical block: pass 1 result {per_block_1 / 1024:.1f} KiB, pass 2 {per_block_2 / 1024:.1f} KiB "
            f"(+ the 8-byte/row split mask in: {rows * 8 / 2**20:.0f} MiB); tree depth {int(np.ceil(np.log2(blocks)))}")
        # the same data in another chunking gives the same bits
        if rows <= 2_000_000:
            with dask.config.set(scheduler="threads"):
                other = subspace_test(Xd.rechunk((args.chunk // 3, p)), yd, random_state=0)
            say(f"  other chunking, threaded scheduler: identical r and p: "
                f"{np.array_equal(other.r, res.r) and other.pvalue == res.pvalue}")
        rate = rows * p / tl
        say(f"  measured {rate / 1e6:.1f} M values/s with {args.workers} workers")
        for big_n, w in ((10**8, args.workers), (10**9, 100)):
            say(f"  projected n={big_n:.0e}, p={p}, {w} workers: {big_n * p / (rate / args.workers * w):.0f} s "
                "(data read twice; linear in n, in p for p <= 200, ~p² beyond for XᵀX)")
    finally:
        client.close()
        cluster.close()
    return _save(args.out)


def _save(path: str) -> int:
    out = Path(path)
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(LINES) + "\n")
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
