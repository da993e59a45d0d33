"""asv benchmarks for thrifty.cluster: fit time of batched Hartigan, our Lloyd and scikit-learn's Lloyd
from the same initial centres, one thread (``track_`` entries record the ratios)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

from thrifty.cluster import HartiganKMeans


def _data(n: int, d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    X, _ = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=2.0, random_state=0)
    init = HartiganKMeans(k, random_state=0, max_iter=1, n_jobs=1).fit(X).init_centers_
    return X, init


class KMeansFit:
    params = ([10_000, 100_000], [2, 16, 64], [8, 64])
    param_names = ["n", "d", "k"]
    timeout = 300

    def setup(self, n: int, d: int, k: int) -> None:
        self.X, self.init = _data(n, d, k)

    def time_hartigan(self, n: int, d: int, k: int) -> None:
        HartiganKMeans(k, init=self.init, tol=0, n_jobs=1).fit(self.X)

    def time_thrifty_lloyd(self, n: int, d: int, k: int) -> None:
        HartiganKMeans(k, init=self.init, tol=0, algorithm="lloyd", n_jobs=1).fit(self.X)

    def time_sklearn_lloyd(self, n: int, d: int, k: int) -> None:
        with threadpool_limits(1):
            KMeans(k, init=self.init, n_init=1, tol=0).fit(self.X)

    def track_hartigan_over_sklearn(self, n: int, d: int, k: int) -> float:
        def best(fn: Any) -> float:
            out = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
            return min(out)

        return best(lambda: self.time_hartigan(n, d, k)) / best(lambda: self.time_sklearn_lloyd(n, d, k))

    track_hartigan_over_sklearn.unit = "ratio"  # type: ignore[attr-defined]


class KMeansQuality:
    def setup(self) -> None:
        from sklearn.datasets import load_digits

        self.X = load_digits().data

    def track_digits_k50_sse_gain(self) -> float:
        gains = []
        for seed in range(5):
            h = HartiganKMeans(50, random_state=seed, tol=0).fit(self.X)
            s = KMeans(50, init=h.init_centers_, n_init=1, tol=0).fit(self.X)
            gains.append(1 - h.inertia_ / s.inertia_)
        return float(np.mean(gains))

    track_digits_k50_sse_gain.unit = "relative SSE reduction"  # type: ignore[attr-defined]
