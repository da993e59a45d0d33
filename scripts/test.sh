#!/usr/bin/env bash
# The whole test suite, every layer: Rust core (cargo test), type checks (mypy --strict on the
# package), Python API (pytest + hypothesis). Sets itself up first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# thrifty.compress: the CUDA kernels must compile here too (nvcc from PyPI; no GPU needed), so a CUDA
# build error fails the test command.
export THRIFTY_REQUIRE_CUDA=1
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

echo "== cargo test (Rust core) =="
cargo test --release -p thrifty-core -q 2>&1 | tail -n 25

echo "== ctest (C++ kernels of thrifty.compress) =="
PATH="$PWD/.venv/bin:$PATH" ctest --test-dir build/cpp --output-on-failure

echo "== mypy --strict (python/thrifty) =="
.venv/bin/python -m mypy

echo "== pytest (Python API) =="
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
