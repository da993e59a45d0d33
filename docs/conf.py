"""Sphinx configuration of thrifty's API reference and user guide (built by scripts/docs.sh).

The API pages are written at build time from each capability's ``__all__`` (``api/<name>.rst``), so
every public name is documented and a new export needs no edit here. A capability that cannot be
imported (``thrifty.text`` while it is being written, ``thrifty.compress`` without torch) gets a page
that says so instead of failing the build.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

project = "thrifty"
author = "thrifty authors"
copyright = "2026, thrifty authors"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "numpydoc",
    "matplotlib.sphinxext.plot_directive",
]
exclude_patterns = ["_build", "scale.md"]
html_theme = "alabaster"
html_static_path: list[str] = []
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False
plot_include_source = True
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 90)]
plot_rcparams = {"figure.figsize": (6.0, 3.6)}

CAPABILITIES = {
    "cluster": "k-means by batched Hartigan moves",
    "inference": "held-out tests of supervised subspaces",
    "dpp": "determinantal point processes: samplers, coresets, greedy selection",
    "compress": "activation compression for PyTorch training",
    "text": "the text pipeline over inference",
}


def _api_page(name: str, summary: str) -> str:
    module = f"thrifty.{name}"
    title = f"``{module}``: {summary}"
    head = f"{title}\n{'=' * len(title)}\n\n"
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        return head + f"``{module}`` could not be imported when these pages were built ({err}).\n"
    lines = [head, f".. automodule:: {module}\n   :no-members:\n\n"]
    for public in mod.__all__:
        obj = getattr(mod, public)
        if inspect.isclass(obj):
            lines.append(f".. autoclass:: {module}.{public}\n   :members:\n   :show-inheritance:\n\n")
        elif not callable(obj):  # a constant (e.g. thrifty.text.ENGLISH_STOP_WORDS)
            lines.append(f".. autodata:: {module}.{public}\n   :no-value:\n\n")
        else:
            lines.append(f".. autofunction:: {module}.{public}\n\n")
    return "".join(lines)


def _write_api_pages() -> None:
    api = Path(__file__).parent / "api"
    api.mkdir(exist_ok=True)
    for name, summary in CAPABILITIES.items():
        page = api / f"{name}.rst"
        text = _api_page(name, summary)
        if not page.exists() or page.read_text() != text:  # keep mtimes for incremental builds
            page.write_text(text)


_write_api_pages()


def _skip_inherited_machinery(app: object, what: str, name: str, obj: object, skip: bool, options: object) -> bool | None:
    """Leave out scikit-learn's generated ``set_*_request`` methods (metadata routing): their
    docstrings point into scikit-learn's own documentation."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app: object) -> None:
    app.connect("autodoc-skip-member", _skip_inherited_machinery)  # type: ignore[attr-defined]
