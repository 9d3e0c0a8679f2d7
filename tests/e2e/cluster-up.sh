# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): `up`, `env` and
# `down`, the whole product on a whole control plane, as a platform team
# would install it, but with the two processes on the host:
#   - the chart's own objects, rendered by `helm template`: the ConfigMaps
#     (whose config.yaml the processes read), the renewal
#     ValidatingAdmissionPolicy, and the Mutating- and
#     ValidatingWebhookConfiguration in the chart's `webhook.url` mode,
#     pointing at the host webhook;
#   - `sandbox-webhook serve` and `sandbox-webhook controller`, their pids in
#     DIR/pids, so `down` (= `stop`) ends them first.
# The binary is $SANDBOX_WEBHOOK when set, else `cargo build --release`.

RELEASE="sandbox-webhook"
RELEASE_NS="sandbox-webhook"
CHART_DIR="$SCRIPT_DIR/../../charts/sandbox-webhook"

default_dir() {
    printf '%s\n' "${SANDBOX_WEBHOOK_CLUSTER:-$CACHE_DIR/cluster}"
}

webhook_binary() {
    if [[ -n "${SANDBOX_WEBHOOK:-}" ]]; then
        [[ -x "$SANDBOX_WEBHOOK" ]] || die "SANDBOX_WEBHOOK=$SANDBOX_WEBHOOK is not an executable"
        printf '%s\n' "$SANDBOX_WEBHOOK"
        return
    fi
    local root="$SCRIPT_DIR/../.."
    command -v cargo >/dev/null 2>&1 || die "cargo is needed to build sandbox-webhook (or set SANDBOX_WEBHOOK)"
    log "building sandbox-webhook (cargo build --release)"
    (cd "$root" && cargo build --release --locked --quiet >&2) || die "cargo build failed"
    local target="${CARGO_TARGET_DIR:-$root/target}"
    printf '%s\n' "$(cd "$target/release" && pwd)/sandbox-webhook"
}

# admin_ready ADDR: a process of the binary answers /readyz with 200.
admin_ready() {
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$1/readyz")" == 200 ]]
}

# webhook_active KUBECTL...: a dry-run sandbox create in `default` comes back
# injected, so the apiserver calls the webhook through the chart's objects.
webhook_active() {
    local out
    out="$("$@" run up-probe --dry-run=server -o jsonpath='{.spec.initContainers[*].name}' \
        --image=busybox:1.36 --labels=opensandbox.io/id=up-probe --command -- sleep 1)" || return 1
    [[ " $out " == *" execd-installer "* ]]
}

cmd_up() {
    local mode=node
    if [[ "${1:-}" == --no-node ]]; then mode=whole; shift; fi
    begin_start "${1:-$(default_dir)}"
    local d="$START_DIR"
    build_helm
    local bin
    bin="$(webhook_binary)"
    WITH_AGENT_SANDBOX=1 start_plane "$d" "$mode"

    local kubectl=("$KUBECTL_BIN" --kubeconfig="$d/kubeconfig")
    local helm=("$HELM_BIN" template "$RELEASE" "$CHART_DIR" --namespace "$RELEASE_NS")
    "${kubectl[@]}" create namespace "$RELEASE_NS" >/dev/null

    # With the real node, sandboxes get its stand-in execd and egress images
    # (no registry serves the real ones here), so that they run there.
    local images=()
    if [[ "$mode" == node ]]; then
        images=(--set "config.execd.image=$(node_image execd)" --set "config.egress.image=$(node_image egress)")
    fi
    # The configuration files, as the chart ships them (its ConfigMaps), and
    # the renewal policy (rendered only where the API serves it).
    "${helm[@]}" "${images[@]}" --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy \
        --show-only templates/configmap.yaml \
        --show-only templates/controller-configmap.yaml \
        --show-only templates/controller-renewal-policy.yaml >"$d/chart-static.yaml"
    "${kubectl[@]}" apply -f "$d/chart-static.yaml" >&2
    "${kubectl[@]}" -n "$RELEASE_NS" get configmap "$RELEASE" \
        -o jsonpath='{.data.config\.yaml}' >"$d/webhook-config.yaml"
    "${kubectl[@]}" -n "$RELEASE_NS" get configmap "$RELEASE-controller" \
        -o jsonpath='{.data.config\.yaml}' >"$d/controller-config.yaml"

    "$bin" certs --dns localhost --ip 127.0.0.1 --out "$d/webhook-certs" >&2
    local port admin ctl_admin
    pick_ports port admin ctl_admin
    log "starting sandbox-webhook serve on https://127.0.0.1:$port (admin $admin)"
    spawn "$d" webhook "$bin" serve --config "$d/webhook-config.yaml" \
        --tls-cert "$d/webhook-certs/tls.crt" --tls-key "$d/webhook-certs/tls.key" \
        --addr "127.0.0.1:$port" --admin-addr "127.0.0.1:$admin" --namespace "$RELEASE_NS"
    local webhook_pid=$SPAWNED_PID
    log "starting sandbox-webhook controller (admin $ctl_admin)"
    spawn "$d" controller env KUBECONFIG="$d/kubeconfig" "$bin" controller \
        --config "$d/controller-config.yaml" --admin-addr "127.0.0.1:$ctl_admin" \
        --namespace "$RELEASE_NS" --identity "host-$(hostname)"
    local controller_pid=$SPAWNED_PID
    wait_for "webhook /readyz" 30 "$webhook_pid" admin_ready "127.0.0.1:$admin"
    wait_for "controller /readyz" 60 "$controller_pid" admin_ready "127.0.0.1:$ctl_admin"

    # The webhook configurations, in the chart's out-of-cluster mode.
    "${helm[@]}" --set deployment.enabled=false \
        --set "webhook.url=https://127.0.0.1:$port/mutate" \
        --set-file "webhook.caBundle=$d/webhook-certs/ca.crt" \
        --show-only templates/mutatingwebhookconfiguration.yaml >"$d/chart-webhooks.yaml"
    "${kubectl[@]}" apply -f "$d/chart-webhooks.yaml" >&2
    wait_for "the apiserver calling the webhook" 30 "$webhook_pid" webhook_active "${kubectl[@]}"

    cat >>"$d/cluster.env" <<EOF
SANDBOX_WEBHOOK=$bin
RELEASE_NAMESPACE=$RELEASE_NS
WEBHOOK_URL=https://127.0.0.1:$port
WEBHOOK_ADMIN=127.0.0.1:$admin
WEBHOOK_CA=$d/webhook-certs/ca.crt
WEBHOOK_CONFIG=$d/webhook-config.yaml
CONTROLLER_ADMIN=127.0.0.1:$ctl_admin
CONTROLLER_CONFIG=$d/controller-config.yaml
EOF
    START_OK=1
    log "up: webhook and controller running; try (README, \"The whole product on a local cluster\"):"
    log "  eval \"\$($0 env${1:+ $d})\""
    log "  kubectl run demo --image=busybox:1.36 -l opensandbox.io/id=demo \\"
    log "      --annotations=opensandbox.io/platform=linux/arm64 --command -- sleep 3600"
    log "  kubectl get pods -o wide"
    print_env "$d"
}

print_env() {
    printf 'export KUBECONFIG=%s\n' "$1/kubeconfig"
    # shellcheck disable=SC2016 # $PATH is for the shell that evals this
    printf 'export PATH=%s:$PATH\n' "$KUBE_BIN_DIR"
}

cmd_env() {
    local d="${1:-$(default_dir)}"
    [[ -f "$d/cluster.env" ]] || die "no cluster in $d (run: $0 up${1:+ $d})"
    print_env "$(cd "$d" && pwd)"
}

cmd_down() {
    cmd_stop "${1:-$(default_dir)}"
}
