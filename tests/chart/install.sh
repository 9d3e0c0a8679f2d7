#!/usr/bin/env bash
# End-to-end install of the chart in its out-of-cluster development mode
# (charts/sandbox-webhook/README.md, "Running the webhook outside the
# cluster"): a locally running `sandbox-webhook serve` on 127.0.0.1, and
# `helm install --set deployment.enabled=false --set webhook.url=...
# --set-file webhook.caBundle=...` against a real kube-apiserver. Then a
# sandbox pod is created and read back mutated, a pod without the label is
# read back untouched, a Deployment whose template would be denied is refused
# by the workload pre-flight, the `helm test` hook's script is run with the
# hook's own ServiceAccount and RBAC (outside a pod: there is no kubelet), and
# failurePolicy Fail (Ignore for the pre-flight) and `helm uninstall` are
# checked.
#
#   tests/chart/install.sh [KUBECONFIG]
#
# Without KUBECONFIG it starts its own control plane (tests/e2e/cluster.sh
# start, in a temporary directory) and stops it on exit, also on failure or
# Ctrl-C. With KUBECONFIG the API server must run on this machine (it calls
# the webhook on 127.0.0.1); the webhook configuration is then narrowed to
# the test's own namespaces, and the release is uninstalled on exit.
#
# The binary is $SANDBOX_WEBHOOK, else `cargo build` (debug). helm comes from
# `tests/e2e/cluster.sh helm`, kubectl from `tests/e2e/cluster.sh kubectl`.
# Everything this script starts is stopped by PID. Prints `N passed, M
# failed` last; exits non-zero when anything failed.
set -euo pipefail

# lib.sh sets ROOT, CHART, HERE and CLUSTER_SH and defines usage.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ $# -gt 1 || "${1:-}" == -h || "${1:-}" == --help ]]; then usage >&2; exit 2; fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sandbox-webhook-install.XXXXXX")"
OWN_CLUSTER=0
WEBHOOK_PID=""
RELEASE_INSTALLED=0
SUFFIX="$(date +%s)-$$"
REL="dev"
REL_NS="sandbox-webhook-dev-$SUFFIX"
TEST_NS="sandbox-install-$SUFFIX"
PREFIX="opensandbox.io"          # the chart's default config.prefix
WEBHOOK_NAME="sandbox-webhook.$PREFIX"
MWC="$REL-sandbox-webhook-$REL_NS"   # <fullname>-<release namespace>

pass=0
fail=0

stop_webhook() {
    [[ -n "$WEBHOOK_PID" ]] || return 0
    kill -TERM "$WEBHOOK_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$WEBHOOK_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$WEBHOOK_PID" 2>/dev/null || true
    wait "$WEBHOOK_PID" 2>/dev/null || true
    WEBHOOK_PID=""
}

# cleanup RC (trap_cleanup runs it at exit).
cleanup() {
    local rc="$1"
    stop_webhook
    if (( RELEASE_INSTALLED && ! OWN_CLUSTER )); then
        "$HELM" uninstall "$REL" --namespace "$REL_NS" >/dev/null 2>&1
        kubectl delete namespace "$TEST_NS" "$REL_NS" --ignore-not-found --wait=false >/dev/null 2>&1
    fi
    if (( OWN_CLUSTER )); then
        "$CLUSTER_SH" stop "$WORK/cluster" 2>/dev/null
    fi
    if (( rc != 0 || fail != 0 )) && [[ -s "$WORK/webhook.log" ]]; then
        log "--- last lines of the webhook's log ---"
        tail -n 20 "$WORK/webhook.log" | sed -e 's/^/#   /'
    fi
    rm -rf "$WORK"
}
trap_cleanup


# require NAME CMD...: like run_test, but stop here (with the summary) on failure.
require() {
    run_test "$@"
    if (( fail )); then
        echo
        printf '%d passed, %d failed\n' "$pass" "$fail"
        exit 1
    fi
}

# pod_json NAME [LABELLED]: a Pod with `command: [sleep, "3600"]`.
pod_json() {
    local labels='{}' annotations='{}'
    if [[ -n "${2:-}" ]]; then
        labels="{\"$PREFIX/id\": \"$1\"}"
        annotations="{\"$PREFIX/timeout\": \"30m\"}"
    fi
    cat <<EOF
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$1", "labels": $labels, "annotations": $annotations},
 "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}
EOF
}

# create_pod NS NAME [LABELLED] [--dry-run]: create the pod (with --dry-run,
# admitted but not stored), save what the API server answers in $WORK/NAME.json.
create_pod() {
    local ns="$1" name="$2" labelled="${3:-}" dry=()
    [[ "${4:-}" == --dry-run ]] && dry=(--dry-run=server)
    pod_json "$name" "$labelled" | kubectl create "${dry[@]}" --namespace "$ns" -f - -o json >"$WORK/$name.json"
}

# check_pod FILE mutated|unchanged: assertions on a Pod (from pod_json) as
# stored by the API server.
check_pod() {
    PYTHONPATH="$HERE" python3 - "$1" "$2" "$PREFIX" <<'EOF'
import json, sys
from tap import expect, finish
pod = json.load(open(sys.argv[1]))
want, prefix = sys.argv[2], sys.argv[3]
spec, meta = pod["spec"], pod["metadata"]
inits = {c["name"]: c for c in spec.get("initContainers") or []}
c = spec["containers"][0]
if want == "mutated":
    expect("execd-installer" in inits, f"no execd-installer init container: {sorted(inits)}")
    expect(inits.get("execd-installer", {}).get("image") == "opensandbox/execd:v1.1.0",
           "execd-installer image is not the chart's default config.execd.image")
    expect((c.get("command") or [""])[0] == "/opt/opensandbox/bootstrap.sh",
           f"command does not start with /opt/opensandbox/bootstrap.sh: {c.get('command')}")
    expect(c.get("command", [])[1:] == ["sleep", "3600"], f"original command not kept after bootstrap.sh: {c.get('command')}")
    expect(any(e.get("name") == "EXECD" for e in c.get("env") or []), "no EXECD environment variable")
    expect(any(v.get("name") == "opensandbox-bin" for v in spec.get("volumes") or []), "no opensandbox-bin volume")
    expect(f"{prefix}/expires-at" in (meta.get("annotations") or {}), f"no {prefix}/expires-at annotation")
else:
    expect(not inits, f"init containers were added: {sorted(inits)}")
    expect(c.get("command") == ["sleep", "3600"], f"command changed: {c.get('command')}")
    expect(not any(v.get("name") == "opensandbox-bin" for v in spec.get("volumes") or []), "opensandbox-bin volume added")
    # only what pod_json itself may set (a labelled pod has <prefix>/id and <prefix>/timeout)
    added = [k for k in list(meta.get("annotations") or {}) + list(meta.get("labels") or {})
             if k.startswith(prefix + "/") and k not in (f"{prefix}/id", f"{prefix}/timeout")]
    expect(not added, f"{prefix}/ keys added: {added}")
    expect(len(spec["containers"]) == 1, "containers added")
finish("pod")
EOF
}

# wait_mutation NS yes|no: until a dry-run sandbox pod create comes back
# mutated (yes) or unmutated (no); the API server loads webhook
# configurations asynchronously.
wait_mutation() {
    local ns="$1" want="$2" deadline=$((SECONDS + 30)) got
    while :; do
        got=error
        if create_pod "$ns" probe labelled --dry-run 2>/dev/null; then
            if grep -q '"execd-installer"' "$WORK/probe.json"; then got=yes; else got=no; fi
        fi
        [[ "$got" == "$want" ]] && return 0
        if (( SECONDS >= deadline )); then
            echo "dry-run sandbox pod: mutated=$got after 30s, want $want"
            return 1
        fi
        sleep 0.2
    done
}

# ------------------------------------------------------------------ tools
ensure_pyyaml || { echo "install.sh: PyYAML is missing and could not be installed" >&2; exit 1; }
command -v curl >/dev/null 2>&1 || { echo "install.sh: curl is required" >&2; exit 1; }
command -v openssl >/dev/null 2>&1 || { echo "install.sh: openssl is required" >&2; exit 1; }
HELM="$("$CLUSTER_SH" helm)" || { echo "install.sh: tests/e2e/cluster.sh helm failed" >&2; exit 1; }
BIN="$(webhook_binary)" || { echo "install.sh: cannot build the sandbox-webhook binary" >&2; exit 1; }
log "helm: $HELM; binary: $BIN"

# ------------------------------------------------------------------ cluster
connect_cluster install.sh "${1:-}"
log "API server $server_version"

# ------------------------------------------------------------------ the local webhook
require "sandbox-webhook certs --dns localhost --ip 127.0.0.1" \
    "$BIN" certs --dns localhost --ip 127.0.0.1 --out "$WORK/certs"
run_test "the serving certificate verifies against ca.crt" \
    openssl verify -CAfile "$WORK/certs/ca.crt" "$WORK/certs/tls.crt"

# The configuration the chart renders by default (its ConfigMap), so the
# binary runs with exactly what an in-cluster install would give it.
render_config() {
    "$HELM" template "$REL" "$CHART" --namespace "$REL_NS" --show-only templates/configmap.yaml >"$WORK/cm.yaml" &&
        python3 -c 'import sys, yaml; sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["data"]["config.yaml"])' \
            "$WORK/cm.yaml" >"$WORK/config.yaml"
}
require "the chart's default config.yaml renders (helm template, no --kube-version)" render_config

# start_webhook: serve on free loopback ports; retried when a port was taken
# between picking and binding.
start_webhook() {
    local attempt
    for attempt in 1 2 3; do
        PORT="$(free_port)"
        ADMIN_PORT="$(free_port)"
        [[ "$PORT" != "$ADMIN_PORT" ]] || continue
        RUST_LOG=info "$BIN" serve --config "$WORK/config.yaml" \
            --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" \
            --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" --namespace "$REL_NS" --shutdown-delay 0s \
            </dev/null >>"$WORK/webhook.log" 2>&1 &
        WEBHOOK_PID=$!
        for _ in $(seq 1 200); do
            if ! kill -0 "$WEBHOOK_PID" 2>/dev/null; then
                wait "$WEBHOOK_PID" 2>/dev/null || true
                WEBHOOK_PID=""
                echo "attempt $attempt: the webhook exited at start"
                break
            fi
            if curl -sf --max-time 2 -o /dev/null "http://127.0.0.1:$ADMIN_PORT/readyz" 2>/dev/null; then
                return 0
            fi
            sleep 0.1
        done
        if [[ -n "$WEBHOOK_PID" ]]; then echo "not ready within 20s"; stop_webhook; fi
    done
    tail -n 20 "$WORK/webhook.log"
    return 1
}
PORT=""
ADMIN_PORT=""
require "sandbox-webhook serve on 127.0.0.1 is ready (/readyz)" start_webhook
URL="https://127.0.0.1:$PORT/mutate"
log "webhook pid $WEBHOOK_PID at $URL (admin 127.0.0.1:$ADMIN_PORT)"
run_test "the webhook answers over TLS with the certificate for 127.0.0.1 (ca.crt)" \
    bash -c "code=\$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert '$WORK/certs/ca.crt' \
        -X POST -H 'Content-Type: application/json' -d '{}' '$URL') && [[ \$code =~ ^[0-9]+\$ && \$code != 000 ]]"

# ------------------------------------------------------------------ helm install (the documented override)
INSTALL=("$HELM" install "$REL" "$CHART" --namespace "$REL_NS" --create-namespace
         --set deployment.enabled=false
         --set "webhook.url=$URL"
         --set-file "webhook.caBundle=$WORK/certs/ca.crt")
if (( ! OWN_CLUSTER )); then
    # A shared cluster: gate only this test's namespace.
    INSTALL+=(--set-json "webhook.namespaceSelector.matchLabels={\"sandbox-webhook.opensandbox.io/install-test\":\"$SUFFIX\"}")
fi
log "${INSTALL[*]}"
require "helm install (deployment.enabled=false, webhook.url, webhook.caBundle from ca.crt)" "${INSTALL[@]}"
RELEASE_INSTALLED=1

run_test "the release contains only the webhook configurations (pods, and the workload pre-flight)" bash -c "
    kinds=\$('$HELM' get manifest '$REL' --namespace '$REL_NS' | sed -n 's/^kind: //p' | sort -u | tr '\n' ' ') &&
    echo \"kinds: \$kinds\" && [[ \$kinds == 'MutatingWebhookConfiguration ValidatingWebhookConfiguration ' ]]"
check_mwc() {
    kubectl get mutatingwebhookconfiguration "$MWC" -o json >"$WORK/mwc.json" &&
    PYTHONPATH="$HERE" python3 - "$WORK/mwc.json" "$URL" "$WORK/certs/ca.crt" "$WEBHOOK_NAME" "$REL_NS" "$PREFIX" <<'EOF'
import base64, json, sys
from tap import expect, finish
mwc, url, ca, name, rel_ns, prefix = json.load(open(sys.argv[1])), *sys.argv[2:]
(w,) = mwc["webhooks"]
cc = w["clientConfig"]
expect(w["name"] == name, f"webhook name {w['name']}")
expect(cc.get("url") == url, f"clientConfig.url {cc.get('url')} != {url}")
expect("service" not in cc, "clientConfig has a service")
expect(base64.b64decode(cc.get("caBundle", "")) == open(ca, "rb").read(), "caBundle is not ca.crt")
expect(w["failurePolicy"] == "Fail", f"failurePolicy {w['failurePolicy']}")
expect(w["sideEffects"] == "None", "sideEffects")
expect({"key": f"{prefix}/id", "operator": "Exists"} in w["objectSelector"].get("matchExpressions", []),
       f"objectSelector: {w['objectSelector']}")
ns_out = [e for e in w["namespaceSelector"].get("matchExpressions", []) if e["key"] == "kubernetes.io/metadata.name"]
expect(ns_out and rel_ns in ns_out[0]["values"] and "kube-system" in ns_out[0]["values"],
       f"namespaceSelector does not exclude {rel_ns} and kube-system: {w['namespaceSelector']}")
finish("MutatingWebhookConfiguration")
EOF
}
run_test "MutatingWebhookConfiguration: clientConfig.url, caBundle = ca.crt, Fail, <prefix>/id selector, own namespace excluded" check_mwc

# ------------------------------------------------------------------ a sandbox pod is mutated
printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s","labels":{"sandbox-webhook.opensandbox.io/install-test":"%s"}}}\n' \
    "$TEST_NS" "$SUFFIX" >"$WORK/ns.json"
require "create namespace $TEST_NS" kubectl create -f "$WORK/ns.json"
t0=$SECONDS
require "the API server calls the webhook (a dry-run sandbox pod comes back mutated)" wait_mutation "$TEST_NS" yes
log "webhook active after $((SECONDS - t0))s"

run_test "create sandbox pod $TEST_NS/sandbox (label $PREFIX/id, command sleep 3600)" \
    create_pod "$TEST_NS" sandbox labelled
get_pod() { kubectl get pod "$2" --namespace "$1" -o json >"$WORK/$2.stored.json"; }
run_test "GET the sandbox pod back" get_pod "$TEST_NS" sandbox
run_test "stored sandbox pod: execd-installer, command starts with /opt/opensandbox/bootstrap.sh, expires-at" \
    check_pod "$WORK/sandbox.stored.json" mutated

run_test "create pod $TEST_NS/plain (no $PREFIX/id label)" create_pod "$TEST_NS" plain
run_test "GET the plain pod back" get_pod "$TEST_NS" plain
run_test "stored plain pod is unchanged (no init containers, command sleep 3600, no $PREFIX/ keys)" \
    check_pod "$WORK/plain.stored.json" unchanged

# ------------------------------------------------------------------ the workload pre-flight
# The ValidatingWebhookConfiguration (same name, other kind) calls /validate.
# deployment_json NAME TIMEOUT: a Deployment whose template is a sandbox.
deployment_json() {
    cat <<EOF
{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "$1"},
 "spec": {"selector": {"matchLabels": {"app": "$1"}},
  "template": {"metadata": {"labels": {"app": "$1", "$PREFIX/id": "$1"}, "annotations": {"$PREFIX/timeout": "$2"}},
   "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}}}
EOF
}
# create_deployment NS NAME TIMEOUT [--dry-run]
create_deployment() {
    local dry=()
    [[ "${4:-}" == --dry-run ]] && dry=(--dry-run=server)
    deployment_json "$2" "$3" | kubectl create "${dry[@]}" --namespace "$1" -f - >/dev/null
}
check_vwc() {
    kubectl get validatingwebhookconfiguration "$MWC" -o json >"$WORK/vwc.json" &&
    python3 - "$WORK/vwc.json" "${URL%/mutate}/validate" "$WORK/certs/ca.crt" "$PREFIX" <<'EOF'
import base64, json, sys
vwc, url, ca, prefix = json.load(open(sys.argv[1])), *sys.argv[2:]
(w,) = vwc["webhooks"]
cc = w["clientConfig"]
errors = [msg for cond, msg in [
    (cc.get("url") == url, f"clientConfig.url {cc.get('url')} != {url}"),
    (base64.b64decode(cc.get("caBundle", "")) == open(ca, "rb").read(), "caBundle is not ca.crt"),
    (w["failurePolicy"] == "Ignore", f"failurePolicy {w['failurePolicy']}"),
    (any(f'"{prefix}/id"' in c["expression"] for c in w.get("matchConditions", [])),
     f"no matchCondition on the template label: {w.get('matchConditions')}"),
] if not cond]
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
EOF
}
run_test "ValidatingWebhookConfiguration: clientConfig.url .../validate, caBundle = ca.crt, Ignore, matchCondition" check_vwc
# The API server loads webhook configurations asynchronously: retry a dry run.
preflight_refuses() {
    for _ in $(seq 1 100); do
        if ! create_deployment "$TEST_NS" too-short 10s --dry-run 2>"$WORK/preflight.err" &&
            grep -q 'denied the request' "$WORK/preflight.err"; then
            break
        fi
        sleep 0.3
    done
    cat "$WORK/preflight.err"
    grep -q "denied the request: spec.template: annotation $PREFIX/timeout is 10s, below the minimum sandbox timeout of 60s" \
        "$WORK/preflight.err"
}
run_test "a Deployment whose template the pod webhook would deny is refused, with its message after spec.template" \
    preflight_refuses
run_test "a Deployment with a valid sandbox template is created" create_deployment "$TEST_NS" fine 30m

own_namespace_unmutated() { create_pod "$REL_NS" own labelled && check_pod "$WORK/own.json" unchanged; }
run_test "a sandbox pod in the release namespace $REL_NS is not mutated (namespaceSelector)" own_namespace_unmutated

run_test "the webhook counted the admissions (/metrics: mutated > 0)" bash -c "
    curl -sf --max-time 5 'http://127.0.0.1:$ADMIN_PORT/metrics' |
        grep -E '^sandbox_webhook_admission_requests_total\\{.*mutated' | grep -Evq ' 0\$'"

# ------------------------------------------------------------------ the helm test hook's script
# There is no kubelet here, so `helm test` cannot run its pod. The pod's own
# script (from the rendered hook) is run instead, outside a pod, with what a
# pod would get: the hook's ServiceAccount token (TokenRequest), the API
# server's CA and KUBERNETES_SERVICE_HOST/PORT. The hook's ServiceAccount,
# Role and RoleBinding are created as rendered, so its RBAC is what is tested.
HOOK_NAME="$REL-sandbox-webhook-test"
prepare_hook() {
    "$HELM" template "$REL" "$CHART" --namespace "$REL_NS" --set "test.namespace=$TEST_NS" \
        --show-only templates/tests/injection.yaml >"$WORK/hook.yaml" || return 1
    python3 - "$WORK/hook.yaml" "$WORK" "$KUBECONFIG" <<'EOF' || return 1
import base64, json, os, sys, urllib.parse, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
work, kubeconfig = sys.argv[2], sys.argv[3]
for d in docs:
    json.dump(d, open(os.path.join(work, f"hook-{d['kind']}.json"), "w"))
(pod,) = [d for d in docs if d["kind"] == "Pod"]
c = pod["spec"]["containers"][0]
open(os.path.join(work, "hook-script.sh"), "w").write(c["args"][0])
env = {e["name"]: e["value"] for e in c["env"]}
cfg = yaml.safe_load(open(kubeconfig))
cluster = cfg["clusters"][0]["cluster"]
url = urllib.parse.urlsplit(cluster["server"])
os.makedirs(os.path.join(work, "sa"), exist_ok=True)
if cluster.get("certificate-authority-data"):
    ca = base64.b64decode(cluster["certificate-authority-data"])
else:
    ca = open(os.path.join(os.path.dirname(kubeconfig), cluster["certificate-authority"]), "rb").read()
open(os.path.join(work, "sa", "ca.crt"), "wb").write(ca)
with open(os.path.join(work, "hook.env"), "w") as f:
    f.write(f"KUBERNETES_SERVICE_HOST={url.hostname}\nKUBERNETES_SERVICE_PORT={url.port or 443}\n")
    for k, v in env.items():
        f.write(f"{k}={v}\n")
EOF
    local token
    kubectl create --namespace "$REL_NS" -f "$WORK/hook-ServiceAccount.json" >/dev/null &&
        kubectl create --namespace "$TEST_NS" -f "$WORK/hook-Role.json" >/dev/null &&
        kubectl create --namespace "$TEST_NS" -f "$WORK/hook-RoleBinding.json" >/dev/null &&
        token="$(kubectl create token "$HOOK_NAME" --namespace "$REL_NS" --duration 600s)" &&
        printf '%s' "$token" >"$WORK/sa/token"
}
# run_hook [VAR=VALUE...]: the hook pod's script with its environment (plus overrides).
run_hook() {
    local -a envs
    mapfile -t envs <"$WORK/hook.env"
    env "${envs[@]}" SA_DIR="$WORK/sa" TMPDIR="$WORK" "$@" sh -ec "$(cat "$WORK/hook-script.sh")"
}
hook_passes() { run_hook >"$WORK/hook.out" 2>&1; local rc=$?; cat "$WORK/hook.out"; [[ $rc -eq 0 ]] && grep -q '^ok: ' "$WORK/hook.out"; }
hook_fails() { # hook_fails PATTERN [VAR=VALUE...]
    local pattern="$1" rc=0; shift
    run_hook "$@" >"$WORK/hook.out" 2>&1 || rc=$?
    cat "$WORK/hook.out"
    [[ $rc -ne 0 ]] && grep -Eq -- "$pattern" "$WORK/hook.out"
}
require "helm test hook: its ServiceAccount, Role and RoleBinding as rendered, and a token for it" prepare_hook
run_test "helm test hook: the script passes while the webhook mutates (dry-run sandbox has execd-installer)" hook_passes
run_test "helm test hook: its Role does not allow creating pods in another namespace (403)" \
    hook_fails "FAIL: .* answered HTTP 403" "TEST_NAMESPACE=$REL_NS"
run_test "helm test hook: the script fails when the sandbox comes back unmutated" \
    hook_fails "FAIL: the API server admitted the sandbox pod without execd-installer" "SANDBOX_LABEL=$PREFIX/not-id"

# ------------------------------------------------------------------ failurePolicy Fail
stop_webhook
run_test "helm test hook: the script fails while the webhook is down" hook_fails "FAIL: .* answered HTTP (500|403|400)"
expect_rejected() {
    if create_pod "$TEST_NS" down labelled 2>"$WORK/down.err"; then
        echo "sandbox pod created while the webhook is down"; return 1
    fi
    cat "$WORK/down.err"
    grep -q "failed calling webhook \"$WEBHOOK_NAME\"" "$WORK/down.err"
}
run_test "webhook stopped: a sandbox pod is rejected, naming the webhook (failurePolicy Fail)" expect_rejected
run_test "webhook stopped: a pod without the label is still created" create_pod "$TEST_NS" plain2
run_test "webhook stopped: a Deployment with a denied template is created (pre-flight failurePolicy Ignore)" \
    create_deployment "$TEST_NS" while-down 10s

# ------------------------------------------------------------------ helm uninstall
run_test "helm uninstall" "$HELM" uninstall "$REL" --namespace "$REL_NS"
RELEASE_INSTALLED=0
run_test "uninstall removed the MutatingWebhookConfiguration" \
    absent mutatingwebhookconfiguration "$MWC"
run_test "uninstall removed the ValidatingWebhookConfiguration" \
    absent validatingwebhookconfiguration "$MWC"
run_test "after uninstall a sandbox pod is created again, unmutated" wait_mutation "$TEST_NS" no

echo
printf '%d passed, %d failed\n' "$pass" "$fail"
[[ $fail -eq 0 ]]
