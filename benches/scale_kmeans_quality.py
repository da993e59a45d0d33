"""Blocked (distributed) Hartigan vs blocked Lloyd from the same start (issue 11, acceptance 2).

On a 2-worker Dask LocalCluster: the high-noise mixture of arXiv 2602.09936 (200 points, d = 2000,
means ±5·e1, random-partition start) and digits (k = 10 and 50, random-row starts), several seeds
each. Prints the mean inertia of both, the mean relative gain, the ARI on the mixture, and whether the
Hartigan SSE trace ever rose. Output: benches/output/scale_kmeans_quality.txt.

Run: ``.venv/bin/python benches/scale_kmeans_quality.py [--seeds 10]``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--cases", default="mixture,digits k=10,digits k=50")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "output", "scale_kmeans_quality.txt"))
    args = ap.parse_args()
    import dask.array as da
    from distributed import Client, LocalCluster

    from thrifty.cluster import DaskHartiganKMeans

    lines: list[str] = []

    os.makedirs(os.path.dirname(args.out), exist_ok=True)

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)
        with open(args.out, "w") as f:  # rewritten after every case: a cut-short run keeps its lines
            f.write("\n".join(lines) + "\n")

    digits = load_digits().data
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        say(f"# blocked Hartigan vs blocked Lloyd on a {len(cluster.workers)}-worker LocalCluster, {args.seeds} seeds")
        for case in args.cases.split(","):
            hart, lloyd, ari_h, ari_l, rose, rounds = [], [], [], [], 0, []
            for s in range(args.seeds):
                rng = np.random.default_rng(s)
                if case == "mixture":
                    n, d = 200, 2000
                    y = np.repeat([0, 1], n // 2)
                    X = rng.standard_normal((n, d))
                    X[:, 0] += np.where(y == 0, -5.0, 5.0)
                    part = rng.permutation(np.arange(n) % 2)
                    init = np.stack([X[part == j].mean(axis=0) for j in range(2)])
                    block = 50
                else:
                    X = digits
                    k = 10 if case.endswith("10") else 50
                    init = X[rng.choice(len(X), k, replace=False)]
                    block = 400
                Xd = da.from_array(X, chunks=(300, X.shape[1]))
                common = {"init": init, "tol": 0.0, "block_rows": block, "client": client}
                h = DaskHartiganKMeans(len(init), algorithm="hartigan", **common).fit(Xd)
                ll = DaskHartiganKMeans(len(init), algorithm="lloyd", **common).fit(Xd)
                rose += int(np.any(np.diff(h.sse_trace_) > 0))
                rounds.append(len(h.sse_trace_) - 1)
                hart.append(h.inertia_)
                lloyd.append(ll.inertia_)
                if case == "mixture":
                    ari_h.append(adjusted_rand_score(y, h.labels_.compute()))
                    ari_l.append(adjusted_rand_score(y, ll.labels_.compute()))
            gain = np.mean(1 - np.array(hart) / np.array(lloyd))
            say(f"{case}: mean inertia Hartigan {np.mean(hart):.6g} vs Lloyd {np.mean(lloyd):.6g} "
                f"(mean gain {100 * gain:.2f} %, Hartigan lower in {sum(a < b for a, b in zip(hart, lloyd))}/{args.seeds}); "
                f"Hartigan rounds median {int(np.median(rounds))}; SSE trace rose in {rose} runs"
                + (f"; ARI Hartigan {np.mean(ari_h):.2f} vs Lloyd {np.mean(ari_l):.2f}" if ari_h else ""))


if __name__ == "__main__":
    main()
