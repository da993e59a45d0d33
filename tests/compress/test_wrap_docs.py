"""The README's compression section and the docstring examples of thrifty.compress's API run as written."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import thrifty.compress
from thrifty.compress import _adapters, _lean, _linear, _report, _wrap
from thrifty.compress import _kernels as K

pytestmark = pytest.mark.skipif(not K.backends()["cpu"], reason="thrifty._stac_cpu is not built")

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_compression_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = README.read_text(encoding="utf-8")
    heading = "## Activation compression (thrifty.compress)"
    assert heading in text
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert blocks
    for block in blocks:
        scope: dict[str, object] = {}
        exec(compile(block, str(README), "exec"), scope)  # noqa: S102 - the README example, run as written
    printed = capsys.readouterr().out
    assert "CompressionReport" in printed
    report = scope["report"]
    assert isinstance(report, thrifty.compress.CompressionReport) and report.ratio >= 7.9


def test_docstring_examples() -> None:
    for module in (thrifty.compress, _linear, _wrap, _report, _adapters, _lean):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0
    assert all(doctest.testmod(m).attempted > 0 for m in (_linear, _wrap, _report, _adapters, _lean))
