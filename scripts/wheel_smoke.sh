#!/usr/bin/env bash
# The test command's packaging step (issue 19, point 7): build the wheel ONCE from this tree the way
# `pip wheel .` does (build_backend/thrifty_build.py: CMake kernels + maturin), check its contents and its
# manylinux tag (auditwheel show), install it into a fresh virtual environment and run
# tests/package/smoke_installed.py from a temporary folder, so a wheel that lacks a piece fails CI.
# Cheap: --no-build-isolation reuses .venv's build tools, build/cpp and target/ (nothing is recompiled after
# scripts/setup.sh); the fresh venv holds only the wheel (--no-deps) and reads the heavy packages (numpy, torch,
# ...) from .venv through a .pth line. Needs scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$HOME/.cargo/bin:$ROOT/.venv/bin:$PATH"
out=target/wheel-smoke
rm -rf "$out" && mkdir -p "$out/dist"
.venv/bin/python -m pip wheel . --no-build-isolation --no-deps -q -w "$out/dist" > "$out/build.log" 2>&1 \
  || { tail -n 40 "$out/build.log"; echo "wheel_smoke: building the wheel failed" >&2; exit 1; }
whl=$(ls "$out"/dist/thrifty-*.whl)
echo "wheel: $(basename "$whl")"
files=$(.venv/bin/python -m zipfile -l "$whl" | awk '{print $1}')
for f in thrifty/_core.abi3.so thrifty/libthrifty_stac_cpu.so thrifty/libthrifty_stac_cpu_avx2.so \
         thrifty/libthrifty_stac_cuda.so thrifty/_stac_build.json thrifty/py.typed; do
  grep -qx "$f" <<< "$files" || { echo "wheel_smoke: $f missing from the wheel" >&2; exit 1; }
done
case "$(basename "$whl")" in *-abi3-manylinux_*) ;; *) echo "wheel_smoke: not an abi3 manylinux wheel" >&2; exit 1;; esac
.venv/bin/auditwheel show "$whl" > "$out/auditwheel.txt" 2>&1 || { cat "$out/auditwheel.txt"; exit 1; }
tag=$(basename "$whl" .whl | awk -F- '{print $NF}')
grep -q "consistent with" "$out/auditwheel.txt" && grep -q "\"$tag\"" "$out/auditwheel.txt" \
  || { cat "$out/auditwheel.txt"; echo "wheel_smoke: auditwheel does not confirm $tag" >&2; exit 1; }
echo "auditwheel: consistent with $tag"
# a fresh environment with the wheel only; the heavy dependencies come from .venv (a plain path line, so
# .venv's own .pth files - among them the editable install of this tree - are not read)
python_bin=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
"$python_bin" -m venv --without-pip "$out/venv"
site=$("$out/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/_thrifty_smoke_deps.pth"
.venv/bin/python -m pip --python "$out/venv/bin/python" install -q --no-deps "$whl"
(cd "$(mktemp -d)" && THRIFTY_SOURCE_TREE="$ROOT" "$ROOT/$out/venv/bin/python" "$ROOT/tests/package/smoke_installed.py")
