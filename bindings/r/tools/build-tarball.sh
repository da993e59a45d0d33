#!/bin/sh
# Build a self-contained, offline-installable source tarball of the R package (CRAN's policy for
# Rust packages, as extendr and savvy do it):
#   - copy the Rust sources the package builds from (thrifty-core, thrifty-capi without its tests
#     and dev-dependencies, Cargo.lock) into bindings/r/src/rust, in a workspace of those two crates;
#   - `cargo vendor` every crate they need into src/rust/vendor (the .cargo-checksum.json files
#     kept, so cargo verifies each file) and pack it as src/rust/vendor.tar.xz (the tarball then
#     holds no long paths or hidden files; configure unpacks it);
#   - write src/rust/vendor-config.toml, which configure installs as src/rust/.cargo/config.toml:
#     crates-io replaced by the vendor folder, so `cargo build --offline` needs no network and no
#     cargo home;
#   - run R CMD build in OUTDIR, then remove the copy again (so a plain `R CMD INSTALL bindings/r`
#     keeps building from the repository).
# Needs cargo and the crates in the local cargo registry once (scripts/setup.sh fetches them).
# Usage: sh bindings/r/tools/build-tarball.sh [OUTDIR]   (then: R CMD check OUTDIR/thrifty_*.tar.gz)
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)
outdir=$(mkdir -p "${1:-.}" && cd "${1:-.}" && pwd)
CARGO=${CARGO:-cargo}
command -v "$CARGO" >/dev/null 2>&1 || CARGO="$HOME/.cargo/bin/cargo"
dst="$here/src/rust"
trap 'rm -rf "$dst"' EXIT
rm -rf "$dst"
mkdir -p "$dst/rust"
cp -R "$repo/rust/thrifty-core" "$repo/rust/thrifty-capi" "$dst/rust/"
rm -rf "$dst/rust/thrifty-capi/tests" "$dst/rust/thrifty-core/target" "$dst/rust/thrifty-capi/target"
# the header test (cbindgen) is a dev-dependency: not needed to build, so not vendored
sed -e '/^\[dev-dependencies\]/,/^\[/{/^\[dev-dependencies\]/d;/^\[/!d;}' "$repo/rust/thrifty-capi/Cargo.toml" \
  > "$dst/rust/thrifty-capi/Cargo.toml"
cp "$repo/Cargo.lock" "$dst/"
sed -e 's|members = .*|members = ["rust/thrifty-core", "rust/thrifty-capi"]|' "$repo/Cargo.toml" > "$dst/Cargo.toml"
echo "thrifty: vendoring the crates with $("$CARGO" --version)"
"$CARGO" vendor --offline --versioned-dirs --manifest-path "$dst/Cargo.toml" "$dst/vendor" > /dev/null
cat > "$dst/vendor-config.toml" <<'TOML'
# Installed as src/rust/.cargo/config.toml by configure: every crate comes from vendor/
# (unpacked from vendor.tar.xz), checked against its .cargo-checksum.json; no network, no cargo home.
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "vendor"
TOML
(cd "$dst" && tar -cJf vendor.tar.xz vendor && rm -rf vendor)
echo "thrifty: $(du -h "$dst/vendor.tar.xz" | cut -f1) of vendored crates"
cd "$outdir" && R CMD build "$here"
