#!/usr/bin/env bash
# Runs the whole test suite. Installs or builds what the tests need first and
# reuses whatever is already cached, so a warm run takes a few minutes.
#
#   ./test.sh            everything (this is what .ci/run calls)
set -euo pipefail
cd "$(dirname "$0")"

# Each step prints what the one before it took, so a run says what each part costs.
t0=$SECONDS step_start=$SECONDS step_name=""
# The free disk is printed too: a clean clone's run writes about 8.5 GB of
# build output (debug, release, fuzz and the benchmark's flavours).
free_gb() { df -Pk . | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'; }
step_done() { [[ -z "$step_name" ]] || printf '== %s: %ds (%s GB free)\n' "$step_name" "$((SECONDS - step_start))" "$(free_gb)"; }
step() { step_done; step_name="$*" step_start=$SECONDS; printf '\n== %s\n' "$*"; }

step "tools"
# Debian packages the scripts use; installed only when missing, from the
# package lists already there when that works. podman and runc run the image
# (tests/image/run.sh).
missing=()
for tool in curl openssl python3 podman runc; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; }
fi
command -v go >/dev/null || { echo "go is required to build the e2e control plane" >&2; exit 1; }

step "the control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, kwok) and helm from the Go module proxy (cached)"
tests/e2e/cluster.sh build >/dev/null

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --all-targets --locked -- -D warnings
step "cargo test (unit, golden, properties, server, cli, e2e, controller e2e, the whole cluster)"
cargo test --locked --all-targets
step "sandbox-webhook test tests/fixtures (the runner users run; golden.rs runs the same code)"
cargo run --locked --quiet -- test tests/fixtures | grep -v '^ok '

step "Helm chart: lint, template, schema, hadolint, shellcheck"
tests/chart/run.sh
step "Helm chart: server-side dry-run and helm install against a real apiserver"
tests/chart/dryrun.sh
step "Helm chart: out-of-cluster install pointing at the local binary"
tests/chart/install.sh

step "Fuzzing: cargo-fuzz, 60 s over both targets; corpus replayed in release (10 ms bar)"
fuzz/run.sh

step "Benchmarks: smoke run (release builds, TLS load, RSS, flavours; fails on errors, never on speed)"
CARGO_TARGET_DIR=target bench/run.sh --smoke

step "Image: podman build of the shipped binary (the benchmark's), run as the chart runs it"
CARGO_TARGET_DIR=target tests/image/run.sh

step_done
echo
echo "test.sh: all green in $((SECONDS - t0))s"
