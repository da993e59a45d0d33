"""Bad input to HartiganKMeans raises a clear ValueError/TypeError; nothing panics."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from thrifty.cluster import HartiganKMeans

X = np.random.default_rng(0).normal(size=(20, 3))


@pytest.mark.parametrize(
    ("data", "exc", "match"),
    [
        (np.where(np.arange(60).reshape(20, 3) == 7, np.nan, X), ValueError, "NaN"),
        (np.where(np.arange(60).reshape(20, 3) == 7, np.inf, X), ValueError, "infinity"),
        (np.empty((0, 3)), ValueError, "0 sample"),
        (np.empty((5, 0)), ValueError, "0 feature"),
        (X[:, 0], ValueError, "2D array"),
        (X + 1j, ValueError, "[Cc]omplex"),
        (np.full((20, 3), "abc"), ValueError, "convert|[Ss]tring|dtype"),
        (np.array([[object()] * 3] * 20), TypeError, "."),
        (sp.csr_matrix(np.where(np.arange(60).reshape(20, 3) == 7, np.nan, X)), ValueError, "NaN"),  # CSR is accepted
        (sp.csr_matrix(X + 1j), ValueError, "[Cc]omplex"),
    ],
)
def test_bad_data(data: Any, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        HartiganKMeans(2).fit(data)


@pytest.mark.parametrize(
    ("params", "exc", "match"),
    [
        (dict(n_clusters=0), ValueError, "n_clusters"),
        (dict(n_clusters=21), ValueError, "n_samples=20"),
        (dict(n_clusters=2.5), TypeError, "n_clusters"),
        (dict(init=np.zeros((3, 3))), ValueError, "shape"),
        (dict(init=np.zeros((2, 4))), ValueError, "shape"),
        (dict(init="kmeans"), ValueError, "init"),
        (dict(init=np.full((2, 3), np.nan)), ValueError, "init"),
        (dict(n_init=0), ValueError, "n_init"),
        (dict(n_init="twice"), ValueError, "n_init"),
        (dict(max_iter=0), ValueError, "max_iter"),
        (dict(tol=-1.0), ValueError, "tol"),
        (dict(tol=np.nan), ValueError, "tol"),
        (dict(algorithm="full"), ValueError, "algorithm"),
        (dict(n_jobs=0), ValueError, "n_jobs"),
        (dict(random_state=-3), ValueError, "random_state"),
        (dict(random_state="seed"), TypeError, "random_state"),
    ],
)
def test_bad_parameters(params: dict[str, Any], exc: type, match: str) -> None:
    kw = {"n_clusters": 2, **params}
    with pytest.raises(exc, match=match):
        HartiganKMeans(**kw).fit(X)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        (-np.ones(20), "[Nn]egative"),
        (np.zeros(20), "zero"),
        (np.ones(19), "shape"),
        (np.where(np.arange(20) == 3, np.nan, 1.0), "NaN"),
    ],
)
def test_bad_sample_weight(weights: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        HartiganKMeans(2).fit(X, sample_weight=weights)


def test_predict_with_wrong_width_and_before_fit() -> None:
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        HartiganKMeans(2).predict(X)
    km = HartiganKMeans(2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        km.predict(X[:, :2])
    with pytest.raises(ValueError, match="NaN"):
        km.transform(np.full((2, 3), np.nan))


def test_core_rejects_inconsistent_arrays_without_panicking() -> None:
    from thrifty import _core

    with pytest.raises(ValueError):
        _core.kmeans_predict(X, np.zeros((2, 4)))
    with pytest.raises(TypeError):
        _core.kmeans_predict(X, np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(ValueError):
        _core.kmeans_fit(X, np.ones(3), "k-means++", 2, 1, 10, 0.0, "hartigan", 0)
    with pytest.raises(ValueError):
        _core.kmeans_fit(X, None, "k-means++", 30, 1, 10, 0.0, "hartigan", 0)
