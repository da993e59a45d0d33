"""asv benchmarks for thrifty.inference (run: cd benches && ../.venv/bin/asv run --python=same --quick)."""

from __future__ import annotations

import warnings

import numpy as np

from thrifty.inference import GateWarning, component_tests, subspace_test, varimax


class NBAsymptotic:
    params = ([1, 2, 3], [(500, 500), (1000, 1000), (200, 5000)])
    param_names = ["k", "shape"]

    def setup(self, k, shape):
        rng = np.random.default_rng(0)
        self.X = rng.normal(size=shape)
        self.y = 0.1 * self.X[:, 0] + rng.normal(size=shape[0])

    def time_nb(self, k, shape):
        subspace_test(self.X, self.y, k, method="nb", force=True, random_state=1, n_jobs=1)


class NBPermutation:
    params = ([1, 2], [(500, 500), (1000, 1000)])
    param_names = ["k", "shape"]
    timeout = 300

    def setup(self, k, shape):
        rng = np.random.default_rng(0)
        self.X = rng.normal(size=shape)
        self.y = 0.1 * self.X[:, 0] + rng.normal(size=shape[0])

    def time_nb_permutation(self, k, shape):
        subspace_test(self.X, self.y, k, method="nb-permutation", n_perm=1000, random_state=1, n_jobs=1, progress=False)


class Baselines:
    def setup(self):
        rng = np.random.default_rng(0)
        self.X = rng.normal(size=(300, 200))
        self.y = 0.2 * self.X[:, 0] + rng.normal(size=300)

    def time_cv_permutation_q2(self):
        subspace_test(self.X, self.y, method="cv-permutation-q2", n_perm=200, random_state=1, n_jobs=1, progress=False)

    def time_component_tests(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GateWarning)
            component_tests(self.X, self.y, max_components=3, random_state=1, n_jobs=1)

    def track_nb_p_value(self):
        return subspace_test(self.X, self.y, random_state=1).p_value


class Varimax:
    def setup(self):
        self.L = np.random.default_rng(0).normal(size=(2000, 6))

    def time_varimax(self):
        varimax(self.L)
