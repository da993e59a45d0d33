"""asv benchmarks for thrifty.dpp (sizes small enough for ``asv run --quick``)."""

from __future__ import annotations

import numpy as np

from thrifty.dpp import (
    LEnsemble,
    ProjectionDPP,
    discretize,
    orthonormalize,
    select_entropy,
    select_mutual_information,
)


class Orthonormalize:
    params = [[10_000, 100_000], [20, 100]]
    param_names = ["n", "p"]

    def setup(self, n: int, p: int) -> None:
        self.X = np.random.default_rng(0).normal(size=(n, p))

    def time_orthonormalize(self, n: int, p: int) -> None:
        orthonormalize(self.X)


class ProjectionSampling:
    params = [[10_000, 100_000], ["accept_reject", "chain"]]
    param_names = ["n", "method"]

    def setup(self, n: int, method: str) -> None:
        self.dpp = ProjectionDPP.from_features(np.random.default_rng(0).normal(size=(n, 50)))

    def time_sample(self, n: int, method: str) -> None:
        self.dpp.sample(random_state=0, method=method)  # type: ignore[arg-type]

    def time_sample_many_32(self, n: int, method: str) -> None:
        self.dpp.sample_many(32, random_state=0, method=method)  # type: ignore[arg-type]


class Ensembles:
    def setup(self) -> None:
        F = np.random.default_rng(0).normal(size=(5000, 100))
        self.low_rank = LEnsemble(features=F)

    def time_lowrank_sample(self) -> None:
        self.low_rank.sample_many(8, random_state=0)

    def time_k_dpp_sample(self) -> None:
        self.low_rank.sample_k_many(50, 8, random_state=0)


class Kernels:
    params = ["haar", "ope"]
    param_names = ["kernel"]

    def setup(self, kernel: str) -> None:
        self.X = np.random.default_rng(0).uniform(size=(20_000, 2))

    def time_discretize_256(self, kernel: str) -> None:
        discretize(self.X, 256, kernel=kernel)  # type: ignore[arg-type]


class Greedy:
    def setup(self) -> None:
        pts = np.random.default_rng(0).uniform(size=(2000, 2))
        d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
        self.C = np.exp(-d2 / (2 * 0.1**2)) + 1e-6 * np.eye(2000)

    def time_entropy_k100(self) -> None:
        select_entropy(self.C, 100)  # default: validates the entries it reads

    def time_entropy_k100_unchecked(self) -> None:
        select_entropy(self.C, 100, check_input=False)

    def time_mutual_information_k50(self) -> None:
        select_mutual_information(self.C, 50)
