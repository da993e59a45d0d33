#!/usr/bin/env bash
# Build the API reference and user guide (docs/) with Sphinx + numpydoc into docs/_build/html,
# warnings as errors. The API pages are generated from each capability's __all__ (docs/conf.py);
# the guide's plots are made at build time by matplotlib's plot directive.
# Usage: bash scripts/docs.sh   (needs .venv with the `docs` extra: scripts/setup.sh installs it)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export MPLBACKEND=Agg
"$PY" -m sphinx -W --keep-going -q -b html docs docs/_build/html
echo "docs: $(find docs/_build/html -name '*.html' | wc -l) HTML pages in docs/_build/html (open docs/_build/html/index.html)"
