#!/usr/bin/env bash
# The scale benchmark (issues 18 and 33): the whole product (tests/e2e/cluster.sh
# up, release build) on enough kwok nodes for PODS sandbox pods (1,000 pods a
# node, 60 % linux/amd64, 40 % linux/arm64); the pods created as fast as the
# apiserver takes them, in two halves, then EXPIRING of them renewed (90 s
# ahead) to expire within one minute. Prints, from the same run:
#   - create latency through the apiserver, sandboxes against plain pods;
#   - the webhook's CPU seconds per 1,000 admissions;
#   - the controller's RSS idle, with half and with all the pods cached;
#   - what a streaming list of every sandbox costs, whole pods and metadata
#     only (the two watches the controller could use);
#   - controller start-up until its cache holds every pod, streaming list
#     (the default, where served) and LIST, with its RSS and peak;
#   - removal delay after expiry (p50/p99/max), early removals, and API
#     requests per expired pod.
# With BASELINE=REV (a git revision: c5fdd45, main) the controller built from
# REV runs beside this one on the same cluster, and every controller figure
# is printed for both (REV's with its own expiring group of pods). The
# baseline goes first in each phase; FIRST=this puts this build first, to
# tell a build's figure from the order's (the cluster is busier later).
# A benchmark, not a test: it fails only on errors.
#
#   bench/scale.sh [PODS [EXPIRING]]          defaults 50000 10000
#   BASELINE=c5fdd45 bench/scale.sh 100000    # issue 33's run (docs/performance.md)
#
# Everything runs on 127.0.0.1 and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
PODS="${1:-50000}" EXPIRING="${2:-10000}" BASELINE="${BASELINE:-}"
HALF=$((PODS / 2))
# shellcheck source=bench/cluster-lib.sh
. bench/cluster-lib.sh
[[ -n "$BASELINE" ]] && baseline_build "$BASELINE"
release_build scale
SCALE="$EXAMPLE"
REV="$("$BIN" --version | sed -n 's/.*(\(.*\))$/\1/p')"
[[ -z "$BASELINE" || "$("$BASE_BIN" --version)" != "$("$BIN" --version)" ]] \
    || { echo "the baseline and this build are the same binary ($REV)" >&2; exit 1; }

# Nodes for every pod (one plain pod per 9 sandboxes) with a tenth to spare.
ALL_PODS=$((PODS + PODS / 9 + 1))
NODES=$(((ALL_PODS * 11 / 10 + 999) / 1000))
AMD=$((NODES * 6 / 10))
t0=$SECONDS
CLUSTER_NODES="linux/amd64=$AMD linux/arm64=$((NODES - AMD))" CLUSTER_NODE_PODS=1000 \
    SANDBOX_WEBHOOK="$BIN" tests/e2e/cluster.sh up "$WORK/cluster" >/dev/null
C="$WORK/cluster"
var() { sed -n "s/^$1=//p" "$C/cluster.env"; }
pid_of() { awk -v n="$1" '$1 == n { print $2 }' "$C/pids"; }
metric() { curl -sf "http://$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
# Pods in a controller's cache (`watched_pods` before issue 33).
cached() {
    curl -sf "http://$1/metrics" | awk '$1 ~ /^sandbox_webhook_controller_(cached|watched)_pods$/ { print $2 }'
}
# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
reviews() {
    curl -sf "http://$1/metrics" \
        | awk '/^sandbox_webhook_admission_requests_total\{operation="CREATE"/ { n += $2 } END { print n + 0 }'
}
KUBECONFIG="$(var KUBECONFIG)"
kubectl() { "$(var KUBECTL)" --kubeconfig "$KUBECONFIG" "$@"; }
WEBHOOK_PID="$(pid_of webhook)" WH_ADMIN="$(var WEBHOOK_ADMIN)"
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg); cluster up with $NODES nodes in $((SECONDS - t0)) s"

# The controllers, by name: `this` (REV) and, with BASELINE, `base`. Each
# one started here takes its own Lease, so both lead and cache at once.
declare -A CTL_BIN=([this]="$BIN") CTL_ADMIN=([this]="$(var CONTROLLER_ADMIN)") CTL=([this]="$(pid_of controller)")
NAMES=(this)
if [[ -n "$BASELINE" ]]; then
    CTL_BIN[base]="$BASE_BIN"
    NAMES=(base this)
    [[ "${FIRST:-}" == this ]] && NAMES=(this base)
fi
label() { if [[ "$1" == base ]]; then echo "baseline $BASE_REV"; else echo "this build $REV"; fi; }

# start_controller NAME MODE: a controller of NAME's binary, with the
# cluster's configuration and its own Lease.
start_controller() {
    local port
    port="$(free_port)"
    KUBECONFIG="$KUBECONFIG" RUST_LOG=info "${CTL_BIN[$1]}" controller --config "$(var CONTROLLER_CONFIG)" \
        --admin-addr "127.0.0.1:$port" --namespace "$(var RELEASE_NAMESPACE)" --identity "scale-$1-$2" \
        --lease-name "scale-$1" --initial-list "$2" >"$WORK/controller-$1-$2.log" 2>&1 &
    CTL[$1]=$! CTL_ADMIN[$1]="127.0.0.1:$port"
    BENCH_PIDS="$BENCH_PIDS $!"
}

# stop_controller NAME: SIGTERM, and wait until it is gone.
stop_controller() {
    local pid="${CTL[$1]}"
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
}

# wait_cached NAME N: until NAME's controller caches N sandboxes.
wait_cached() {
    local start=$SECONDS
    until [[ "$(cached "${CTL_ADMIN[$1]}")" == "$2" ]]; do
        (( SECONDS - start < 900 )) || { echo "$(label "$1"): never cached $2 pods" >&2; exit 1; }
        sleep 0.2
    done
}

[[ -n "$BASELINE" ]] && start_controller base auto
for name in "${NAMES[@]}"; do
    wait_cached "$name" 0
    echo "controller RSS idle, $(label "$name"): $(rss_mib "${CTL[$name]}") MiB"
done

ticks0="$(cpu_ticks "$WEBHOOK_PID")" reviews0="$(reviews "$WH_ADMIN")"
for batch in "$HALF 0" "$((PODS - HALF)) $HALF"; do
    read -r n from <<<"$batch"
    "$SCALE" create "$KUBECONFIG" "$n" "$EXPIRING" "$from"
    for name in "${NAMES[@]}"; do
        wait_cached "$name" $((from + n))
        echo "controller RSS with $((from + n)) pods cached, $(label "$name"): $(rss_mib "${CTL[$name]}") MiB (peak $(rss_mib "${CTL[$name]}" VmHWM) MiB)"
    done
done
ticks1="$(cpu_ticks "$WEBHOOK_PID")" reviews1="$(reviews "$WH_ADMIN")"
hz="$(getconf CLK_TCK)"
awk -v t="$((ticks1 - ticks0))" -v r="$((reviews1 - reviews0))" -v hz="$hz" -v p="$PODS" 'BEGIN {
    printf "webhook CPU: %.2f s for %d reviews (%d pods, each admitted and reinvoked once): %.3f s per 1,000 reviews, %.3f s per 1,000 pods\n",
        t / hz, r, p, t / hz / r * 1000, t / hz / p * 1000 }'

# Start-up with every pod existing: the controllers running are stopped
# (each releases its Lease), and a new one is timed until its cache is full.
for name in "${NAMES[@]}"; do stop_controller "$name"; done
"$SCALE" watch "$KUBECONFIG"
for name in "${NAMES[@]}"; do
    for mode in list auto; do
        sleep 1
        started="$(date +%s.%N)"
        start_controller "$name" "$mode"
        wait_cached "$name" "$PODS"
        took="$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')"
        how="$(sed -n 's/.*initial_list="\([^"]*\)".*/\1/p' "$WORK/controller-$name-$mode.log" | head -1)"
        echo "controller start-up to a full cache of $PODS pods, $(label "$name"), --initial-list $mode ($how): $took s; RSS $(rss_mib "${CTL[$name]}") MiB, peak $(rss_mib "${CTL[$name]}" VmHWM) MiB"
        stop_controller "$name"
    done
done

# Removals: each controller alone, on its own group of EXPIRING pods.
group=0
for name in "${NAMES[@]}"; do
    group=$((group + 1))
    start_controller "$name" auto
    wait_cached "$name" "$(kubectl get pods -A -l opensandbox.io/id -o name | wc -l)"
    echo "expiry run, $(label "$name") (group $group of $EXPIRING pods):"
    "$SCALE" expire "$KUBECONFIG" 90 60 "$group"
    echo "controller after expiry, $(label "$name"): RSS $(rss_mib "${CTL[$name]}") MiB, peak $(rss_mib "${CTL[$name]}" VmHWM) MiB; $(curl -sf "http://${CTL_ADMIN[$name]}/metrics" | grep -E '^sandbox_webhook_(expired_total|controller_api_errors_total|controller_timers)' | tr '\n' ' ')"
    echo "deletes refused by their precondition (the pod changed; decided again), $(label "$name"): $(grep -c 'deciding again' "$WORK/controller-$name-auto.log" || true)"
    stop_controller "$name"
    # kwok ends the deleted pods on its own schedule: let it finish first.
    start=$SECONDS
    while (( SECONDS - start < 300 )) && [[ -n "$(kubectl get pods -A -l "scale-bench/expiring=$group" -o name | head -1)" ]]; do
        sleep 2
    done
done
echo "scale.sh: done in $((SECONDS - t0)) s"
