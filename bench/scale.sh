#!/usr/bin/env bash
# The scale benchmark (issue 18): the whole product (tests/e2e/cluster.sh up,
# release build) on 100 kwok nodes; PODS sandbox pods created as fast as the
# apiserver takes them, then EXPIRING of them renewed (90 s ahead) to expire within one
# minute. Prints, from the same run:
#   - create latency through the apiserver, sandboxes against plain pods;
#   - the webhook's CPU seconds per 1,000 admissions;
#   - the controller's RSS idle and with every pod cached;
#   - controller start-up until its cache holds every pod, streaming list
#     (the default, where served) and LIST;
#   - removal delay after expiry (p50/p99/max), early removals, and API
#     requests per expired pod.
# A benchmark, not a test: it fails only on errors.
#
#   bench/scale.sh [PODS [EXPIRING]]        defaults 50000 10000
#
# Everything runs on 127.0.0.1 and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
PODS="${1:-50000}" EXPIRING="${2:-10000}"
# shellcheck source=bench/cluster-lib.sh
. bench/cluster-lib.sh
release_build scale
SCALE="$EXAMPLE"

t0=$SECONDS
CLUSTER_NODES="linux/amd64=60 linux/arm64=40" CLUSTER_NODE_PODS=1000 SANDBOX_WEBHOOK="$BIN" \
    tests/e2e/cluster.sh up "$WORK/cluster" >/dev/null
C="$WORK/cluster"
var() { sed -n "s/^$1=//p" "$C/cluster.env"; }
pid_of() { awk -v n="$1" '$1 == n { print $2 }' "$C/pids"; }
metric() { curl -sf "http://$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
reviews() {
    curl -sf "http://$1/metrics" \
        | awk '/^sandbox_webhook_admission_requests_total\{operation="CREATE"/ { n += $2 } END { print n + 0 }'
}
KUBECONFIG="$(var KUBECONFIG)"
WEBHOOK_PID="$(pid_of webhook)" CTL_ADMIN="$(var CONTROLLER_ADMIN)" WH_ADMIN="$(var WEBHOOK_ADMIN)"
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); cluster up with 100 nodes in $((SECONDS - t0)) s"
echo "controller RSS idle: $(rss_mib "$(pid_of controller)") MiB"

ticks0="$(cpu_ticks "$WEBHOOK_PID")" reviews0="$(reviews "$WH_ADMIN")"
"$SCALE" create "$KUBECONFIG" "$PODS" "$EXPIRING"
ticks1="$(cpu_ticks "$WEBHOOK_PID")" reviews1="$(reviews "$WH_ADMIN")"
hz="$(getconf CLK_TCK)"
awk -v t="$((ticks1 - ticks0))" -v r="$((reviews1 - reviews0))" -v hz="$hz" -v p="$PODS" 'BEGIN {
    printf "webhook CPU: %.2f s for %d reviews (%d pods, each admitted and reinvoked once): %.3f s per 1,000 reviews, %.3f s per 1,000 pods\n",
        t / hz, r, p, t / hz / r * 1000, t / hz / p * 1000 }'

wait_cached() {  # ADMIN: until the controller behind ADMIN caches every sandbox
    local start=$SECONDS
    until [[ "$(metric "$1" sandbox_webhook_controller_watched_pods)" == "$PODS" ]]; do
        (( SECONDS - start < 600 )) || { echo "the controller never cached $PODS pods" >&2; exit 1; }
        sleep 0.2
    done
}
wait_cached "$CTL_ADMIN"
echo "controller RSS with $PODS pods cached: $(rss_mib "$(pid_of controller)") MiB (timers armed: $(metric "$CTL_ADMIN" sandbox_webhook_controller_timers))"

# Start-up with every pod existing: the controller `up` started is stopped
# (it releases its Lease), and a new one is timed until its cache is full.
kill -TERM "$(pid_of controller)"
for mode in list auto; do
    port="$(free_port)"
    [[ -n "$CTL_PID" ]] && { kill -TERM "$CTL_PID"; wait "$CTL_PID" 2>/dev/null || true; }
    sleep 1
    started="$(date +%s.%N)"
    KUBECONFIG="$KUBECONFIG" RUST_LOG=info "$BIN" controller --config "$(var CONTROLLER_CONFIG)" \
        --admin-addr "127.0.0.1:$port" --namespace "$(var RELEASE_NAMESPACE)" --identity "scale-$mode" \
        --initial-list "$mode" >"$WORK/controller-$mode.log" 2>&1 &
    CTL_PID=$!
    wait_cached "127.0.0.1:$port"
    took="$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')"
    how="$(sed -n 's/.*initial_list="\([^"]*\)".*/\1/p' "$WORK/controller-$mode.log" | head -1)"
    echo "controller start-up to a full cache of $PODS pods, --initial-list $mode ($how): $took s; RSS $(rss_mib "$CTL_PID") MiB, peak $(rss_mib "$CTL_PID" VmHWM) MiB"
done

"$SCALE" expire "$KUBECONFIG" 90 60
echo "controller after expiry: RSS $(rss_mib "$CTL_PID") MiB; $(curl -sf "http://127.0.0.1:$port/metrics" | grep -E '^sandbox_webhook_(expired_total|controller_api_errors_total|controller_timers)' | tr '\n' ' ')"
echo "scale.sh: done in $((SECONDS - t0)) s"
