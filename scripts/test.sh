#!/usr/bin/env bash
# The whole test suite, every layer: lints (cargo fmt, clippy, ruff), Rust core (cargo test), type
# checks (mypy --strict on the package), Python API (pytest + hypothesis). Sets itself up first
# (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# thrifty.compress: the CUDA kernels must compile here too (nvcc from PyPI; no GPU needed), so a CUDA
# build error fails the test command.
export THRIFTY_REQUIRE_CUDA=1
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

# --- lint gate (issue 10, item 20): formatting, clippy and ruff must be clean ---------------------
echo "== lint: cargo fmt --check, cargo clippy -D warnings, ruff check =="
cargo fmt --all --check
cargo clippy --workspace --all-targets -q -- -D warnings
.venv/bin/python -m ruff check python tests benches examples

echo "== cargo test (Rust core) =="
cargo test --release -p thrifty-core -q 2>&1 | tail -n 25

echo "== ctest (C++ kernels of thrifty.compress) =="
PATH="$PWD/.venv/bin:$PATH" ctest --test-dir build/cpp --output-on-failure

# --- C ABI and R package (rust/thrifty-capi, bindings/r) ---------------------------------------
echo "== C ABI: header staleness test + C test program under ASan/UBSan =="
cargo test --release -p thrifty-capi -q --lib 2>&1 | tail -n 2
bash rust/thrifty-capi/tests/c/run.sh
if command -v Rscript >/dev/null 2>&1 && Rscript -e 'quit(status = !requireNamespace("testthat", quietly = TRUE))' >/dev/null 2>&1; then
  echo "== R package: R CMD INSTALL bindings/r + testthat (parity fixtures from .venv's thrifty) =="
  rlib=target/r-library
  mkdir -p "$rlib"
  THRIFTY_SOURCE_DIR="$PWD" R CMD INSTALL --no-test-load --library="$rlib" bindings/r > target/r-install.log 2>&1 \
    || { tail -n 30 target/r-install.log; exit 1; }
  (cd bindings/r/tests && TZ=UTC THRIFTY_PYTHON="$PWD/../../../.venv/bin/python" R_LIBS="$PWD/../../../$rlib" \
    Rscript -e 'library(testthat); library(thrifty); res <- test_dir("testthat", reporter = "summary", stop_on_failure = TRUE)')
else
  echo "== R package: skipped (R or testthat missing; scripts/setup.sh installs them) =="
fi

# --- packaging (issue 19, point 7): the wheel users install, built once, installed in a fresh venv and
# smoke-tested from outside the tree (scripts/wheel_smoke.sh; ~1 min, nothing recompiled after setup.sh) ------
echo "== wheel: build once, auditwheel show, install in a fresh venv, smoke test from outside the tree =="
bash scripts/wheel_smoke.sh | grep -v "^ \{6,\}\|^$\|^System:\|^Python dependencies:\|^Native backends:"

echo "== mypy --strict (python/thrifty) =="
.venv/bin/python -m mypy

echo "== doctests (the docstring examples of python/thrifty) =="
.venv/bin/python -m pytest -q -p no:cacheprovider --doctest-modules python/thrifty 2>&1 | tail -n 3

echo "== pytest (Python API) =="
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
