"""Blocked k-means on Dask (issue 11): bit-identical to the single-machine run for any number of
workers and any chunking, monotone blocked Hartigan, clear errors on bad input or lost workers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, make_blobs

from thrifty.cluster import DaskHartiganKMeans, HartiganKMeans
from thrifty.cluster._blocked import tree_reduce
from thrifty.cluster._dask import WorkerLostError

da = pytest.importorskip("dask.array")

Factory = Callable[[int], Any]


@pytest.fixture(scope="module")
def blobs() -> np.ndarray:
    X, _ = make_blobs(3000, n_features=5, centers=6, cluster_std=2.5, random_state=0)
    return X


def _np(km: Any) -> np.ndarray:
    """Labels as NumPy: a dask ``labels_`` is computed on the client that fitted it."""
    if not hasattr(km.labels_, "compute"):
        return np.asarray(km.labels_)
    return np.asarray(km.labels_.compute(scheduler=getattr(km, "client", None)))


def _same(a: Any, b: Any) -> None:
    la, lb = _np(a), _np(b)
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(a.cluster_centers_, b.cluster_centers_)
    np.testing.assert_array_equal(a.init_centers_, b.init_centers_)
    np.testing.assert_array_equal(a.sse_trace_, b.sse_trace_)
    assert a.inertia_ == b.inertia_ and a.n_iter_ == b.n_iter_


def _check_partition(X: np.ndarray, km: Any) -> None:
    """Independent recomputation: centres are the means of the labels, inertia their SSE."""
    labels = _np(km)
    k = km.cluster_centers_.shape[0]
    means = np.stack([X[labels == j].mean(axis=0) for j in range(k)])
    np.testing.assert_allclose(km.cluster_centers_, means, rtol=1e-9, atol=1e-9)
    sse = sum(float(np.sum((X[labels == j] - means[j]) ** 2)) for j in range(k))
    assert km.inertia_ == pytest.approx(sse, rel=1e-9)


def test_tree_has_a_fixed_shape() -> None:
    assert tree_reduce(list("abcde"), lambda a, b: f"({a}{b})") == "(((ab)(cd))e)"


@pytest.mark.parametrize("algorithm", ["hartigan", "lloyd"])
def test_identical_on_1_2_3_workers_and_two_chunkings(dask_client_factory: Factory, blobs: np.ndarray, algorithm: str) -> None:
    params = {"n_clusters": 6, "random_state": 3, "block_rows": 500, "algorithm": algorithm, "tol": 0.0, "init_rounds": 2}
    ref = DaskHartiganKMeans(**params).fit(blobs)  # NumPy: the single-machine run
    _check_partition(blobs, ref)
    cases = [(1, (700, 5)), (2, (700, 5)), (3, (700, 5)), (2, (250, 2))]  # last: chunked along features
    if algorithm == "lloyd":
        cases = cases[1:2] + cases[3:]
    for workers, chunks in cases:
        client = dask_client_factory(workers)
        got = DaskHartiganKMeans(**params, client=client).fit(da.from_array(blobs, chunks=chunks))
        assert got.n_blocks_ == 6
        _same(ref, got)


def test_hartigan_kmeans_accepts_a_dask_array(dask_client: Any, blobs: np.ndarray) -> None:
    one = HartiganKMeans(6, algorithm="blocked-hartigan", random_state=1).fit(blobs)
    with dask_client.as_current():
        two = HartiganKMeans(6, random_state=1).fit(da.from_array(blobs, chunks=(1000, 5)))
        _same(one, two)
    assert isinstance(one.labels_, np.ndarray) and one.labels_.dtype == np.int32
    np.testing.assert_array_equal(two.predict(blobs), one.predict(blobs))


def test_blocked_lloyd_matches_sklearn_from_the_same_centres(blobs: np.ndarray) -> None:
    init = blobs[:6].copy()
    ours = DaskHartiganKMeans(6, init=init, algorithm="lloyd", tol=0.0, block_rows=400).fit(blobs)
    ref = KMeans(6, init=init, n_init=1, tol=0.0).fit(blobs)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    np.testing.assert_allclose(ours.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    assert ours.inertia_ == pytest.approx(ref.inertia_, rel=1e-10)
    # The bounds skip most distance rows after the first iterations.
    rows = ours.iteration_stats_["lloyd_distance_rows"]
    assert rows[0] == len(blobs) and rows[-1] < 0.2 * len(blobs)


def test_kmeans_parallel_init_is_good(blobs: np.ndarray) -> None:
    ours = DaskHartiganKMeans(6, random_state=0, block_rows=500).fit(blobs)
    ref = KMeans(6, n_init=3, random_state=0).fit(blobs)
    assert ours.n_candidates_ > 6
    assert ours.inertia_ <= 1.01 * ref.inertia_


def _high_noise(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, d = 200, 2000
    y = np.repeat([0, 1], n // 2)
    X = rng.standard_normal((n, d))
    X[:, 0] += np.where(y == 0, -5.0, 5.0)
    part = rng.permutation(np.arange(n) % 2)
    return X, np.stack([X[part == j].mean(axis=0) for j in range(2)])


def test_distributed_hartigan_is_monotone_and_beats_lloyd(dask_client: Any) -> None:
    cases: list[tuple[np.ndarray, np.ndarray]] = [_high_noise(s) for s in range(2)]
    digits = load_digits().data
    for s in range(2):
        rng = np.random.default_rng(s)
        cases.append((digits, digits[rng.choice(len(digits), 10, replace=False)]))
    hart, lloyd = [], []
    for X, init in cases:
        Xd = da.from_array(X, chunks=(300, X.shape[1]))
        common = {"init": init, "tol": 0.0, "block_rows": 100 if len(X) == 200 else 400, "client": dask_client}
        h = DaskHartiganKMeans(len(init), algorithm="hartigan", **common).fit(Xd)
        ll = DaskHartiganKMeans(len(init), algorithm="lloyd", **common).fit(Xd)
        assert np.all(np.diff(h.sse_trace_) <= 0), h.sse_trace_
        assert h.sse_trace_[0] == pytest.approx(ll.inertia_, rel=1e-12)
        assert h.converged_
        _check_partition(X, h)
        hart.append(h.inertia_)
        lloyd.append(ll.inertia_)
    assert np.mean(hart[:2]) < np.mean(lloyd[:2])  # high-noise mixture
    assert np.mean(hart[2:]) < np.mean(lloyd[2:])  # digits


def test_nan_in_a_block_is_a_clear_error(dask_client: Any, blobs: np.ndarray) -> None:
    X = blobs.copy()
    X[2345, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity.*logical block 4"):
        DaskHartiganKMeans(6, block_rows=500, client=dask_client).fit(da.from_array(X, chunks=(700, 5)))
    with pytest.raises(ValueError, match="NaN or infinity"):
        DaskHartiganKMeans(6, block_rows=500, init=blobs[:6]).fit(X)


def test_bad_parameters_and_missing_client(blobs: np.ndarray) -> None:
    Xd = da.from_array(blobs, chunks=(1000, 5))
    with pytest.raises(ValueError, match="sample_weight"):
        DaskHartiganKMeans(3).fit(blobs, sample_weight=-np.ones(len(blobs)))
    with pytest.raises(ValueError, match="n_init"):
        DaskHartiganKMeans(3, n_init=0).fit(blobs)
    with pytest.raises(ValueError, match="n_samples"):
        DaskHartiganKMeans(5000).fit(blobs)
    if _no_default_client():
        with pytest.raises(ValueError, match="Client"):
            DaskHartiganKMeans(3).fit(Xd)


def test_blocked_n_init_keeps_the_best_run(blobs: np.ndarray) -> None:
    """n_init > 1 on the blocked path: run 0 is the n_init=1 run, the lowest inertia of the runs
    wins, and explicit centres run once (scikit-learn's warning)."""
    params = {"random_state": 5, "block_rows": 700, "init_rounds": 1, "oversampling": 0.5, "max_iter": 3}
    runs = [DaskHartiganKMeans(6, **params).fit(blobs)]
    best = DaskHartiganKMeans(6, n_init=4, **params).fit(blobs)
    assert best._n_init == 4
    from thrifty.cluster._hartigan import _run_seed

    for r in range(1, 4):
        runs.append(DaskHartiganKMeans(6, **{**params, "random_state": _run_seed(5, r)}).fit(blobs))
    inertias = [r.inertia_ for r in runs]
    assert len(set(inertias)) > 1, "the runs must differ for this test to mean anything"
    _same(best, runs[int(np.argmin(inertias))])
    via_estimator = HartiganKMeans(6, n_init=4, algorithm="blocked-hartigan", random_state=5, max_iter=3).fit(blobs)
    assert via_estimator.inertia_ <= HartiganKMeans(6, algorithm="blocked-hartigan", random_state=5, max_iter=3).fit(blobs).inertia_
    with pytest.warns(RuntimeWarning, match="only one init"):
        one = DaskHartiganKMeans(6, init=blobs[:6], n_init=3, block_rows=700).fit(blobs)
    _same(one, DaskHartiganKMeans(6, init=blobs[:6], block_rows=700).fit(blobs))


def _no_default_client() -> bool:
    try:
        from distributed import get_client

        get_client()
        return False
    except ValueError:
        return True


def test_worker_lost_mid_fit_gives_the_right_result_or_a_clear_error(blobs: np.ndarray) -> None:
    distributed = pytest.importorskip("distributed")
    params = {"n_clusters": 6, "random_state": 5, "block_rows": 500, "tol": 0.0}
    ref = DaskHartiganKMeans(**params).fit(blobs)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        killed: list[str] = []

        def kill(phase: str, it: int) -> None:
            if phase == "lloyd" and it == 1 and not killed:
                name, worker = next(iter(cluster.workers.items()))
                killed.append(str(name))
                cluster.sync(worker.close)

        Xd = da.from_array(blobs, chunks=(500, 5))
        try:
            got = DaskHartiganKMeans(**params, client=client).fit(Xd, _on_iteration=kill)
        except WorkerLostError as e:
            assert "worker was lost" in str(e)  # a clear error; a refit on the survivors is exact
            got = DaskHartiganKMeans(**params, client=client).fit(Xd)
        assert killed
        _same(ref, got)
