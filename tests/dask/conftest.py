"""Dask fixtures shared by the scale-out tests (k-means, inference, DPP).

``dask_client_factory(n_workers)`` returns a ``dask.distributed.Client`` on an in-process
``LocalCluster`` with ``n_workers`` single-threaded workers (``processes=False``: starts in about a
second, no spawned interpreters). One cluster per worker count is started lazily and reused by every
test of the session; all are closed at the end. Tests using the fixtures are skipped when
``dask.distributed`` is not installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def dask_client_factory() -> Iterator[Callable[[int], Any]]:
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("dask.array")
    clusters: dict[int, tuple[Any, Any]] = {}

    def get(n_workers: int = 2) -> Any:
        if n_workers not in clusters:
            cluster = distributed.LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=False, dashboard_address=":0",
            )
            clusters[n_workers] = (cluster, distributed.Client(cluster, set_as_default=False))
        return clusters[n_workers][1]

    yield get
    for cluster, client in clusters.values():
        client.close()
        cluster.close()


@pytest.fixture(scope="session")
def dask_client(dask_client_factory: Callable[[int], Any]) -> Any:
    """A 2-worker client (the README's test setting)."""
    return dask_client_factory(2)
