#!/usr/bin/env bash
# The lifecycle controller under load, against the e2e control plane
# (tests/e2e/cluster.sh): PODS sandbox pods whose expiry times are spread over
# SPREAD seconds; prints the removal delay (p50/p99/max), the controller's
# RSS (idle, PODS cached, peak) and the API calls it made
# (apiserver_request_total). A benchmark, not a test: it fails only on errors.
#
#   bench/controller.sh [PODS [SPREAD_S [LEAD_S]]]     defaults 5000 60 45
#
# Release build; everything runs on 127.0.0.1 and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
PODS="${1:-5000}" SPREAD="${2:-60}" LEAD="${3:-45}"
# shellcheck source=bench/cluster-lib.sh
. bench/cluster-lib.sh
release_build controller_bench
BENCH="$EXAMPLE"

tests/e2e/cluster.sh start --bare "$WORK/cluster" >/dev/null
KUBECONFIG="$WORK/cluster/kubeconfig"
ADMIN="127.0.0.1:$(free_port)"
KUBECONFIG="$KUBECONFIG" RUST_LOG=warn "$BIN" controller --admin-addr "$ADMIN" --namespace default \
    --identity bench >"$WORK/controller.log" 2>&1 &
CTL_PID=$!
for _ in $(seq 1 300); do
    grep -q '^sandbox_webhook_controller_leader 1' <<<"$(curl -sf "http://$ADMIN/metrics" 2>/dev/null)" && break
    sleep 0.1
done
grep -q '^sandbox_webhook_controller_leader 1' <<<"$(curl -sf "http://$ADMIN/metrics")" || { echo "controller never led" >&2; exit 1; }
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BENCH" "$KUBECONFIG" "$CTL_PID" "$ADMIN" "$PODS" "$SPREAD" "$LEAD"
echo "controller: $(curl -sf "http://$ADMIN/metrics" | grep -E '^sandbox_webhook_(expired_total|controller_api_errors_total)' | tr '\n' ' ')"
