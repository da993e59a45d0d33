#!/bin/sh
# Build a self-contained source tarball of the R package for R CMD check (which unpacks it away from
# the repository): copy the Rust sources the package builds from (thrifty-core, thrifty-capi,
# Cargo.lock) into bindings/r/src/rust, run R CMD build in OUTDIR, then remove the copy again (so a
# plain `R CMD INSTALL bindings/r` keeps building from the repository). Crates still come from the
# local cargo registry (offline build); a CRAN submission would add `cargo vendor` here.
# Usage: sh bindings/r/tools/build-tarball.sh [OUTDIR]   (then: R CMD check OUTDIR/thrifty_*.tar.gz)
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)
outdir=$(mkdir -p "${1:-.}" && cd "${1:-.}" && pwd)
dst="$here/src/rust"
trap 'rm -rf "$dst"' EXIT
rm -rf "$dst"
mkdir -p "$dst/rust"
cp -R "$repo/rust/thrifty-core" "$repo/rust/thrifty-capi" "$dst/rust/"
rm -rf "$dst/rust/thrifty-capi/tests"
cp "$repo/Cargo.lock" "$dst/"
sed -e 's|members = .*|members = ["rust/thrifty-core", "rust/thrifty-capi"]|' "$repo/Cargo.toml" > "$dst/Cargo.toml"
cd "$outdir" && R CMD build "$here"
