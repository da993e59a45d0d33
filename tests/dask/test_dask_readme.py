"""The README's Dask section runs as written (its own in-process LocalCluster)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("dask.array")
pytest.importorskip("distributed")

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_dask_example_runs() -> None:
    text = README.read_text(encoding="utf-8")
    heading = "## Beyond one machine (Dask)"
    assert heading in text
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})  # noqa: S102 - the README example, run as written
