#!/usr/bin/env bash
# Runs the tests, in three tiers. Installs or builds what a tier needs first
# and reuses whatever is already cached.
#
#   ./test.sh quick   fmt, clippy (the fuzz crate too), unit, golden,
#                     properties, the CLI, the socket-level server tests and
#                     the fuzzer's generator (cargo only; ~3 min warm)
#   ./test.sh         quick, then everything else that proves behaviour: the
#                     attack tests, the e2e suites against a real control
#                     plane and a real node, the Helm chart and the image
#   ./test.sh full    all of that, then the fuzzing run and the benchmark
#                     smoke run (this is what .ci/run calls)
set -euo pipefail
cd "$(dirname "$0")"

tier=${1:-default}
case $tier in
quick | default | full) ;;
*)
    echo "usage: $0 [quick|default|full]" >&2
    exit 2
    ;;
esac

# The test targets of each tier (Cargo.toml's [[test]]s). quick holds what
# needs no control plane and no timing bounds; the attack tests measure
# latency under load, so they run in the default tier, after quick.
QUICK_TARGETS=(--lib --bins --test quick --test controller_memory)
DEFAULT_TARGETS=(--bench mutation --test attacks --test upstream --test e2e --test controller_e2e --test cluster_e2e)

# Each step prints what the one before it took, so a run says what each part costs.
t0=$SECONDS step_start=$SECONDS step_name="" step_key=""
# The free disk is printed too: a clean clone's run writes about 8.5 GB of
# build output (debug, release, fuzz and the benchmark's flavours).
free_gb() { df -Pk . | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'; }
declare -A took=()
step_done() {
    [[ -z "$step_name" ]] && return
    took[$step_key]=$((SECONDS - step_start))
    printf '== %s: %ds (%s GB free)\n' "$step_name" "${took[$step_key]}" "$(free_gb)"
}
# step KEY DESCRIPTION: KEY names the step in the cost summary at the end.
step() { step_done; step_key="$1" step_name="$2" step_start=$SECONDS; printf '\n== %s\n' "$2"; }

# lane KEY DESCRIPTION CMD...: run CMD in the background, in a process group
# of its own, its output kept until `lane_join KEY` prints it whole and fails
# when CMD failed. A run that stops early stops its lanes too.
declare -A lane_pid=() lane_log=() lane_start=()
lane() {
    local key="$1" what="$2"; shift 2
    step_done
    step_name=""
    lane_log[$key]="$(mktemp)" lane_start[$key]=$SECONDS
    setsid "$@" >"${lane_log[$key]}" 2>&1 &
    lane_pid[$key]=$!
    printf '\n== %s: started as a lane beside the steps below\n' "$what"
}
lane_join() {
    local key="$1" rc=0
    wait "${lane_pid[$key]}" || rc=$?
    cat "${lane_log[$key]}"
    rm -f "${lane_log[$key]}"
    unset "lane_pid[$key]"
    printf '== the lane took %ds in all (exit %d)\n' "$((SECONDS - lane_start[$key]))" "$rc"
    return "$rc"
}
stop_lanes() {
    local key
    for key in "${!lane_pid[@]}"; do
        kill -TERM -- "-${lane_pid[$key]}" 2>/dev/null || true
        echo "test.sh: stopped the lane $key; its output:" >&2
        cat "${lane_log[$key]}" >&2 || true
        rm -f "${lane_log[$key]}"
    done
}
node_log=""
trap 'stop_lanes; rm -f "$node_log"' EXIT

step fmt "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check
step clippy "cargo clippy (pedantic: Cargo.toml's [lints]), the crate and the fuzz crate"
cargo clippy --workspace --all-targets --locked -- -D warnings
# node_e2e is not among --all-targets' tests (test = false: it has a step below).
cargo clippy --test node_e2e --locked -- -D warnings
# The fuzz crate is its own workspace (fuzz/Cargo.toml), linted the same.
cargo clippy --manifest-path fuzz/Cargo.toml --all-targets --locked -- -D warnings
step test "cargo test: unit, golden, properties, CLI, socket-level server tests, the fuzzer's generator"
cargo test --locked "${QUICK_TARGETS[@]}"
# The structured fuzzer's own tests (its keys come from the one list of
# annotation names); the fuzzing itself is the full tier's.
cargo test --manifest-path fuzz/Cargo.toml --lib --locked
step fixtures "sandbox-webhook test tests/fixtures (the runner users run; golden.rs runs the same code)"
cargo run --locked --quiet -- test tests/fixtures | grep -v '^ok '

finish() {
    step_done
    echo
    echo "test.sh $tier: all green in $((SECONDS - t0))s"
}
if [[ $tier == quick ]]; then
    finish
    exit 0
fi

step tools "tools"
# Debian packages the scripts use; installed only when missing, from the
# package lists already there when that works. podman and runc run the image
# (tests/image/run.sh) and the real node's containers, with the CNI plugins
# (tests/e2e/cluster.sh).
missing=()
for tool in curl openssl python3 podman runc; do command -v "$tool" >/dev/null || missing+=("$tool"); done
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; }
fi
command -v go >/dev/null || { echo "go is required to build the e2e control plane" >&2; exit 1; }

step node-build "the real node: containerd (Go module proxy), its stand-in programs and images (podman, busybox-static) (cached)"
tests/e2e/cluster.sh build-node
step plane-build "the control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, the kubelet, kwok) and helm from the Go module proxy (cached)"
tests/e2e/cluster.sh build >/dev/null
# The real stack beside the product (tests/e2e/README.md): agent-sandbox's
# controller and CRDs, which cluster.sh installs with the real node and in
# `up`, and OpenSandbox's own server, which node_e2e runs as a process.
step agent-sandbox-build "agent-sandbox's controller v1.0.1 and its CRDs from the Go module proxy (cached)"
tests/e2e/cluster.sh build-agent-sandbox >/dev/null
step venv "OpenSandbox's server: opensandbox-server 1.1.1 and its pinned dependencies in a virtualenv, from PyPI (cached)"
tests/upstream/server-venv.sh >/dev/null

step build-tests "cargo test --no-run: the default tier's test binaries (node_e2e's too)"
cargo test --locked --no-run "${DEFAULT_TARGETS[@]}" --test node_e2e

step attacks "cargo test: the attack tests, alone (each measures its own attack under load)"
cargo test --locked --test attacks

# The whole-cluster suite runs as a lane beside the steps up to the image:
# like them, it spends nearly all its time waiting on a control plane (a
# tenth of the two cores), on its own plane, node bridge and ports.
lane cluster-e2e "cargo test: the whole cluster (cluster_e2e)" cargo test --locked --test cluster_e2e

step test-e2e "cargo test: the benchmarks in test mode, the differential suite against OpenSandbox's server, the e2e suites (webhook, controller)"
cargo test --locked --bench mutation --test upstream --test e2e --test controller_e2e

step chart "Helm chart: lint, template, schema, hadolint, shellcheck"
tests/chart/run.sh
step dryrun "Helm chart: server-side dry-run and helm install against a real apiserver"
tests/chart/dryrun.sh
step install "Helm chart: out-of-cluster install pointing at the local binary"
tests/chart/install.sh

step cluster-e2e "the whole cluster (cluster_e2e): waiting for its lane, then its output"
lane_join cluster-e2e

step image "Image: podman build of the shipped binary (the benchmark's), run as the chart runs it"
CARGO_TARGET_DIR=target tests/image/run.sh

step node "The product on a real node: helm install of the image, sandboxes running, expiry, rollout and rotation, and the real stack (agent-sandbox, OpenSandbox's server) (cargo test --test node_e2e)"
node_log="$(mktemp)"
CARGO_TARGET_DIR=target cargo test --locked --test node_e2e 2>&1 | tee "$node_log"

# What the real node costs: its build (containerd, stand-ins, images; the
# kubelet is compiled inside the Kubernetes build above, a re-link when the
# build cache holds the rest) and its suite (plane and node start, image
# import, helm install, the scenarios, teardown); and what the real stack
# costs: its builds and its scenarios.
node_cost() {
    echo "test.sh: the real node took ${took[node-build]}s to build (0-1 s when cached) and its suite ${took[node]}s"
    # The stack_* scenarios of node_e2e (agent-sandbox and OpenSandbox's
    # server): the sum of the times the suite prints for them.
    local stack
    stack="$(awk '/^test stack_.* \.\.\. ok \(/ { gsub(/[()s]/, "", $NF); t += $NF; n++ }
                  END { printf "%.0fs over %d scenarios", t, n }' "$node_log")"
    echo "test.sh: the real stack took ${took[agent-sandbox-build]}s to build agent-sandbox's controller and ${took[venv]}s for OpenSandbox's server's virtualenv (0-1 s each when cached); its scenarios (node_e2e stack_*) $stack"
}
if [[ $tier == default ]]; then
    finish
    node_cost
    exit 0
fi

step fuzz "Fuzzing: cargo-fuzz, 60 s over both targets; corpus replayed in release (10 ms bar)"
fuzz/run.sh

step bench "Benchmarks: smoke run (release builds, TLS load, RSS, flavours; fails on errors, never on speed)"
CARGO_TARGET_DIR=target bench/run.sh --smoke

finish
node_cost
