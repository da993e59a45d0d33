"""scikit-learn's own KMeans tests with :class:`thrifty.cluster.HartiganKMeans` as ``KMeans``.

A pytest plugin: it replaces ``sklearn.cluster.KMeans`` before scikit-learn's
``sklearn/cluster/tests/test_k_means.py`` (read from the installed package, never copied) is
imported, and deselects the tests that are not about KMeans (MiniBatchKMeans) and
``test_kmeans_elkan_results`` (it compares the default algorithm with Elkan's; our default is
Hartigan's by design). Run it as a script::

    python tests/cluster/sklearn_suite.py [pytest options]

which prints pytest's summary (``test_kmeans_sklearn_suite.py`` asserts the count).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import sklearn.cluster

from thrifty.cluster import HartiganKMeans

sklearn.cluster.KMeans = HartiganKMeans  # type: ignore[misc]

SUITE = "sklearn.cluster.tests.test_k_means"
SET_ASIDE = ("test_kmeans_elkan_results",)


def _about_minibatch(item: Any) -> bool:
    return "minibatch" in item.name.lower() or "MiniBatchKMeans" in item.name


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    keep = [it for it in items if not _about_minibatch(it) and it.originalname not in SET_ASIDE]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[it for it in items if it not in keep])
        items[:] = keep


def main(args: list[str]) -> int:
    import pytest

    sys.path.insert(0, str(Path(__file__).parent))
    return int(pytest.main(["-p", "sklearn_suite", "-p", "no:cacheprovider", "--pyargs", SUITE, *args]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
