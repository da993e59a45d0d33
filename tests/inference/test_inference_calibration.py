"""Acceptance 2 (fast version): false-positive rate under the null at alpha = 0.05 for the test the
gate allows, on iid, decaying-spectrum, single-factor and low-stable-rank designs. The full
>= 2000-replicate table is printed by benches/calibration_inference.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from inference_designs import DESIGNS, null_design
from thrifty.inference import GateWarning, subspace_test

ALPHA = 0.05


@pytest.mark.parametrize("design", DESIGNS)
def test_false_positive_rate(design):
    reps = 300
    rng = np.random.default_rng(12345)
    rejections = 0
    methods = set()
    for i in range(reps):
        X, y = null_design(design, 60, 30, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GateWarning)
            res = subspace_test(X, y, n_splits=30, n_perm=199, random_state=i, n_jobs=1)
        methods.add(res.method)
        rejections += res.p_value < ALPHA
    fpr = rejections / reps
    bound = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert fpr <= bound, f"{design}: FPR {fpr:.3f} > {bound:.3f} ({methods})"
    if design == "low-stable-rank":
        assert methods == {"nb-permutation"}
    elif design in ("iid", "single-factor"):
        assert methods == {"nb"}


def test_false_positive_rate_k2():
    reps = 200
    rng = np.random.default_rng(7)
    rej = 0
    for i in range(reps):
        X, y = null_design("iid", 60, 30, rng)
        rej += subspace_test(X, y, n_components=2, n_splits=30, random_state=i, n_jobs=1).p_value < ALPHA
    assert rej / reps <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / reps)


def test_power_under_alternative():
    rng = np.random.default_rng(3)
    hits = 0
    for i in range(50):
        X = rng.normal(size=(80, 30))
        y = X[:, 0] + rng.normal(size=80)
        hits += subspace_test(X, y, n_splits=30, random_state=i, n_jobs=1).p_value < ALPHA
    assert hits >= 40
