"""DPP sampling at scale on a dask.distributed LocalCluster (issue 11, acceptance 3 and 4).

Run: ``.venv/bin/python benches/scale_dpp.py [--rows 1e7] [--workers 2]``; the output is also
written to ``benches/output/scale_dpp.txt``.

The data are an n × 20 float64 dask array generated chunk by chunk (chunk c from its own seeded
generator; never materialised whole; 2**20 rows per chunk, a multiple of the 8192-row logical
blocks). Measured:
1. a Haar DPP coreset of m = 1000 (``Coreset(X, 1000)``, the default kernel): wall time per phase
   (data box, cell counts, fetch) and bytes to the driver;
2. the projection DPP of the 20 features (``ProjectionDPP.from_features(X)``: TSQR + leverage
   totals) and 10 exact samples (proposals on the driver, hit rows fetched);
3. peak resident memory of every worker process (polled every 0.2 s) and of the driver;
4. on a 2**20-row prefix, the same calls in NumPy: identical indices (bit-identity check).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

import numpy as np

P = 20
CHUNK = 1 << 20
OUT: list[str] = []


def say(msg: str = "") -> None:
    print(msg, flush=True)
    OUT.append(msg)


def chunk_data(block_info: Any = None) -> np.ndarray:
    info = block_info[None]
    (r0, r1), _ = info["array-location"]
    c = info["chunk-location"][0]
    rng = np.random.default_rng([2026, c])
    # Correlated, shifted features (a fixed mixing) so TSQR and the leverages are not trivial.
    z = rng.standard_normal((r1 - r0, P))
    mix = np.random.default_rng(7).normal(size=(P, P)) / np.sqrt(P) + np.eye(P)
    return z @ mix + np.linspace(-1, 1, P)


def make(n: int) -> Any:
    import dask.array as da

    sizes = [CHUNK] * (n // CHUNK) + ([n % CHUNK] if n % CHUNK else [])
    return da.map_blocks(
        chunk_data, chunks=(tuple(sizes), (P,)), dtype=np.float64, meta=np.empty((0, P))
    )


class Peak:
    """Polls the RSS of every worker process (and the driver) in the background."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.peak: dict[str, int] = {}
        self.driver = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.is_set():
            try:
                rss = self.client.run(
                    lambda: __import__("psutil").Process().memory_info().rss
                )
            except (
                OSError,
                RuntimeError,
                TimeoutError,
            ):  # a worker busy or restarting: poll again later
                rss = {}
            for w, v in rss.items():
                self.peak[w] = max(self.peak.get(w, 0), int(v))
            self.driver = max(self.driver, me.memory_info().rss)
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=float, default=1e7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--m", type=int, default=1000)
    args = ap.parse_args()
    n, m = int(args.rows), args.m
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    from distributed import Client, LocalCluster

    from thrifty.dpp import Coreset, ProjectionDPP

    cluster = LocalCluster(
        n_workers=args.workers,
        threads_per_worker=1,
        processes=True,
        memory_limit="6GB",
        dashboard_address=None,
    )
    client = Client(cluster)
    say(
        f"DPP at scale: n = {n:,} rows x {P} float64 ({n * P * 8 / 2**30:.1f} GiB if materialised), "
        f"{args.workers} worker processes x 1 thread, chunks of {CHUNK:,} rows; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (timings taken under load)"
    )
    X = make(n)
    peak = Peak(client)

    t0 = time.perf_counter()
    cs = Coreset(X, m, random_state=1)
    t_cs = time.perf_counter() - t0
    say(
        f"\n[1] Haar coreset, m = {m}: {t_cs:.1f} s wall (3 passes: data box, cell counts, fetch of {cs.size} rows)"
    )
    n_chunks = len(X.chunks[0])
    moved = n_chunks * (2 * P * 8 + m * 8) + cs.size * P * 8
    say(
        f"    size {cs.size}, sum of weights {cs.weights.sum():,.0f} (n = {n:,}); bytes to the driver ~{moved / 2**20:.2f} MiB"
    )

    t0 = time.perf_counter()
    dpp = ProjectionDPP.from_features(X)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    dpp.sample_many(10, random_state=3)
    t_s = time.perf_counter() - t0
    blocks = -(-n // 8192)
    moved_fit = n_chunks * 2 * P * P * 8 + blocks * 8
    say(
        f"\n[2] ProjectionDPP.from_features (TSQR, {'two passes' if dpp.W[1] is not None else 'one pass'}) + leverage totals: {t_fit:.1f} s wall"
    )
    say(
        f"    10 exact samples of {dpp.rank} items: {t_s:.1f} s wall (one fetch round; rows fetched <= 10 x ~{int(2 * P * np.log(P + 1)) + 64})"
    )
    say(
        f"    bytes to the driver: TSQR nodes + block totals ~{moved_fit / 2**20:.2f} MiB; "
        f"per sample ~{(int(2 * P * np.log(P + 1)) + 64) * P * 8 / 1024:.0f} KiB of rows"
    )
    peak.stop()
    say(
        "\n[3] peak resident memory per worker process: "
        + ", ".join(f"{v / 2**20:,.0f} MiB" for v in peak.peak.values())
        + f"; driver {peak.driver / 2**20:,.0f} MiB (a chunk is {CHUNK * P * 8 / 2**20:.0f} MiB; the data would be {n * P * 8 / 2**20:,.0f} MiB)"
    )

    # Bit-identity on a prefix that fits in memory.
    k = min(n, CHUNK)
    Xs = make(k)
    x = Xs.compute()
    a = Coreset(Xs, min(m, 200), random_state=5)
    b = Coreset(x, min(m, 200), random_state=5)
    d1 = ProjectionDPP.from_features(Xs).sample_many(5, random_state=9)
    d2 = ProjectionDPP.from_features(x).sample_many(5, random_state=9)
    say(
        f"\n[4] {k:,}-row prefix, dask vs NumPy: coreset indices identical {np.array_equal(a.indices, b.indices)}, "
        f"weights identical {np.array_equal(a.weights, b.weights)}, projection samples identical {np.array_equal(d1, d2)}"
    )
    client.close()
    cluster.close()
    os.makedirs(os.path.join(os.path.dirname(__file__), "output"), exist_ok=True)
    with open(
        os.path.join(os.path.dirname(__file__), "output", "scale_dpp.txt"), "w"
    ) as f:
        f.write(" ".join(sys.argv) + "\n" + "\n".join(OUT) + "\n")


if __name__ == "__main__":
    main()
