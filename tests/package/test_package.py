"""Package-level behaviour: lazy subpackages and show_versions (issue 10, item 16)."""

from __future__ import annotations

import subprocess
import sys

import thrifty


def test_submodules_load_lazily_on_attribute_access() -> None:
    # A fresh interpreter: `import thrifty` alone must not import the capabilities, and the attribute must work.
    code = (
        "import sys, thrifty\n"
        "assert 'thrifty.cluster' not in sys.modules\n"
        "assert thrifty.cluster.HartiganKMeans.__name__ == 'HartiganKMeans'\n"
        "assert thrifty.inference.subspace_test is not None and thrifty.dpp.ProjectionDPP is not None\n"
        "assert 'cluster' in dir(thrifty)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_attribute_raises_attribute_error() -> None:
    try:
        thrifty.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_show_versions_prints_every_section(capsys) -> None:  # type: ignore[no-untyped-def]
    thrifty.show_versions()
    out = capsys.readouterr().out
    for section in ("System:", "Python dependencies:", "Native backends:"):
        assert section in out
    assert thrifty.__version__ in out
    assert "numpy" in out and "thrifty._core" in out
