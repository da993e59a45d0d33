"""Sample weights on the blocked (scale-out) k-means: a dask array with weights matches the
single-machine ``algorithm="blocked-hartigan"`` bit for bit, equal weights are unit weights, zero
weights never move a centre, and the result is checked against an independent NumPy computation of
the weighted objective (weighted means, weighted SSE, no improving weighted Hartigan move)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from thrifty.cluster import DaskHartiganKMeans, HartiganKMeans

da = pytest.importorskip("dask.array")

Factory = Callable[[int], Any]


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    X, _ = make_blobs(2400, n_features=4, centers=5, cluster_std=2.0, random_state=2)
    w = np.random.default_rng(7).gamma(2.0, 1.5, size=len(X))
    w[::11] = 0.0  # zero-weight rows in every block
    return X, w


def _np(labels: Any, client: Any = None) -> np.ndarray:
    return np.asarray(labels.compute(scheduler=client) if hasattr(labels, "compute") else labels)


def _same(a: Any, b: Any, client: Any = None) -> None:
    np.testing.assert_array_equal(_np(a.labels_), _np(b.labels_, client))
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.init_centers_, b.init_centers_)
    np.testing.assert_array_equal(a.sse_trace_, b.sse_trace_)
    assert a.inertia_ == b.inertia_ and a.n_iter_ == b.n_iter_


def _weighted_reference(X: np.ndarray, w: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """Weighted means of the partition and its weighted SSE, in plain NumPy."""
    means = np.stack([np.average(X[labels == j], axis=0, weights=w[labels == j]) for j in range(k)])
    return means, float(np.sum(w * np.sum((X - means[labels]) ** 2, axis=1)))


PARAMS = {"n_clusters": 5, "random_state": 4, "block_rows": 500, "tol": 0.0, "init_rounds": 2}


@pytest.mark.parametrize("algorithm", ["hartigan", "lloyd"])
def test_dask_with_weights_matches_single_machine_blocked_bit_for_bit(
    dask_client_factory: Factory, data: tuple[np.ndarray, np.ndarray], algorithm: str
) -> None:
    X, w = data
    w_before = w.copy()
    ref = HartiganKMeans(**{k: v for k, v in PARAMS.items() if k not in ("block_rows", "init_rounds")},
                         algorithm=f"blocked-{algorithm}").fit(X, sample_weight=w)
    ref_small = DaskHartiganKMeans(**PARAMS, algorithm=algorithm).fit(X, sample_weight=w)  # NumPy X
    np.testing.assert_array_equal(w, w_before)  # the user's weights are not modified
    for workers, chunks, weights in [(1, (700, 4), w), (2, (700, 4), da.from_array(w, chunks=300)), (3, (350, 2), w)]:
        client = dask_client_factory(workers)
        got = DaskHartiganKMeans(**PARAMS, algorithm=algorithm, client=client).fit(
            da.from_array(X, chunks=chunks), sample_weight=weights
        )
        _same(ref_small, got, client)
    # HartiganKMeans on a dask array is the blocked fit with the default block size.
    client = dask_client_factory(2)
    with client.as_current():
        kw = {k: v for k, v in PARAMS.items() if k not in ("block_rows", "init_rounds")}
        two = HartiganKMeans(**kw, algorithm=algorithm).fit(da.from_array(X, chunks=(900, 4)), sample_weight=w)
    _same(ref, two, client)


def test_weighted_result_is_a_weighted_hartigan_optimum(data: tuple[np.ndarray, np.ndarray]) -> None:
    """Independent NumPy checks of the weighted objective: the centres are the weighted means of the
    labels, the inertia their weighted SSE, no single weighted Hartigan move lowers it, and the
    Hartigan rounds end no higher than the Lloyd phase they start from."""
    X, w = data
    k = 5
    km = DaskHartiganKMeans(**PARAMS).fit(X, sample_weight=w)
    labels = np.asarray(km.labels_)
    means, sse = _weighted_reference(X, w, labels, k)
    np.testing.assert_allclose(km.cluster_centers_, means, rtol=1e-10, atol=1e-10)
    assert km.inertia_ == pytest.approx(sse, rel=1e-10)
    assert km.inertia_ <= km.lloyd_sse_[-1] * (1 + 1e-12)
    d2 = np.sum((X[:, None, :] - means[None, :, :]) ** 2, axis=2)
    W = np.bincount(labels, weights=w, minlength=k)
    pos = w > 0
    rest = W[labels] - w
    gain = np.where(rest > 0, w * W[labels] / np.where(rest > 0, rest, 1) * d2[np.arange(len(X)), labels], np.inf)
    cost = w[:, None] * W[None, :] / (W[None, :] + w[:, None]) * d2
    cost[np.arange(len(X)), labels] = np.inf
    assert np.all(cost.min(axis=1)[pos] >= gain[pos] * (1 - 1e-9))
    # Zero-weight rows carry their nearest centre's label.
    zero = ~pos
    np.testing.assert_array_equal(labels[zero], np.argmin(d2[zero], axis=1))


def test_equal_weights_give_the_unit_weight_result(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, _ = data
    unit = HartiganKMeans(5, algorithm="blocked-hartigan", random_state=1).fit(X)
    for c in (3.0, 1e308, 1e-320):
        got = HartiganKMeans(5, algorithm="blocked-hartigan", random_state=1).fit(X, sample_weight=np.full(len(X), c))
        np.testing.assert_array_equal(got.labels_, unit.labels_)
        np.testing.assert_array_equal(got.cluster_centers_, unit.cluster_centers_)
        if c < 1e300:
            assert got.inertia_ == pytest.approx(c * unit.inertia_, rel=1e-12)


def test_scaled_weights_give_the_same_partition(data: tuple[np.ndarray, np.ndarray]) -> None:
    """Weights × 2^j are the same problem (the blocks use weights / the power of two nearest the max)."""
    X, w = data
    a = HartiganKMeans(5, algorithm="blocked-hartigan", random_state=3).fit(X, sample_weight=w)
    b = HartiganKMeans(5, algorithm="blocked-hartigan", random_state=3).fit(X, sample_weight=w * 2.0**600)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    assert b.inertia_ == pytest.approx(a.inertia_ * 2.0**600, rel=1e-12)


def test_zero_weights_never_move_a_centre_and_lloyd_matches_sklearn(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, w = data
    init = X[w > 0][:5].copy()
    ours = DaskHartiganKMeans(5, init=init, algorithm="lloyd", tol=0.0, block_rows=400).fit(X, sample_weight=w)
    ref = KMeans(5, init=init, n_init=1, tol=0.0).fit(X, sample_weight=w)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-10)
    # Moving the zero-weight rows far away changes no centre.
    far = X.copy()
    far[w == 0] += 1e3
    moved = DaskHartiganKMeans(5, init=init, algorithm="hartigan", tol=0.0, block_rows=400).fit(far, sample_weight=w)
    base = DaskHartiganKMeans(5, init=init, algorithm="hartigan", tol=0.0, block_rows=400).fit(X, sample_weight=w)
    np.testing.assert_allclose(moved.cluster_centers_, base.cluster_centers_, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(moved.labels_)[w > 0], np.asarray(base.labels_)[w > 0])


def test_integer_weights_equal_repeated_rows(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, _ = data
    reps = np.random.default_rng(1).integers(0, 4, size=len(X))
    init = X[reps > 0][:5].copy()
    ours = DaskHartiganKMeans(5, init=init, algorithm="lloyd", tol=0.0, block_rows=300).fit(
        X, sample_weight=reps.astype(float)
    )
    rep = DaskHartiganKMeans(5, init=init, algorithm="lloyd", tol=0.0, block_rows=300).fit(np.repeat(X, reps, axis=0))
    np.testing.assert_allclose(ours.cluster_centers_, rep.cluster_centers_, rtol=1e-10)
    assert ours.inertia_ == pytest.approx(rep.inertia_, rel=1e-10)


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf, 0.0])
def test_bad_weights_name_the_argument(dask_client: Any, data: tuple[np.ndarray, np.ndarray], bad: float) -> None:
    X, w = data
    wb = np.zeros(len(X)) if bad == 0.0 else np.where(np.arange(len(X)) == 5, bad, w)
    with pytest.raises(ValueError, match="(?i)sample.weight"):  # NumPy input: scikit-learn's messages
        HartiganKMeans(3, algorithm="blocked-hartigan").fit(X, sample_weight=wb)
    with dask_client.as_current(), pytest.raises(ValueError, match="sample_weight"):
        HartiganKMeans(3).fit(da.from_array(X, chunks=(1000, 4)), sample_weight=da.from_array(wb, chunks=500))
    with dask_client.as_current(), pytest.raises(ValueError, match="sample_weight"):
        HartiganKMeans(3).fit(da.from_array(X, chunks=(1000, 4)), sample_weight=w[:-1])


@pytest.mark.parametrize("exponent", [700, -700])
def test_data_beyond_the_squared_range_is_rescaled_alike_on_dask(
    dask_client: Any, data: tuple[np.ndarray, np.ndarray], exponent: int
) -> None:
    # The blocked fit rescales X by a power of two when its squared distances would leave float64
    # (before: "k-means|| found only 1 distinct candidate centres"); on a dask array the same check
    # (one extra pass) gives the single-machine result bit for bit, and the unit-scale clustering.
    X, w = data
    s = 2.0**exponent
    unit = DaskHartiganKMeans(**PARAMS).fit(X, sample_weight=w)
    with pytest.warns(RuntimeWarning, match="inertia_ (over|under)flows"):
        ref = DaskHartiganKMeans(**PARAMS).fit(X * s, sample_weight=w)
    with pytest.warns(RuntimeWarning, match="inertia_ (over|under)flows"):
        got = DaskHartiganKMeans(**PARAMS, client=dask_client).fit(da.from_array(X * s, chunks=(700, 4)), sample_weight=w)
    _same(ref, got, dask_client)
    np.testing.assert_array_equal(ref.labels_, unit.labels_)
    np.testing.assert_array_equal(ref.cluster_centers_, unit.cluster_centers_ * s)
