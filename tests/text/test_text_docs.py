"""The README's text-pipeline section runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_text_examples_run() -> None:
    text = README.read_text(encoding="utf-8")
    assert "## Text pipeline (thrifty.text)" in text
    section = text.split("## Text pipeline (thrifty.text)", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
