"""The README's first command, the tour, runs: every part of examples/tour.py, on a temporary output folder.

The tour's parts import the benchmarks' helpers (e.g. the compression frontier from benches/compress_gpt.py),
so a signature change there broke the tour once without any test noticing; this keeps it honest (~15 s).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["tour_kmeans", "tour_inference", "tour_dpp", "tour_compress"])
def test_tour_part_runs_and_writes_its_plot(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        part = importlib.import_module(name)
        part.run(tmp_path)
    finally:
        sys.path.remove(str(EXAMPLES))
    assert capsys.readouterr().out.strip(), f"{name} printed nothing"
    assert list(tmp_path.glob("*.png")), f"{name} wrote no plot"
