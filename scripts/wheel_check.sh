#!/usr/bin/env bash
# Issue 19's packaging acceptance, measured from a CLEAN CLONE of the committed branch (slow: two full builds of
# the Rust core and the kernels; run it niced, by hand - it is not part of scripts/test.sh, which runs the
# cheap scripts/wheel_smoke.sh instead):
#   1. `pip wheel .` (isolated build: maturin, CMake, Ninja and NVIDIA's nvcc come from PyPI), the wheel's file
#      list, its tag and `auditwheel show`;
#   2. the wheel installed in a fresh virtual environment (--no-deps; numpy/torch/... read from .venv through a
#      .pth line, to avoid a 3 GB download) and, from another folder, thrifty.compress.backends();
#   3. benches/wheel_linear_step.py: the Linear step in that environment vs the source-tree build (.venv);
#   4. the sdist (the build backend's build_sdist hook), its file list, `pip install` of it into another fresh
#      environment and backends() there.
# Output: benches/output/wheel_check.txt (override with OUT=...). WORK=... sets the scratch folder.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/benches/output/wheel_check.txt}
WORK=${WORK:-/tmp/thrifty-wheel-check}
export PATH="$HOME/.cargo/bin:$PATH"
PY=$ROOT/.venv/bin/python
branch=$(git rev-parse --abbrev-ref HEAD)
rm -rf "$WORK" && mkdir -p "$WORK"
: > "$OUT"
log() { echo "$@" | tee -a "$OUT"; }
run() { log "\$ $*"; "$@" 2>&1 | tee -a "$OUT"; }
fresh_venv() {  # fresh_venv DIR: a venv without pip whose dependencies are .venv's site-packages
  "$($PY -c 'import sys; print(sys._base_executable)')" -m venv --without-pip "$1"
  $PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    > "$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_thrifty_deps.pth"
}
BACKENDS='import thrifty, thrifty.compress as c; print("thrifty from", thrifty.__file__); print(c.backends())'

log "# wheel_check.sh $(date -u +%FT%TZ), branch $branch at $(git rev-parse --short HEAD), $(nproc) cores (shared)"
git clone -q --branch "$branch" --single-branch "$ROOT" "$WORK/src"
cd "$WORK/src"
log "## 1. pip wheel . from a clean clone (isolated build)"
start=$(date +%s)
nice -n 5 $PY -m pip wheel . --no-deps -w "$WORK/dist" > "$WORK/wheel-build.log" 2>&1 || { tail -n 40 "$WORK/wheel-build.log"; exit 1; }
log "built in $(( $(date +%s) - start )) s"
whl=$(ls "$WORK"/dist/thrifty-*.whl)
log "wheel: $(basename "$whl") ($(du -k "$whl" | cut -f1) KiB)"
run $PY -m zipfile -l "$whl"
run "$ROOT/.venv/bin/auditwheel" show "$whl"

log "## 2. installed in a fresh venv, run from another folder"
fresh_venv "$WORK/venv-wheel"
$PY -m pip --python "$WORK/venv-wheel/bin/python" install -q --no-deps "$whl"
cd "$WORK" && run "$WORK/venv-wheel/bin/python" -c "$BACKENDS"

log "## 3. the Linear step: installed wheel vs source-tree build (same run)"
run nice -n 5 "$PY" "$ROOT/benches/wheel_linear_step.py" --python "$WORK/venv-wheel/bin/python" --python "$PY"

log "## 4. the sdist: file list, pip install into a fresh venv, backends"
cd "$WORK/src"
sdist=$($PY -c "import sys; sys.path.insert(0, 'build_backend'); import thrifty_build; print(thrifty_build.build_sdist('$WORK/sdist'))" | tail -n 1)
log "sdist: $sdist ($(du -k "$WORK/sdist/$sdist" | cut -f1) KiB)"
run tar tzf "$WORK/sdist/$sdist"
fresh_venv "$WORK/venv-sdist"
start=$(date +%s)
nice -n 5 $PY -m pip --python "$WORK/venv-sdist/bin/python" install --no-deps "$WORK/sdist/$sdist" > "$WORK/sdist-install.log" 2>&1 \
  || { tail -n 40 "$WORK/sdist-install.log"; exit 1; }
log "sdist installed in $(( $(date +%s) - start )) s"
cd "$WORK" && run "$WORK/venv-sdist/bin/python" -c "$BACKENDS"
log "# done $(date -u +%FT%TZ)"
