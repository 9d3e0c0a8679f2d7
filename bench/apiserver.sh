#!/usr/bin/env bash
# The apiserver benchmark (issue 19): what a pod create costs through a real
# kube-apiserver (tests/e2e/cluster.sh start --bare: etcd and kube-apiserver
# on 127.0.0.1) with each kind of webhook answer, every mode measured in the
# same run, interleaved (examples/apiserver_modes.rs):
#
#   none     no webhook selects the pod
#   null     `serve --null-handler`: allowed, no patch, the object unread
#   label    a one-label patch (what the kube-rs admission example answers)
#   ours     the webhook as built from this tree
#   today    BASELINE_BIN, when set: another build of the webhook (e.g. main's)
#   injected the webhook's result created as it is, under the null handler:
#            what the larger pod costs the apiserver without any patch
#   shape-*  `serve --fixed-patch`: the webhook's patch for this pod in each
#            shape of bench/patch_shapes.py (ours, fine, whole), answered
#            without reading the pod, so only the apiserver's cost differs
#
# Every webhook is registered the same way (one MutatingWebhookConfiguration,
# one webhook per mode selecting its namespace, failurePolicy Fail). After the
# run, the stored pods of `ours`, `today` and every shape are compared (the
# same pod but for names and times), and each is admitted again through
# `sandbox-webhook inject -o patch`, which must find nothing to do.
# A benchmark, not a test: it fails only on errors or a broken invariant.
#
#   bench/apiserver.sh [CREATES] [POD_JSON]   defaults 2000, the 10 KB review's pod
set -euo pipefail
cd "$(dirname "$0")/.."
CREATES="${1:-2000}"
# shellcheck source=bench/cluster-lib.sh
. bench/cluster-lib.sh
release_build apiserver_modes
MODES_BIN="$EXAMPLE"
python3 bench/make_reviews.py >/dev/null
POD="$WORK/pod.json"
if [[ -n "${2:-}" ]]; then cp "$2" "$POD"; else
    python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["request"]["object"], open(sys.argv[2], "w"))' \
        bench/reviews/pod-10k.json "$POD"
fi

tests/e2e/cluster.sh start --bare "$WORK/cluster" >"$WORK/cluster.env"
KUBECONFIG="$WORK/cluster/kubeconfig"
KUBECTL="$(tests/e2e/cluster.sh build 2>/dev/null | sed -n 's/^KUBECTL=//p')"
[[ -x "$KUBECTL" ]] || { echo "no kubectl from tests/e2e/cluster.sh build" >&2; exit 1; }
"$BIN" certs --dns localhost --ip 127.0.0.1 --out "$WORK/certs" >/dev/null 2>&1

# The webhook's own patch for this pod, and its shapes.
mkdir -p "$WORK/shapes" "$WORK/stored"
"$BIN" inject -o patch -f "$POD" >"$WORK/ours.patch.json"
python3 bench/patch_shapes.py "$POD" "$WORK/ours.patch.json" "$WORK/shapes"

declare -A PORT
SERVER_PIDS=()
serve() { # MODE BINARY ARGS...
    local mode=$1 bin=$2 port admin
    shift 2
    port="$(free_port)" admin="$(free_port)"
    "$bin" serve --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" \
        --addr "127.0.0.1:$port" --admin-addr "127.0.0.1:$admin" "$@" >"$WORK/serve-$mode.log" 2>&1 &
    SERVER_PIDS+=($!)
    PORT[$mode]=$port
    local start=$SECONDS
    until curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null; do
        (( SECONDS - start < 30 )) || { cat "$WORK/serve-$mode.log" >&2; exit 1; }
        sleep 0.1
    done
}
stop_servers() { ((${#SERVER_PIDS[@]})) && kill "${SERVER_PIDS[@]}" 2>/dev/null; bench_cleanup; }
trap stop_servers EXIT

MODES=(none null label ours)
serve null "$BIN" --null-handler
serve label "$BIN" --fixed-patch "$WORK/shapes/label.json"
serve ours "$BIN"
if [[ -n "${BASELINE_BIN:-}" ]]; then MODES+=(today); serve today "$BASELINE_BIN"; fi
MODES+=(injected)
serve injected "$BIN" --null-handler
for shape in ours fine whole; do
    MODES+=("shape-$shape")
    serve "shape-$shape" "$BIN" --fixed-patch "$WORK/shapes/$shape.json"
done

CA="$(base64 -w0 "$WORK/certs/ca.crt")"
{
    echo "apiVersion: admissionregistration.k8s.io/v1"
    echo "kind: MutatingWebhookConfiguration"
    echo "metadata: {name: bench-modes}"
    echo "webhooks:"
    for mode in "${MODES[@]}"; do
        [[ $mode == none ]] && continue
        cat <<YAML
- name: ${mode}.bench.sandbox-webhook.test
  clientConfig: {url: "https://127.0.0.1:${PORT[$mode]}/mutate", caBundle: "$CA"}
  namespaceSelector: {matchLabels: {bench-mode: "$mode"}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  reinvocationPolicy: IfNeeded
  timeoutSeconds: 10
YAML
    done
} >"$WORK/webhooks.yaml"
"$KUBECTL" --kubeconfig "$KUBECONFIG" apply -f "$WORK/webhooks.yaml" >/dev/null
sleep 2  # the apiserver's webhook configuration informer

LOADAVG="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); load average before the run: $LOADAVG"
ARGS=()
for mode in "${MODES[@]}"; do
    if [[ $mode == injected ]]; then ARGS+=("injected:$WORK/shapes/injected-pod.json"); else ARGS+=("$mode"); fi
done
"$MODES_BIN" "$KUBECONFIG" "$POD" "$CREATES" "$WORK/stored" "${ARGS[@]}"
echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"

# Invariants: every injecting mode stored the same pod, and admitting it
# again finds nothing to do.
python3 - "$WORK/stored" "${MODES[@]}" <<'PY'
import json, sys
d, modes = sys.argv[1], [m for m in sys.argv[2:] if m not in ("none", "null", "label")]
def norm(mode):
    pod = json.load(open(f"{d}/{mode}.json"))
    md = pod["metadata"]
    for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "managedFields"):
        md.pop(k, None)
    # expires-at is the admission time plus the timeout: equal up to its value
    md.get("annotations", {}).pop("opensandbox.io/expires-at", None)
    return pod
base = norm("ours")
for m in modes:
    if norm(m) != base:
        sys.exit(f"invariant broken: the pod stored in mode {m} differs from mode ours")
print(f"stored pods: {', '.join(modes)} identical (names, times and expires-at aside)")
PY
for mode in "${MODES[@]}"; do
    case $mode in none | null | label) continue ;; esac
    again="$("$BIN" inject -o patch -f "$WORK/stored/$mode.json")"
    [[ "$again" == "[]" ]] || { echo "invariant broken: mode $mode's stored pod admitted again: $again" >&2; exit 1; }
done
echo "admitted again: every stored pod gets an empty patch"
wc -c "$WORK"/shapes/*.json | sed '$d' | awk '{ n=$2; sub(".*/", "", n); sub(".json", "", n); printf "patch shape %s: %d bytes\n", n, $1 }'
