"""The README's k-means section and the docstring examples of thrifty.cluster run as written."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import thrifty.cluster
import thrifty.cluster._hartigan

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_kmeans_example_runs() -> None:
    text = README.read_text(encoding="utf-8")
    heading = "## Batched Hartigan k-means (`thrifty.cluster`)"
    assert heading in text
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_docstring_examples() -> None:
    for module in (thrifty.cluster, thrifty.cluster._hartigan):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0
