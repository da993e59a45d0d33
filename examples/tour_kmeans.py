"""Tour part 1: batched Hartigan k-means against Lloyd on real data (scikit-learn's digits)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits

from thrifty.cluster import HartiganKMeans

TITLE = "Batched Hartigan k-means (thrifty.cluster.HartiganKMeans) on the digits data set"


def _timed(fit):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    model = fit()
    return model, time.perf_counter() - t0


def run(output_dir: Path) -> None:
    X, y = load_digits(return_X_y=True)
    print(f"digits: {X.shape[0]} images of 8x8 pixels, {len(np.unique(y))} classes")
    print("Same greedy k-means++ start for every method; 1 thread; run to a fixed point (tol=0).\n")
    print(f"{'k':>3} {'seed':>4} | {'sklearn Lloyd':>22} | {'thrifty Lloyd':>22} | {'thrifty Hartigan':>22} | SSE gain")
    rows = []
    for k in (10, 50):
        for seed in range(3):
            init = HartiganKMeans(k, random_state=seed, max_iter=1).fit(X).init_centers_
            with threadpool_limits(1):
                sk, t_sk = _timed(lambda: KMeans(k, init=init, n_init=1, tol=0).fit(X))
            ll, t_ll = _timed(lambda: HartiganKMeans(k, init=init, tol=0, algorithm="lloyd", n_jobs=1).fit(X))
            ha, t_ha = _timed(lambda: HartiganKMeans(k, init=init, tol=0, n_jobs=1).fit(X))
            gain = 1 - ha.inertia_ / sk.inertia_
            rows.append((k, gain))
            print(f"{k:>3} {seed:>4} | {sk.inertia_:>12.4g} {t_sk * 1e3:>7.1f} ms | {ll.inertia_:>12.4g} "
                  f"{t_ll * 1e3:>7.1f} ms | {ha.inertia_:>12.4g} {t_ha * 1e3:>7.1f} ms | {gain:+.2%}")
    for k in (10, 50):
        print(f"mean SSE reduction of Hartigan over Lloyd at k={k}: {np.mean([g for kk, g in rows if kk == k]):+.2%}")

    # Where Lloyd fails outright: high-dimensional noise (arXiv 2602.09936).
    rng = np.random.default_rng(0)
    n, d = 200, 2000
    labels = np.repeat([0, 1], n // 2)
    Xn = rng.standard_normal((n, d))
    Xn[:, 0] += np.where(labels == 0, -5.0, 5.0)
    part = rng.permutation(np.arange(n) % 2)
    init = np.stack([Xn[part == j].mean(axis=0) for j in range(2)])
    ari_l = adjusted_rand_score(labels, KMeans(2, init=init, n_init=1, tol=0).fit(Xn).labels_)
    ari_h = adjusted_rand_score(labels, HartiganKMeans(2, init=init, tol=0).fit(Xn).labels_)
    print(f"\nHigh-noise mixture (200 points, d=2000, means ±5·e1, random-partition start): "
          f"ARI Lloyd {ari_l:.2f}, Hartigan {ari_h:.2f}")

    # Picture: digits in 2-D (PCA), coloured by Hartigan clusters, with the bounds' certificates.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ha = HartiganKMeans(10, random_state=0, tol=0).fit(X)
    Z = PCA(2, random_state=0).fit(X)
    P, C = Z.transform(X), Z.transform(ha.cluster_centers_)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 5))
    a1.scatter(P[:, 0], P[:, 1], c=ha.labels_, cmap="tab10", s=6)
    a1.scatter(C[:, 0], C[:, 1], c="k", marker="x", s=80)
    a1.set_title(f"digits, HartiganKMeans(k=10): inertia {ha.inertia_:.4g}, ARI vs classes "
                 f"{adjusted_rand_score(y, ha.labels_):.2f}", fontsize=9)
    cert = ha.iteration_stats_["certified"] / X.shape[0]
    a2.plot(np.arange(2, len(cert) + 2), cert, "o-")
    a2.set_xlabel("iteration")
    a2.set_ylabel("fraction certified unmovable by the bounds")
    a2.set_ylim(0, 1.02)
    a2.set_title("points that cost no distance evaluation", fontsize=9)
    path = output_dir / "kmeans_digits.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot: {path}")
