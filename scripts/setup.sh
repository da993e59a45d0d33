#!/usr/bin/env bash
# Prepare a fresh clone: a virtual environment in .venv with the Python packages the tests and the tour
# need, and thrifty's Rust extension built into it (release mode). Idempotent; the README's commands
# call it first. Needs: a Rust toolchain (cargo) and Python >= 3.10 with venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; else
    echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.thrifty-deps
want="$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  $VPY -m pip install -q --upgrade pip
  $VPY -m pip install -q "maturin>=1.5,<2" numpy scipy scikit-learn tqdm threadpoolctl \
      pytest hypothesis mypy matplotlib
  echo "$want" > "$stamp"
fi
# Build the extension in place (maturin develop installs the package in editable mode into .venv).
VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release -q 2>&1 | grep -v "^📦\|^🔗\|^🐍\|^💻\|^🛠\|^✏" || true
$VPY -c "import thrifty._core" || { echo "setup: building thrifty._core failed" >&2; exit 1; }
