"""Acceptance 6: random (often invalid) input to every public entry point gives a result or a clear
ValueError/TypeError — never a Rust panic or another exception type."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty.inference import (
    PLSInference,
    check_gate,
    component_tests,
    subspace_test,
    varimax,
)

FUZZ = settings(max_examples=60, deadline=None)


@st.composite
def problems(draw):
    n = draw(st.integers(1, 30))
    p = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    kind = draw(st.sampled_from(["ok", "nan", "inf", "const_col", "const_y", "dup_cols", "huge", "tiny"]))
    y = X[:, 0] + rng.normal(size=n)
    if kind == "nan":
        X[rng.integers(n), rng.integers(p)] = np.nan
    elif kind == "inf":
        y[rng.integers(n)] = np.inf
    elif kind == "const_col":
        X[:, rng.integers(p)] = 1.5
    elif kind == "const_y":
        y[:] = 2.0
    elif kind == "dup_cols":
        X[:] = X[:, :1]
    elif kind == "huge":
        X *= 1e150
        y *= 1e150
    elif kind == "tiny":
        X *= 1e-150
    k = draw(st.integers(0, 4))
    return X, y, k, seed


def _ok(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except (ValueError, TypeError):
        pass


@FUZZ
@given(problems(), st.sampled_from(["nb", "nb-permutation", "cv-permutation-q2", "permutation-score", "jackknife"]),
       st.sampled_from(["pls", "spca", "ridge", "basis"]), st.booleans())
def test_subspace_test_never_panics(prob, method, learner, weighted):
    X, y, k, seed = prob
    lr = np.ones((X.shape[1], max(k, 1))) if learner == "basis" else learner
    w = np.random.default_rng(seed).uniform(0, 2, size=X.shape[0]) if weighted else None
    _ok(lambda: subspace_test(X, y, k, learner=lr, method=method, n_splits=3, n_perm=5, n_folds=2,
                              sample_weight=w, random_state=seed, force=bool(seed % 2)))


@FUZZ
@given(problems())
def test_other_entry_points_never_panic(prob):
    X, y, k, seed = prob
    _ok(lambda: component_tests(X, y, max_components=max(k, 1), n_splits=3, n_perm=5, random_state=seed))
    _ok(lambda: PLSInference(n_components=k, n_splits=3, n_perm=5, random_state=seed).fit(X, y).predict(X))
    _ok(lambda: check_gate(X))
    _ok(lambda: varimax(X))
    _ok(lambda: subspace_test(X, np.c_[y, y[::-1]], k, n_splits=3, n_perm=5, random_state=seed))
    _ok(lambda: subspace_test(X, y, splits=[np.arange(min(3, X.shape[0])), np.arange(X.shape[0])[::2]]))
