"""Every warning of the package points at the user's line (issue 19, point 4): ``warning.filename`` is this
file, whichever public entry point raised it and however deep inside the package it was raised."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from thrifty import _warn


def _caught(call: Callable[[], Any], category: type[Warning]) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    got = [w for w in caught if issubclass(w.category, category)]
    assert got, f"no {category.__name__} was raised"
    return got


def _gate_nb() -> None:
    from thrifty.inference import subspace_test

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 5)), rng.normal(size=30)  # n_eff 30 < the NB threshold: "nb" is rerouted
    subspace_test(X, y, method="nb", n_splits=4, n_perm=9, random_state=0)


def _constant_column() -> None:
    from thrifty.inference import subspace_test

    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 6))
    X[:, 2] = 1.0
    subspace_test(X, rng.normal(size=120), n_splits=4, n_perm=9, random_state=0)


def _estimator_warning() -> None:
    from thrifty.inference import PLSInference

    rng = np.random.default_rng(2)
    PLSInference(n_components=2).fit(rng.normal(size=(6, 3)), rng.normal(size=6))  # too few rows for the test


def _kmeans_duplicates() -> None:
    from thrifty.cluster import HartiganKMeans

    X = np.repeat(np.arange(3.0)[:, None], 20, axis=0)  # 3 distinct points, 5 clusters
    HartiganKMeans(n_clusters=5, n_init=1, random_state=0).fit(X)


def _kmeans_explicit_init() -> None:
    from thrifty.cluster import HartiganKMeans

    X = np.random.default_rng(3).normal(size=(50, 2))
    HartiganKMeans(n_clusters=2, init=X[:2].copy(), n_init=3).fit(X)


def _projection_reduced_rank() -> None:
    from thrifty.dpp import ProjectionDPP

    F = np.random.default_rng(4).normal(size=(40, 3))
    F = np.hstack([F, F[:, :1]])  # rank 3 < 4 columns
    ProjectionDPP.from_features(F)


CASES = [
    ("subspace_test GateWarning", _gate_nb, "GateWarning"),
    ("subspace_test ConstantColumnWarning", _constant_column, "ConstantColumnWarning"),
    ("PLSInference.fit UserWarning", _estimator_warning, "UserWarning"),
    ("HartiganKMeans ConvergenceWarning", _kmeans_duplicates, "ConvergenceWarning"),
    ("HartiganKMeans explicit init", _kmeans_explicit_init, "RuntimeWarning"),
    ("ProjectionDPP ReducedRankWarning", _projection_reduced_rank, "ReducedRankWarning"),
]


@pytest.mark.parametrize(("name", "call", "category_name"), CASES, ids=[c[0] for c in CASES])
def test_warning_points_at_the_callers_line(name: str, call: Callable[[], None], category_name: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    got = [w for w in caught if w.category.__name__ == category_name]
    assert got, f"{name}: no {category_name} (got {[w.category.__name__ for w in caught]})"
    for w in got:
        assert w.filename == __file__, f"{name}: the warning points at {w.filename}:{w.lineno}"


def test_stack_level_walks_out_of_the_package() -> None:
    (w,) = _caught(lambda: _warn.warn("probe", UserWarning), UserWarning)
    assert w.filename == __file__
