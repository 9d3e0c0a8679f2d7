#!/usr/bin/env bash
# Render the chart in every certificate mode and send every object to a real
# API server with server-side dry-run (dryRun=All, fieldValidation=Strict):
# the server validates, defaults and admits each object but stores nothing.
# Then (unless --no-install) a real `helm install` / `helm upgrade` /
# `helm uninstall` of certificates.mode=helm checks that the generated
# certificates are reused across upgrades (lookup), re-issued near expiry, and
# regenerated when the Secrets are deleted.
#
#   tests/chart/dryrun.sh [KUBECONFIG] [--no-install]
#
# Without KUBECONFIG it starts its own control plane (tests/e2e/cluster.sh
# start, in a temporary directory) and stops it on exit, also on failure or
# Ctrl-C. Or with one already running:
#   tests/e2e/cluster.sh start /tmp/cp && tests/chart/dryrun.sh /tmp/cp/kubeconfig
#
# cert-manager Issuer/Certificate and the ServiceMonitor are dry-run against
# minimal test CRDs (tests/chart/kubeclient.py) when the cluster does not have
# the real ones; they are created for the run and deleted afterwards.
# The install test uses its own namespace and a webhook prefix that no real
# pod carries, with failurePolicy Ignore, so it cannot affect other tests
# sharing the cluster. Prints `N passed, M failed` last.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CHART="$ROOT/charts/sandbox-webhook"
HERE="$ROOT/tests/chart"

CLUSTER_SH="$ROOT/tests/e2e/cluster.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
KUBECONFIG_ARG=""
INSTALL=1
for arg in "$@"; do
    case "$arg" in
        -h|--help) usage; exit 0 ;;
        --no-install) INSTALL=0 ;;
        -*) usage >&2; exit 2 ;;
        *) [[ -z "$KUBECONFIG_ARG" ]] || { usage >&2; exit 2; }; KUBECONFIG_ARG="$arg" ;;
    esac
done

NS="sandbox-webhook-dryrun"
INSTALL_NS="sandbox-webhook-chart-test"
TEST_PREFIX="chart-test.sandbox-webhook.invalid"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sandbox-webhook-dryrun.XXXXXX")"
OWN_CLUSTER=0
# The original stdout/stderr, for cleanup: a signal can arrive while a test's
# output is redirected to $WORK/out.
exec 3>&1 4>&2
cleanup() {
    local rc=$?
    set +e
    exec 1>&3 2>&4
    if (( OWN_CLUSTER )); then
        "$CLUSTER_SH" stop "$WORK/cluster" 2>/dev/null
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

pass=0
fail=0
skip=0
kc() { python3 "$HERE/kubeclient.py" --kubeconfig "$KUBECONFIG" "$@"; }


ensure_pyyaml || { echo "dryrun.sh: PyYAML is missing and could not be installed" >&2; exit 1; }
command -v openssl >/dev/null 2>&1 || { echo "dryrun.sh: openssl is required" >&2; exit 1; }
HELM="$("$CLUSTER_SH" helm)" || { echo "dryrun.sh: tests/e2e/cluster.sh helm failed" >&2; exit 1; }

if [[ -n "$KUBECONFIG_ARG" ]]; then
    KUBECONFIG="$(cd "$(dirname "$KUBECONFIG_ARG")" && pwd)/$(basename "$KUBECONFIG_ARG")"
    [[ -r "$KUBECONFIG" ]] || { echo "dryrun.sh: cannot read kubeconfig $KUBECONFIG_ARG" >&2; exit 2; }
else
    OWN_CLUSTER=1
    t0=$SECONDS
    "$CLUSTER_SH" start "$WORK/cluster" >/dev/null || { echo "dryrun.sh: cannot start a control plane" >&2; exit 1; }
    KUBECONFIG="$WORK/cluster/kubeconfig"
    log "control plane started in $((SECONDS - t0))s"
fi
export KUBECONFIG

server_version="$(kc get /version | python3 -c 'import json, sys; print(json.load(sys.stdin)["gitVersion"])')" \
    || { echo "dryrun.sh: the API server in $KUBECONFIG does not answer" >&2; exit 1; }
KUBE_VERSION="${server_version#v}"
KUBE_VERSION="${KUBE_VERSION%%-*}"
log "API server $server_version, helm $HELM"

# ------------------------------------------------------------------ dry-run
kc ensure-namespace "$NS"
"$ROOT/certs/gen.sh" --openssl -s rel-sandbox-webhook -n "$NS" -o "$WORK/certs" --ip 127.0.0.1 2>/dev/null
declare -A MODES=(
    [helm]="--set certificates.mode=helm"
    [certManager]="--set certificates.mode=certManager"
    [existingSecret]="--set certificates.mode=existingSecret --set certificates.existingSecret.name=my-tls --set-file webhook.caBundle=$WORK/certs/ca.crt"
    [url]="--set deployment.enabled=false --set webhook.url=https://127.0.0.1:18443/mutate --set-file webhook.caBundle=$WORK/certs/ca.crt"
    [values-all]="-f $HERE/values-all.yaml --set metrics.serviceMonitor.namespace=$NS"
)
for mode in helm certManager existingSecret url values-all; do
    out="$WORK/$mode.yaml"
    # shellcheck disable=SC2086 # MODES entries are word lists on purpose
    if ! "$HELM" template rel "$CHART" --namespace "$NS" --kube-version "$KUBE_VERSION" ${MODES[$mode]} >"$out" 2>"$WORK/err"; then
        not_ok "helm template ($mode)"
        sed -e 's/^/    /' "$WORK/err"
        continue
    fi
    rc=0
    kc --namespace "$NS" dry-run --install-crds "$out" >"$WORK/dry.out" 2>&1 || rc=$?
    failed_before=$fail
    while IFS= read -r line; do
        case "$line" in
            "ok - "*) ok "[$mode] ${line#ok - }" ;;
            "not ok - "*) not_ok "[$mode] ${line#not ok - }" ;;
            "skip - "*) skip=$((skip + 1)); printf '%s\n' "$line" ;;
            *) printf '    %s\n' "$line" ;;
        esac
    done <"$WORK/dry.out"
    if [[ $rc -ne 0 && $fail -eq $failed_before ]]; then
        not_ok "[$mode] kubeclient.py dry-run exited $rc"
    fi
done
run_test "dry-run stored nothing (no MutatingWebhookConfiguration rel-sandbox-webhook)" \
    bash -c "! python3 '$HERE/kubeclient.py' --kubeconfig '$KUBECONFIG' get \
        /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/rel-sandbox-webhook"

# ------------------------------------------------------------------ install / upgrade (helm mode)
if (( INSTALL )); then
    REL="chart-test"
    FULL="chart-test-sandbox-webhook"
    H=("$HELM" --namespace "$INSTALL_NS")
    VALUES=(--set "config.prefix=$TEST_PREFIX" --set webhook.failurePolicy=Ignore --set certificates.mode=helm)
    kc ensure-namespace "$INSTALL_NS"
    "${H[@]}" uninstall "$REL" >/dev/null 2>&1 || true

    secret() { # secret NAME KEY: the base64 value
        kc get "/api/v1/namespaces/$INSTALL_NS/secrets/$1" |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["data"][sys.argv[1]])' "$2"
    }
    ca_bundle() {
        kc get "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/$FULL" |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["webhooks"][0]["clientConfig"]["caBundle"])'
    }
    snapshot() { # snapshot NAME: saves tls.crt, CA and caBundle
        mkdir -p "$WORK/snap/$1"
        secret "$FULL-tls" tls.crt >"$WORK/snap/$1/tls"
        secret "$FULL-ca" tls.crt >"$WORK/snap/$1/ca"
        ca_bundle >"$WORK/snap/$1/bundle"
    }
    same() { cmp -s "$WORK/snap/$1/$3" "$WORK/snap/$2/$3"; }
    verifies() { # verifies SNAP: tls.crt verifies against the caBundle
        base64 -d <"$WORK/snap/$1/bundle" >"$WORK/snap/$1/bundle.pem"
        base64 -d <"$WORK/snap/$1/tls" >"$WORK/snap/$1/tls.pem"
        openssl verify -CAfile "$WORK/snap/$1/bundle.pem" "$WORK/snap/$1/tls.pem"
    }

    run_test "helm install (mode helm) into a real API server" "${H[@]}" install "$REL" "$CHART" "${VALUES[@]}"
    snapshot install
    run_test "install: caBundle is the generated CA and the serving certificate verifies against it" \
        bash -c "cmp -s '$WORK/snap/install/bundle' '$WORK/snap/install/ca' && $(declare -f verifies); WORK='$WORK' verifies install"

    run_test "helm upgrade (same values)" "${H[@]}" upgrade "$REL" "$CHART" "${VALUES[@]}"
    snapshot upgrade
    run_test "upgrade reuses the serving certificate (lookup)" same install upgrade tls
    run_test "upgrade reuses the CA and caBundle" bash -c "cmp -s '$WORK/snap/install/ca' '$WORK/snap/upgrade/ca' && cmp -s '$WORK/snap/install/bundle' '$WORK/snap/upgrade/bundle'"

    # Pretend the serving certificate expires tomorrow.
    soon=$(( $(date +%s) + 86400 ))
    kc merge-patch "/api/v1/namespaces/$INSTALL_NS/secrets/$FULL-tls" \
        "{\"metadata\":{\"annotations\":{\"sandbox-webhook.opensandbox.io/not-after\":\"$soon\"}}}"
    run_test "helm upgrade (serving certificate near expiry)" "${H[@]}" upgrade "$REL" "$CHART" "${VALUES[@]}"
    snapshot renew
    run_test "near expiry: the serving certificate is re-issued" bash -c "! cmp -s '$WORK/snap/upgrade/tls' '$WORK/snap/renew/tls'"
    run_test "near expiry: the CA and caBundle are kept" bash -c "cmp -s '$WORK/snap/upgrade/ca' '$WORK/snap/renew/ca' && cmp -s '$WORK/snap/upgrade/bundle' '$WORK/snap/renew/bundle'"
    run_test "near expiry: the new certificate verifies against the kept CA" \
        bash -c "$(declare -f verifies); WORK='$WORK' verifies renew"

    kc delete "/api/v1/namespaces/$INSTALL_NS/secrets/$FULL-tls"
    kc delete "/api/v1/namespaces/$INSTALL_NS/secrets/$FULL-ca"
    run_test "helm upgrade after deleting the Secrets" "${H[@]}" upgrade "$REL" "$CHART" "${VALUES[@]}"
    snapshot rotate
    run_test "deleted Secrets: a new CA is generated and the caBundle follows it" \
        bash -c "! cmp -s '$WORK/snap/renew/ca' '$WORK/snap/rotate/ca' && cmp -s '$WORK/snap/rotate/ca' '$WORK/snap/rotate/bundle'"
    run_test "deleted Secrets: the new certificate verifies against the new caBundle" \
        bash -c "$(declare -f verifies); WORK='$WORK' verifies rotate"

    run_test "helm uninstall" "${H[@]}" uninstall "$REL"
    run_test "uninstall removed the MutatingWebhookConfiguration" \
        bash -c "! python3 '$HERE/kubeclient.py' --kubeconfig '$KUBECONFIG' get /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/$FULL"
fi

echo
if (( skip )); then
    printf '%d passed, %d failed, %d skipped\n' "$pass" "$fail" "$skip"
else
    printf '%d passed, %d failed\n' "$pass" "$fail"
fi
[[ $fail -eq 0 ]]
