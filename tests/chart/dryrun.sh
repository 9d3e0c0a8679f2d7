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
# Objects go to the server through the kubectl that tests/e2e/cluster.sh
# builds. cert-manager's Issuer/Certificate and the Prometheus Operator's
# ServiceMonitor, PodMonitor and PrometheusRule are dry-run against the
# minimal test CRDs in tests/chart/crds/ when the cluster does not have the
# real ones; those are created for the dry-run and deleted after it.
# The install part also switches certificate modes (helm -> certManager ->
# helm, with a stand-in for cert-manager's Secrets, since no cert-manager runs
# here), checks `helm rollback`, and installs one release name in two
# namespaces.
# The install test uses its own namespace and a webhook prefix that no real
# pod carries, with failurePolicy Ignore, so it cannot affect other tests
# sharing the cluster. Prints `N passed, M failed` last.
set -euo pipefail

# lib.sh sets ROOT, CHART, HERE and CLUSTER_SH and defines usage.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
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
# The test CRDs this run made (or adopted): deleted after the dry-run, and
# on exit from a cluster that outlives the run.
OWN_CRDS=()
delete_own_crds() {
    local crd
    for crd in "${OWN_CRDS[@]}"; do
        kubectl delete crd "$crd" --ignore-not-found --wait=false >/dev/null
    done
    OWN_CRDS=()
}
# cleanup RC (trap_cleanup runs it at exit).
cleanup() {
    if (( ! OWN_CLUSTER )) && [[ -n "${KUBECONFIG:-}" ]]; then
        delete_own_crds 2>/dev/null
    fi
    if (( OWN_CLUSTER )); then
        "$CLUSTER_SH" stop "$WORK/cluster" 2>/dev/null
    fi
    rm -rf "$WORK"
}
trap_cleanup

pass=0
fail=0
skip=0
ensure_pyyaml || { echo "dryrun.sh: PyYAML is missing and could not be installed" >&2; exit 1; }
command -v openssl >/dev/null 2>&1 || { echo "dryrun.sh: openssl is required" >&2; exit 1; }
HELM="$("$CLUSTER_SH" helm)" || { echo "dryrun.sh: tests/e2e/cluster.sh helm failed" >&2; exit 1; }

connect_cluster dryrun.sh "$KUBECONFIG_ARG"
KUBE_VERSION="${server_version#v}"
KUBE_VERSION="${KUBE_VERSION%%-*}"
log "API server $server_version, helm $HELM, kubectl $KUBECTL"

# ------------------------------------------------------------------ test CRDs
# The managed-by label of the test CRDs (tests/chart/crds/*.yaml): a CRD
# carrying it was made by these tests and may be deleted by them. Also the
# field manager of the dry-run applies.
TEST_MANAGER="sandbox-webhook-chart-tests"
# install_test_crd FILE: the CRD in FILE, served. One of that name that these
# tests did not make (e.g. the real cert-manager's) is used as it is and never
# touched; one they made, also one an interrupted run left, is in OWN_CRDS.
install_test_crd() {
    local file="$1" name plural group
    read -r name plural group < <(python3 -c '
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
print(c["metadata"]["name"], c["spec"]["names"]["plural"], c["spec"]["group"])' "$file")
    if kubectl get crd "$name" -o name >/dev/null 2>&1; then
        if [[ "$(kubectl get crd "$name" -o 'jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by}')" == "$TEST_MANAGER" ]]; then
            OWN_CRDS+=("$name")
        fi
    else
        kubectl create -f "$file" >/dev/null || return 1
        OWN_CRDS+=("$name")
    fi
    kubectl wait --for=condition=Established "crd/$name" --timeout=30s >/dev/null || return 1
    # discovery lags a little behind the Established condition
    for _ in $(seq 1 60); do
        grep -q "\"name\": *\"$plural\"" <<<"$(kubectl get --raw "/apis/$group/v1" 2>/dev/null)" && return 0
        sleep 0.5
    done
    echo "CRD $name is not served after 30s"
    return 1
}
for f in "$HERE"/crds/*.yaml; do
    install_test_crd "$f" || { echo "dryrun.sh: cannot install the test CRD $f" >&2; exit 1; }
done

# ------------------------------------------------------------------ dry-run
# dry_run MANIFEST NAMESPACE: a server-side apply of MANIFEST with
# --dry-run=server, so the API server defaults, validates and admits it but
# persists nothing, and --validate=strict (fieldValidation=Strict), so an
# unknown or duplicate field is an error.
dry_run() {
    kubectl apply --server-side --dry-run=server --validate=strict --force-conflicts \
        --field-manager="$TEST_MANAGER" --namespace "$2" -f "$1"
}
# dry_run_objects MODE FILE: dry_run of each object of the rendered FILE on
# its own (in its own namespace, else $NS), one result line each. A kind the
# server does not serve is skipped, with the reason.
dry_run_objects() {
    local mode="$1" file="$2" obj api kind name ns label
    if ! python3 - "$file" "$WORK/objects-$mode" >"$WORK/objects-$mode.tsv" 2>"$WORK/err" <<'EOF'
import json, os, sys, yaml
os.makedirs(sys.argv[2], exist_ok=True)
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for i, d in enumerate(docs):
    path = os.path.join(sys.argv[2], f"{i:03}.json")
    json.dump(d, open(path, "w"))
    m = d["metadata"]
    print("\t".join([path, d["apiVersion"], d["kind"], m["name"], m.get("namespace") or ""]))
EOF
    then
        not_ok "[$mode] the rendered $(basename "$file") splits into objects"
        sed -e 's/^/    /' "$WORK/err"
        return
    fi
    while IFS=$'\t' read -r obj api kind name ns; do
        label="$(basename "$file"): $kind $name"
        if dry_run "$obj" "${ns:-$NS}" >"$WORK/dry.out" 2>&1; then
            ok "[$mode] server-side dry-run $label"
        elif grep -q "no matches for kind \"$kind\"" "$WORK/dry.out"; then
            skip=$((skip + 1))
            printf 'skip - [%s] %s: %s %s not served: the API server does not serve it (no test CRD in tests/chart/crds)\n' \
                "$mode" "$label" "$api" "$kind"
        else
            not_ok "[$mode] server-side dry-run $label"
            sed -e 's/^/    /' "$WORK/dry.out"
        fi
    done <"$WORK/objects-$mode.tsv"
}

ensure_namespace "$NS"
ensure_namespace sandboxes
# The strict dry-run can fail: a misspelt field, in a core kind and in a kind
# of a test CRD, is refused.
printf '{"apiVersion":"v1","kind":"Service","metadata":{"name":"typo"},"spec":{"portz":[{"port":443}]}}\n' >"$WORK/typo-service.json"
printf '{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","metadata":{"name":"typo"},"spec":{"selector":{},"endpoints":[{"portt":"metrics"}]}}\n' >"$WORK/typo-servicemonitor.json"
refused() { # refused FILE FIELD: dry_run fails, naming FIELD as unknown
    ! dry_run "$1" "$NS" >"$WORK/typo.out" 2>&1 && cat "$WORK/typo.out" &&
        grep -qF ".$2: field not declared in schema" "$WORK/typo.out"
}
run_test "the strict dry-run refuses an unknown field (Service spec.portz)" refused "$WORK/typo-service.json" spec.portz
run_test "the strict dry-run refuses an unknown field of a test CRD (ServiceMonitor spec.endpoints[0].portt)" \
    refused "$WORK/typo-servicemonitor.json" 'spec.endpoints[0].portt'
"$ROOT/certs/gen.sh" --openssl -s rel-sandbox-webhook -n "$NS" -o "$WORK/certs" --ip 127.0.0.1 2>/dev/null
declare -A MODES=(
    [helm]="--set certificates.mode=helm"
    [certManager]="--set certificates.mode=certManager"
    [existingSecret]="--set certificates.mode=existingSecret --set certificates.existingSecret.name=my-tls --set-file webhook.caBundle=$WORK/certs/ca.crt"
    [url]="--set deployment.enabled=false --set webhook.url=https://127.0.0.1:18443/mutate --set-file webhook.caBundle=$WORK/certs/ca.crt"
    [values-all]="-f $HERE/values-all.yaml --set metrics.serviceMonitor.namespace=$NS --set metrics.podMonitor.namespace=$NS --set metrics.prometheusRule.namespace=$NS"
)
for mode in helm certManager existingSecret url values-all; do
    out="$WORK/$mode.yaml"
    # shellcheck disable=SC2086 # MODES entries are word lists on purpose
    if ! "$HELM" template rel "$CHART" --namespace "$NS" --kube-version "$KUBE_VERSION" ${MODES[$mode]} >"$out" 2>"$WORK/err"; then
        not_ok "helm template ($mode)"
        sed -e 's/^/    /' "$WORK/err"
        continue
    fi
    dry_run_objects "$mode" "$out"
done
run_test "dry-run stored nothing (no MutatingWebhookConfiguration rel-sandbox-webhook-$NS)" \
    absent mutatingwebhookconfiguration "rel-sandbox-webhook-$NS"
# cert-manager's CRDs are made again below, without a schema, for installs.
delete_own_crds

# ------------------------------------------------------------------ install / upgrade (helm mode)
if (( INSTALL )); then
    REL="chart-test"
    FULL="chart-test-sandbox-webhook"
    H=("$HELM" --namespace "$INSTALL_NS")
    VALUES=(--set "config.prefix=$TEST_PREFIX" --set webhook.failurePolicy=Ignore --set certificates.mode=helm)
    ensure_namespace "$INSTALL_NS"
    "${H[@]}" uninstall "$REL" >/dev/null 2>&1 || true

    secret() { # secret NAME KEY: the base64 value
        kget "{.data.${2//./\\.}}" secret "$1" --namespace "$INSTALL_NS"
    }
    MWC_NAME="$FULL-$INSTALL_NS"
    ca_bundle() { kget '{.webhooks[0].clientConfig.caBundle}' mutatingwebhookconfiguration "$MWC_NAME"; }
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
    kubectl patch secret "$FULL-tls" --namespace "$INSTALL_NS" --type merge --patch \
        "{\"metadata\":{\"annotations\":{\"sandbox-webhook.opensandbox.io/not-after\":\"$soon\"}}}"
    run_test "helm upgrade (serving certificate near expiry)" "${H[@]}" upgrade "$REL" "$CHART" "${VALUES[@]}"
    snapshot renew
    run_test "near expiry: the serving certificate is re-issued" bash -c "! cmp -s '$WORK/snap/upgrade/tls' '$WORK/snap/renew/tls'"
    run_test "near expiry: the CA and caBundle are kept" bash -c "cmp -s '$WORK/snap/upgrade/ca' '$WORK/snap/renew/ca' && cmp -s '$WORK/snap/upgrade/bundle' '$WORK/snap/renew/bundle'"
    run_test "near expiry: the new certificate verifies against the kept CA" \
        bash -c "$(declare -f verifies); WORK='$WORK' verifies renew"

    kubectl delete secret "$FULL-tls" "$FULL-ca" --namespace "$INSTALL_NS" --ignore-not-found
    run_test "helm upgrade after deleting the Secrets" "${H[@]}" upgrade "$REL" "$CHART" "${VALUES[@]}"
    snapshot rotate
    run_test "deleted Secrets: a new CA is generated and the caBundle follows it" \
        bash -c "! cmp -s '$WORK/snap/renew/ca' '$WORK/snap/rotate/ca' && cmp -s '$WORK/snap/rotate/ca' '$WORK/snap/rotate/bundle'"
    run_test "deleted Secrets: the new certificate verifies against the new caBundle" \
        bash -c "$(declare -f verifies); WORK='$WORK' verifies rotate"

    # ---------------------------------------------------------------- helm rollback
    release_manifest() { # release_manifest REVISION: the manifest Helm stored for it
        kget '{.data.release}' secret "sh.helm.release.v1.$REL.v$1" --namespace "$INSTALL_NS" | python3 -c '
import base64, gzip, json, sys
blob = base64.b64decode(base64.b64decode(sys.stdin.read()))
print(json.loads(gzip.decompress(blob) if blob[:2] == b"\x1f\x8b" else blob)["manifest"])'
    }
    key_in_release() {
        local key
        # The manifest is read whole first: grep stops at the first match
        # (even without -q when its output is /dev/null), and under pipefail
        # the writer's broken pipe would fail the check.
        local manifest
        key="$(secret "$FULL-tls" tls.key)" && manifest="$(release_manifest 4)" &&
            grep -qF "tls.key: $key" <<<"$manifest"
    }
    run_test "helm mode keeps the serving key in the Helm release Secret (documented in the README)" key_in_release
    run_test "helm rollback to the first revision" "${H[@]}" rollback "$REL" 1
    snapshot rollback
    run_test "rollback restores the first revision's serving certificate, CA and caBundle (documented)" bash -c "
        cmp -s '$WORK/snap/install/tls' '$WORK/snap/rollback/tls' && cmp -s '$WORK/snap/install/ca' '$WORK/snap/rollback/ca' &&
        cmp -s '$WORK/snap/install/bundle' '$WORK/snap/rollback/bundle'"
    run_test "after rollback the certificate still verifies against the caBundle" \
        bash -c "$(declare -f verifies); WORK='$WORK' verifies rollback"

    # ---------------------------------------------------------------- certificate mode switches
    # No cert-manager runs here: minimal cert-manager CRDs make its objects
    # storable, and the Secrets cert-manager would write are created by hand,
    # without Helm's ownership, at the names the stored Certificates ask for.
    cm_crd() { # cm_crd KIND PLURAL > crd.json
        printf '{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"%s.cert-manager.io","labels":{"app.kubernetes.io/managed-by":"%s"}},"spec":{"group":"cert-manager.io","scope":"Namespaced","names":{"kind":"%s","plural":"%s","singular":"%s","listKind":"%sList"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}\n' \
            "$2" "$TEST_MANAGER" "$1" "$2" "${2%s}" "$1"
    }
    install_cm_crds() {
        local kind plural
        for kind in Certificate Issuer; do
            plural="${kind,,}s"
            # a minimal CRD of the dry-run may still be terminating
            kubectl wait --for=delete "crd/$plural.cert-manager.io" --timeout=30s >/dev/null || return 1
            cm_crd "$kind" "$plural" >"$WORK/crd-$plural.json"
            install_test_crd "$WORK/crd-$plural.json" || return 1
        done
    }
    helm_secrets() { # names of the Secrets in INSTALL_NS that Helm manages for REL, sorted
        kubectl get secrets --namespace "$INSTALL_NS" -o \
            "jsonpath={range .items[?(@.metadata.annotations.meta\\.helm\\.sh/release-name==\"$REL\")]}{.metadata.name}{\"\\n\"}{end}" |
            sort
    }
    stand_in_cert_manager() { # create the Secrets the stored Certificates name, as cert-manager would
        local cert name
        for cert in "$FULL" "$FULL-ca"; do
            name="$(kget '{.spec.secretName}' certificates.cert-manager.io "$cert" --namespace "$INSTALL_NS")" || return 1
            printf '{"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/tls","metadata":{"name":"%s","labels":{"controller.cert-manager.io/fao":"true"}},"data":{"tls.crt":"%s","tls.key":"%s","ca.crt":"%s"}}\n' \
                "$name" "$(cat "$WORK/snap/install/tls")" "$(printf 'not a key' | base64)" "$(cat "$WORK/snap/install/ca")" \
                >"$WORK/cm-secret-$cert.json"
            kubectl create --namespace "$INSTALL_NS" -f "$WORK/cm-secret-$cert.json" >/dev/null || return 1
            echo "$name" >>"$WORK/cm-secrets"
        done
    }
    mounted_secret() {
        kget '{.spec.template.spec.volumes[?(@.name=="tls")].secret.secretName}' deployment "$FULL" --namespace "$INSTALL_NS"
    }
    CM_VALUES=(--set "config.prefix=$TEST_PREFIX" --set webhook.failurePolicy=Ignore --set certificates.mode=certManager)
    if run_test "minimal cert-manager CRDs for the mode switch" install_cm_crds; then
        helm_secrets >"$WORK/secrets-before"
        run_test "helm upgrade helm -> certManager" "${H[@]}" upgrade "$REL" "$CHART" "${CM_VALUES[@]}"
        helm_secrets >"$WORK/secrets-after"
        comm -23 "$WORK/secrets-before" "$WORK/secrets-after" >"$WORK/secrets-deleted"
        certificate_secrets_kept() {
            local c n
            for c in "$FULL" "$FULL-ca"; do
                n="$(kget '{.spec.secretName}' certificates.cert-manager.io "$c" --namespace "$INSTALL_NS")" || return 1
                echo "Certificate $c writes $n; deleted by the upgrade: $(tr '\n' ' ' <"$WORK/secrets-deleted")"
                ! grep -qx "$n" "$WORK/secrets-deleted" || return 1
            done
        }
        run_test "helm -> certManager: the Secrets the Certificates write are not ones the upgrade deleted" certificate_secrets_kept
        mounts_cm_secret() { local m; m="$(mounted_secret)" && echo "mounted: $m" && [[ "$m" == "$FULL-cm-tls" ]]; }
        run_test "helm -> certManager: the pods mount the Secret the serving Certificate writes" mounts_cm_secret
        run_test "certManager: cert-manager (stand-in) writes its Secrets" stand_in_cert_manager
        run_test "helm upgrade certManager -> helm (cert-manager's Secrets exist)" "${H[@]}" upgrade "$REL" "$CHART" "${VALUES[@]}"
        snapshot back
        run_test "certManager -> helm: a caBundle again, and the serving certificate verifies against it" \
            bash -c "cmp -s '$WORK/snap/back/bundle' '$WORK/snap/back/ca' && $(declare -f verifies); WORK='$WORK' verifies back"
        cm_secrets_kept() {
            local n
            while read -r n; do kubectl get secret "$n" --namespace "$INSTALL_NS" -o name || return 1; done <"$WORK/cm-secrets"
        }
        run_test "certManager -> helm: cert-manager's Secrets were left alone" cm_secrets_kept
    fi

    # helm -> existingSecret -> helm: the user's Secret is mounted, never
    # adopted or deleted, and the way back issues helm-mode certificates again.
    ES_NAME="$FULL-mine"
    printf '{"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/tls","metadata":{"name":"%s"},"data":{"tls.crt":"%s","tls.key":"%s"}}\n' \
        "$ES_NAME" "$(base64 -w0 <"$WORK/certs/tls.crt")" "$(base64 -w0 <"$WORK/certs/tls.key")" >"$WORK/es-secret.json"
    ES_VALUES=(--set "config.prefix=$TEST_PREFIX" --set webhook.failurePolicy=Ignore --set certificates.mode=existingSecret
        --set "certificates.existingSecret.name=$ES_NAME" --set-file "webhook.caBundle=$WORK/certs/ca.crt")
    if run_test "existingSecret: the user's Secret exists" kubectl create --namespace "$INSTALL_NS" -f "$WORK/es-secret.json"; then
        run_test "helm upgrade helm -> existingSecret" "${H[@]}" upgrade "$REL" "$CHART" "${ES_VALUES[@]}"
        mounts_es_secret() { local m; m="$(mounted_secret)" && echo "mounted: $m" && [[ "$m" == "$ES_NAME" ]]; }
        run_test "helm -> existingSecret: the pods mount the user's Secret" mounts_es_secret
        bundle_is_given_ca() { [[ "$(ca_bundle)" == "$(base64 -w0 <"$WORK/certs/ca.crt")" ]]; }
        run_test "helm -> existingSecret: the caBundle is the given CA" bundle_is_given_ca
        run_test "helm upgrade existingSecret -> helm" "${H[@]}" upgrade "$REL" "$CHART" "${VALUES[@]}"
        snapshot from-es
        mounts_helm_secret() { local m; m="$(mounted_secret)" && echo "mounted: $m" && [[ "$m" == "$FULL-tls" ]]; }
        run_test "existingSecret -> helm: the pods mount the helm-mode Secret again" mounts_helm_secret
        run_test "existingSecret -> helm: the caBundle is the helm CA, and the certificate verifies against it" \
            bash -c "cmp -s '$WORK/snap/from-es/bundle' '$WORK/snap/from-es/ca' && $(declare -f verifies); WORK='$WORK' verifies from-es"
        run_test "existingSecret -> helm: the user's Secret was left alone" kubectl get secret "$ES_NAME" --namespace "$INSTALL_NS"
    fi

    # ---------------------------------------------------------------- one release name, two namespaces
    INSTALL_NS2="$INSTALL_NS-2"
    ensure_namespace "$INSTALL_NS2"
    "$HELM" --namespace "$INSTALL_NS2" uninstall "$REL" >/dev/null 2>&1 || true
    run_test "helm install of the same release name in a second namespace" \
        "$HELM" --namespace "$INSTALL_NS2" install "$REL" "$CHART" "${VALUES[@]}"
    both_configurations() {
        kubectl get mutatingwebhookconfiguration "$FULL-$INSTALL_NS" "$FULL-$INSTALL_NS2"
    }
    run_test "two MutatingWebhookConfigurations, one per namespace" both_configurations
    run_test "helm uninstall (second namespace)" "$HELM" --namespace "$INSTALL_NS2" uninstall "$REL"
    run_test "the first release's webhook configuration survives the second's uninstall" \
        kubectl get mutatingwebhookconfiguration "$MWC_NAME"

    run_test "helm uninstall" "${H[@]}" uninstall "$REL"
    run_test "uninstall removed the MutatingWebhookConfiguration" \
        absent mutatingwebhookconfiguration "$MWC_NAME"
fi

echo
if (( skip )); then
    printf '%d passed, %d failed, %d skipped\n' "$pass" "$fail" "$skip"
else
    printf '%d passed, %d failed\n' "$pass" "$fail"
fi
[[ $fail -eq 0 ]]
