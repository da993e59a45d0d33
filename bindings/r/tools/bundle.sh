#!/bin/sh
# Copy the Rust sources the package builds from (thrifty-core, thrifty-capi, Cargo.lock) into
# bindings/r/src/rust, so that `R CMD build bindings/r` makes a self-contained tarball (R CMD check
# unpacks it elsewhere). Dependencies still come from the local cargo registry (offline build);
# a CRAN submission would add `cargo vendor` here. Usage: sh bindings/r/tools/bundle.sh
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)
dst="$here/src/rust"
rm -rf "$dst"
mkdir -p "$dst/rust"
cp -R "$repo/rust/thrifty-core" "$repo/rust/thrifty-capi" "$dst/rust/"
rm -rf "$dst/rust/thrifty-capi/tests"
cp "$repo/Cargo.lock" "$dst/"
sed -e 's|members = .*|members = ["rust/thrifty-core", "rust/thrifty-capi"]|' "$repo/Cargo.toml" > "$dst/Cargo.toml"
echo "bundled the Rust sources into $dst"
