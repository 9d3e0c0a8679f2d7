#!/usr/bin/env bash
# Runs the whole test suite. Installs or builds what the tests need first,
# reusing anything already cached.
set -euo pipefail
cd "$(dirname "$0")"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --locked --all-targets
