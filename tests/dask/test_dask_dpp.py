"""DPP sampling on a dask.distributed cluster equals the single-machine API bit for bit (issue 11).

A LocalCluster is started here (module scope; 1, 2 and 3 workers), the data are sampled with the
single-machine API and with dask arrays of two chunkings of the same logical blocks (and one
misaligned chunking that is re-cut), and the results must be identical. Exactness on the dask path:
singleton inclusion frequencies vs the exact marginals K_ii (counts chi-square, fixed seed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from thrifty import _core
from thrifty.dpp import Coreset, DistributedProjectionDPP, ProjectionDPP, orthonormalize
from thrifty.dpp._dask import volume_cells

LEAF = int(_core.DPP_LEAF_ROWS)


@pytest.fixture(scope="module")
def dpp_cluster() -> Iterator[Any]:
    """One LocalCluster for the module (processes=False keeps start-up fast); scaled per test."""
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    )
    client = distributed.Client(cluster)
    try:
        yield cluster, client
    finally:
        client.close()
        cluster.close()


def _scale(cluster: Any, client: Any, workers: int) -> None:
    cluster.scale(workers)
    client.wait_for_workers(workers, timeout=60)
    # scale() down retires workers asynchronously; wait until exactly `workers` remain.
    for _ in range(200):
        if len(client.scheduler_info()["workers"]) == workers:
            return
        import time

        time.sleep(0.05)


def _features(n: int, p: int, seed: int, dtype: Any = np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, p)) * np.linspace(1.0, 5.0, p) + rng.normal(size=p)
    return x.astype(dtype)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_from_features_samples_identical_to_single_machine(
    dpp_cluster: Any, workers: int
) -> None:
    cluster, client = dpp_cluster
    _scale(cluster, client, workers)
    n, p = 5 * LEAF + 1234, 7
    x = _features(n, p, 1)
    ref = ProjectionDPP.from_features(x)
    want = ref.sample_many(6, random_state=42)
    q_ref = orthonormalize(x)
    # Two chunkings of the same logical blocks, and one misaligned chunking (re-cut to blocks).
    for chunks in [(2 * LEAF, p), (LEAF, p), (3 * LEAF + 100, p)]:
        X = da.from_array(x, chunks=chunks)
        dpp = ProjectionDPP.from_features(X)
        assert isinstance(dpp, DistributedProjectionDPP)
        assert dpp.rank == ref.rank == p
        got = dpp.sample_many(6, random_state=42)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(
            dpp.sample(random_state=7), ref.sample(random_state=7)
        )
        assert dpp.seed_ == 7
        if chunks[0] == LEAF:
            q = orthonormalize(X).compute()
            assert q.dtype == q_ref.dtype
            np.testing.assert_array_equal(q, q_ref)
            lev = dpp.inclusion_probabilities().compute()
            np.testing.assert_array_equal(lev, ref.inclusion_probabilities())


def test_float32_rank_deficient_and_ill_conditioned_agree(dpp_cluster: Any) -> None:
    cluster, client = dpp_cluster
    _scale(cluster, client, 2)
    n = 3 * LEAF + 77
    for dtype, eps in ((np.float64, 1e-4), (np.float32, 3e-2)):
        data = _features(n, 5, 2)
        data[:, 4] = data[:, 0] - 2.0 * data[:, 1]  # rank 4
        data[:, 2] = (
            data[:, 3] + eps * data[:, 2]
        )  # ill-conditioned: a second TSQR pass runs
        data = data.astype(dtype)
        with pytest.warns(UserWarning, match="rank 4"):
            ref = ProjectionDPP.from_features(data)
        with pytest.warns(UserWarning, match="rank 4"):
            dpp = ProjectionDPP.from_features(da.from_array(data, chunks=(LEAF, 5)))
        assert dpp.rank == ref.rank == 4
        np.testing.assert_array_equal(
            dpp.sample_many(4, random_state=3), ref.sample_many(4, random_state=3)
        )
        q = ref.U
        assert np.abs(q.T.astype(np.float64) @ q - np.eye(4)).max() < (
            1e-5 if data.dtype == np.float32 else 1e-12
        )


def test_inclusion_frequencies_match_exact_marginals_on_dask(dpp_cluster: Any) -> None:
    """Counts chi-square of singleton inclusions vs K_ii over 400 dask-path samples (fixed seed)."""
    cluster, client = dpp_cluster
    _scale(cluster, client, 2)
    n, p = 60, 4
    x = _features(n, p, 5)
    X = da.from_array(x, chunks=(n, p))
    dpp = ProjectionDPP.from_features(X)
    k = dpp.inclusion_probabilities().compute()
    assert abs(k.sum() - p) < 1e-12
    S = 400
    samples = dpp.sample_many(S, random_state=11)
    assert all(len(set(s)) == p for s in samples)
    counts = np.bincount(samples.ravel(), minlength=n)
    # Binomial counts per item: Σ (c − S k)² / (S k (1 − k)) ~ χ²-like with mean n; sizes are fixed
    # (Σ counts = S p), so the sum has mean below n. Reject only far beyond its 99.9% range.
    stat = float((((counts - S * k) ** 2) / (S * k * (1 - k))).sum())
    assert stat < 110.0, stat
    # The same samples as one machine.
    np.testing.assert_array_equal(
        samples, ProjectionDPP.from_features(x).sample_many(S, random_state=11)
    )


def test_coresets_identical_to_single_machine(dpp_cluster: Any) -> None:
    cluster, client = dpp_cluster
    _scale(cluster, client, 3)
    rng = np.random.default_rng(9)
    x = rng.uniform(size=(2 * LEAF + 500, 3)) ** np.array([1.0, 2.0, 0.5])
    for kernel, m in (("haar", 40), ("ope", 10)):
        ref = Coreset(x, m, kernel=kernel, random_state=5)
        for chunks in [(LEAF, 3), (2 * LEAF, 3)]:
            cs = Coreset(
                da.from_array(x, chunks=chunks), m, kernel=kernel, random_state=5
            )
            np.testing.assert_array_equal(cs.indices, ref.indices)
            np.testing.assert_array_equal(cs.weights, ref.weights)
            assert cs.size == ref.size
    # Any block of rows labels its points as the whole-data partition does.
    z = rng.uniform(size=(3000, 3))
    for m in (1, 7, 64, 100):
        np.testing.assert_array_equal(
            volume_cells(z, m), np.asarray(_core.dpp_partition(z, m, "volume")["cells"])
        )


def test_bad_input_is_a_clear_error_or_a_correct_result(dpp_cluster: Any) -> None:
    cluster, client = dpp_cluster
    _scale(cluster, client, 2)
    n, p = 2 * LEAF + 10, 4
    x = _features(n, p, 3)
    want = ProjectionDPP.from_features(x).sample(random_state=1)
    # Chunks along the feature axis: re-chunked to whole rows, same answer.
    X = da.from_array(x, chunks=(LEAF, 2))
    np.testing.assert_array_equal(
        ProjectionDPP.from_features(X).sample(random_state=1), want
    )
    # NaN in one block: a clear error naming the argument and the row.
    bad = x.copy()
    bad[LEAF + 3, 2] = np.nan
    with pytest.raises(
        ValueError, match=f"features contains NaN or infinity.*row {LEAF + 3}"
    ):
        ProjectionDPP.from_features(da.from_array(bad, chunks=(LEAF, p)))
    with pytest.raises(ValueError, match="X contains NaN"):
        Coreset(da.from_array(bad, chunks=(LEAF, p)), 8, random_state=0)
    with pytest.raises(ValueError, match="split must be 'volume'"):
        Coreset(da.from_array(x, chunks=(LEAF, p)), 8, split="quantile", random_state=0)
    with pytest.raises(ValueError, match="method must be 'accept_reject'"):
        ProjectionDPP.from_features(X, method="chain")
    with pytest.raises(TypeError, match="real numeric"):
        ProjectionDPP.from_features(da.from_array(np.array([["a", "b"]] * 3)))
    with pytest.raises(ValueError, match="all columns are zero"):
        ProjectionDPP.from_features(da.zeros((100, 3), chunks=(50, 3)))


def test_worker_lost_mid_computation_gives_the_same_sample(dpp_cluster: Any) -> None:
    """A worker restarted while the TSQR/leverage tasks run: the tasks are pure, so the scheduler
    recomputes them elsewhere and the sample is unchanged."""
    cluster, client = dpp_cluster
    _scale(cluster, client, 2)
    n, p = 4 * LEAF, 6
    x = _features(n, p, 8)
    want = ProjectionDPP.from_features(x).sample_many(3, random_state=2)

    import threading

    def slow(b: Any) -> Any:
        import time

        time.sleep(0.05)
        return b

    X = da.from_array(x, chunks=(LEAF, p)).map_blocks(slow, dtype=x.dtype)
    victim = min(client.scheduler_info()["workers"])
    killer = threading.Timer(
        0.1,
        lambda: client.sync(
            client.scheduler.retire_workers, workers=[victim], close_workers=True
        ),
    )
    killer.start()
    try:
        got = ProjectionDPP.from_features(X).sample_many(3, random_state=2)
    finally:
        killer.join()
    np.testing.assert_array_equal(got, want)
