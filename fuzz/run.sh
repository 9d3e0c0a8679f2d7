#!/usr/bin/env bash
# The fuzzing step of ./test.sh: installs cargo-fuzz if it is missing, fuzzes
# each target for its share of FUZZ_SECONDS (default 60 in total), then
# replays the committed corpus, this run's new inputs and the benchmark
# reviews in a release build, which fails on a broken invariant or a single
# review slower than 10 ms. A crash fails the step (libFuzzer exits non-zero
# and leaves the input in fuzz/artifacts/<target>/).
#
#   fuzz/run.sh                 60 s in total, then the replay
#   FUZZ_SECONDS=1800 fuzz/run.sh
set -euo pipefail
cd "$(dirname "$0")"

targets=(review_raw review_structured)
total=${FUZZ_SECONDS:-60}
per_target=$((total / ${#targets[@]}))

rustup run nightly rustc --version >/dev/null 2>&1 ||
    rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

# No sanitizer: the crate's review path has no unsafe code, and without
# AddressSanitizer each run is about twice as fast. Debug assertions (and so
# overflow checks) stay on, as cargo-fuzz builds by default.
nice cargo +nightly fuzz build -s none

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in "${targets[@]}"; do
    mkdir -p "$scratch/$target" "corpus/$target"
    # New inputs go to the scratch directory (the first one given), so the
    # committed corpus stays as it is. -max_len is MAX_LEN in src/lib.rs.
    log="$scratch/$target.log"
    if ! nice cargo +nightly fuzz run -s none "$target" "$scratch/$target" "corpus/$target" -- \
        -dict=dict -max_total_time="$per_target" -timeout=10 -max_len=16384 \
        -print_final_stats=1 >"$log" 2>&1; then
        tail -n 80 "$log" >&2
        echo "fuzz/run.sh: $target failed; the input is in fuzz/artifacts/$target/" >&2
        exit 1
    fi
    echo "$target:"
    grep -E '^#[0-9]+.*(INITED|DONE)|^stat::number_of_executed_units|^Done' "$log"
done

nice cargo build --release --example replay
target/release/examples/replay \
    --raw corpus/review_raw --raw "$scratch/review_raw" --raw ../bench/reviews \
    --structured corpus/review_structured --structured "$scratch/review_structured" \
    --fixtures ../tests/fixtures
