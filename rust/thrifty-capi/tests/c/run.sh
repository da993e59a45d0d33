#!/usr/bin/env bash
# Build the C ABI (release staticlib) and run the C test program under AddressSanitizer +
# UndefinedBehaviorSanitizer (leak checking on). Called by scripts/test.sh; needs cargo and a C compiler.
# (The test provokes one Rust panic on purpose, caught at the boundary: its message on stderr is expected.)
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p thrifty-capi -j 2
CC=${CC:-cc}
out=target/capi-test
mkdir -p "$out"
$CC -std=c11 -Wall -Wextra -Werror -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
  -I rust/thrifty-capi/include rust/thrifty-capi/tests/c/test_capi.c \
  target/release/libthrifty_capi.a -lpthread -ldl -lm -o "$out/test_capi"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  RUST_BACKTRACE=0 "$out/test_capi"
