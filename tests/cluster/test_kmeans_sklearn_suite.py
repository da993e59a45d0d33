"""scikit-learn's own KMeans test file, with HartiganKMeans as ``KMeans`` (``sklearn_suite.py``).

Every one of its 153 tests that concern KMeans (MiniBatchKMeans' set aside, and the 24
``test_kmeans_elkan_results`` cases, which compare the default algorithm with Elkan's: our default
is Hartigan's by design) must pass. It runs in a subprocess, so the replacement of
``sklearn.cluster.KMeans`` never leaks into the other tests.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn.cluster.tests.test_k_means")

SUITE = Path(__file__).with_name("sklearn_suite.py")


def test_scikit_learns_kmeans_suite_passes_with_hartigan_kmeans_as_kmeans() -> None:
    out = subprocess.run(
        [sys.executable, str(SUITE), "-q", "-p", "no:randomly"], capture_output=True, text=True, timeout=600
    )
    summary = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-2000:]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|error|errors)", summary)}
    failed = [line for line in out.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert counts.get("passed", 0) >= 153, (summary, failed)
    assert out.returncode == 0, (summary, failed)
