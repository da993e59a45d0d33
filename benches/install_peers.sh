#!/usr/bin/env bash
# Install the peers the comparison scripts time against, into .venv (run scripts/setup.sh first).
# hartigan-kmeans 0.0.6 (IBM, sequential Hartigan) has no wheel for Python >= 3.11 and its sdist
# misses the requirements.txt its setup.py reads: build it from the sdist with that file added.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if ! $PY -c "import hkmeans" 2>/dev/null; then
  if ! $PY -m pip install -q hartigan-kmeans 2>/dev/null; then
    tmp=$(mktemp -d)
    (cd "$tmp" && $PY -m pip download -q --no-deps --no-build-isolation --no-binary :all: hartigan-kmeans==0.0.6 2>/dev/null || true)
    if ! ls "$tmp"/*.tar.gz >/dev/null 2>&1; then
      url=$(curl -s https://pypi.org/simple/hartigan-kmeans/ | grep -o 'href="[^"]*hartigan-kmeans-0.0.6.tar.gz' | sed 's/href="//')
      (cd "$tmp" && curl -sSLO "$url")
    fi
    tar xzf "$tmp"/*.tar.gz -C "$tmp"
    printf "numpy\nscikit-learn\n" > "$tmp"/hartigan-kmeans-0.0.6/requirements.txt
    $PY -m pip install -q "$tmp"/hartigan-kmeans-0.0.6
  fi
fi
$PY -m pip install -q asv plskit dppy
