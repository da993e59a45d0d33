#!/usr/bin/env bash
# Install the peers the comparison scripts time against, into .venv (run scripts/setup.sh first).
# Everything comes through pip from the package index the machine is configured with; no other host.
# hartigan-kmeans 0.0.6 (IBM, sequential Hartigan) has no wheel for Python >= 3.11 and its sdist
# misses the requirements.txt its setup.py reads, so pip's own metadata step fails: pip unpacks the
# sdist into a kept build folder (--no-clean), we add the missing file there and install from it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if ! $PY -c "import hkmeans" 2>/dev/null; then
  if ! $PY -m pip install -q hartigan-kmeans 2>/dev/null; then
    tmp=$(mktemp -d)
    TMPDIR="$tmp" $PY -m pip download -q --no-deps --no-binary :all: --no-build-isolation --no-clean \
        -d "$tmp/dl" hartigan-kmeans==0.0.6 >/dev/null 2>&1 || true
    src=$(dirname "$(find "$tmp" -path '*hartigan-kmeans*' -name setup.py | head -n 1)")
    [ -f "$src/setup.py" ] || { echo "install_peers: pip could not fetch the hartigan-kmeans sdist" >&2; exit 1; }
    printf "numpy\nscikit-learn\n" > "$src/requirements.txt"
    $PY -m pip install -q "$src"
    rm -rf "$tmp"
  fi
fi
$PY -m pip install -q asv plskit dppy dask-ml faiss-cpu
