"""Null calibration, two-sided (fast version of benches/calibration_inference.py, which runs >= 2000
replicates per learner x design x n): the share of p <= alpha under the null lies in
alpha +/- 3 se for the test ``method="auto"`` runs, and the NB test's power stays near the
permutation test's where auto runs it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from inference_designs import DESIGNS, null_design

from thrifty.inference import GateWarning, subspace_test

ALPHA = 0.05


def _band(reps: int) -> tuple[float, float]:
    se = np.sqrt(ALPHA * (1 - ALPHA) / reps)
    return ALPHA - 3 * se, ALPHA + 3 * se


@pytest.mark.parametrize("design", DESIGNS)
def test_size_of_the_default_test_pls(design):
    reps = 300
    rng = np.random.default_rng(12345)
    rejections = 0
    methods = set()
    for i in range(reps):
        X, y = null_design(design, 100, 40, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GateWarning)
            res = subspace_test(X, y, n_splits=30, n_perm=19, random_state=i, n_jobs=1)
        methods.add(res.method)
        rejections += res.pvalue <= ALPHA
    lo, hi = _band(reps)
    assert lo <= rejections / reps <= hi, f"{design}: size {rejections / reps:.3f} outside [{lo:.3f}, {hi:.3f}] ({methods})"
    # one dominant factor (stable rank < 8): the permutation test; a spread spectrum: the NB test
    assert methods == ({"nb"} if design == "iid" else {"nb-permutation"})


@pytest.mark.parametrize("learner", ["ridge", "spca", "pls-k2", "pls-small-n"])
def test_size_of_the_default_test_other_learners(learner):
    # these run the NB-permutation test by default; the NB test would reject about 0-3.6% here
    reps = 200
    rng = np.random.default_rng(777)
    rejections = 0
    for i in range(reps):
        n = 40 if learner == "pls-small-n" else 80
        X, y = null_design("iid", n, 30, rng)
        kw = {"n_components": 2} if learner == "pls-k2" else {} if learner == "pls-small-n" else {"learner": learner}
        res = subspace_test(X, y, n_splits=10, n_perm=19, random_state=i, n_jobs=1, **kw)
        assert res.method == "nb-permutation"
        rejections += res.pvalue <= ALPHA
    lo, hi = _band(reps)
    assert lo <= rejections / reps <= hi, f"{learner}: size {rejections / reps:.3f}"


def test_power_nb_versus_permutation_same_splits():
    rng = np.random.default_rng(3)
    hit_nb = hit_perm = 0
    reps = 120
    for i in range(reps):
        X = rng.normal(size=(100, 30))
        y = 0.35 * X[:, 0] + rng.normal(size=100)
        nb = subspace_test(X, y, n_splits=30, random_state=i, n_jobs=1)
        perm = subspace_test(X, y, method="nb-permutation", n_perm=99, splits=nb.train_indices, n_jobs=1, random_state=i)
        hit_nb += nb.pvalue <= ALPHA
        hit_perm += perm.pvalue <= ALPHA
    assert nb.method == "nb"
    assert 0.25 < hit_perm / reps < 0.9  # the effect is neither trivial nor hopeless
    assert hit_nb / reps >= hit_perm / reps - 0.08  # the full table holds 3 points at 1000 replicates
