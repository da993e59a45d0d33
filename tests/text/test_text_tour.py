"""The tour's text part runs on a quick subset (every 40th VADER word) and writes its plot."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_tour_text_runs_and_writes_its_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        part = importlib.import_module("tour_text")
        part.run(tmp_path, step=40, n_perm=100)
    finally:
        sys.path.remove(str(EXAMPLES))
    out = capsys.readouterr().out
    if out.startswith("skipped"):
        pytest.skip(out.strip())
    assert "K = 3: r^2" in out and "varimax axes" in out
    assert (tmp_path / "text_vader_poles.png").exists()
