"""The README's DPP section and the docstring examples of thrifty.dpp run as written."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

import thrifty.dpp._coreset
import thrifty.dpp._ensemble
import thrifty.dpp._greedy
import thrifty.dpp._kernels
import thrifty.dpp._projection

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_dpp_examples_run() -> None:
    text = README.read_text(encoding="utf-8")
    assert "## DPP sampling (thrifty.dpp)" in text
    section = text.split("## DPP sampling (thrifty.dpp)", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 3
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


@pytest.mark.parametrize(
    "module",
    [thrifty.dpp._projection, thrifty.dpp._ensemble, thrifty.dpp._kernels, thrifty.dpp._coreset, thrifty.dpp._greedy],
)
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)  # type: ignore[arg-type]
    assert result.failed == 0
