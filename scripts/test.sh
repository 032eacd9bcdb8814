#!/usr/bin/env bash
# The project's test command: installs what the tests need, then runs the
# quality gates and every test. Needs only the Rust toolchain, Python 3 with
# pip, and network access to the package registries.
set -euo pipefail
cd "$(dirname "$0")/.."

# An assignment, so a failing setup stops the run (a bare eval would not).
setup_env="$(scripts/setup-test-env.sh)"
eval "$setup_env"
# Streams in the load tests use many sockets.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# Doc links must resolve: a broken one is a doc comment pointing nowhere.
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps --quiet
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
# --no-fail-fast: every test binary runs even when an earlier one fails, so
# the totals below always cover the whole suite.
cargo test --locked --workspace --all-targets --no-fail-fast 2>&1 | tee "$log" || status=$?
# Several test binaries run; close with the totals over all of them.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
