# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): agent-sandbox
# (sigs.k8s.io/agent-sandbox, pinned in cluster/agent-sandbox/go.mod) in a
# plane with the real node, and in `up`: its CRDs (Sandbox, and the
# extensions SandboxTemplate, SandboxClaim, SandboxWarmPool, from the
# module's own k8s/crds/, cached by cluster-build.sh) applied as they ship,
# CEL rules included, and its
# controller (`--extensions`) as a host process with the admin kubeconfig,
# as kwok runs (`--kubeconfig`). Leader election is off (one replica), and its Pod and
# Service caches hold only the objects it labelled itself
# (`--cache-label-selectors`), so a scale run's pods cost it nothing.
# Uses cluster.sh's paths, log, die, spawn, wait_for, pick_ports and the
# build functions of cluster-build.sh.

AGENT_SANDBOX_CRDS=(
    agents.x-k8s.io_sandboxes
    extensions.agents.x-k8s.io_sandboxtemplates
    extensions.agents.x-k8s.io_sandboxclaims
    extensions.agents.x-k8s.io_sandboxwarmpools
)

# probe_ok ADDR: a controller-runtime health probe answers /readyz with ok.
probe_ok() {
    [[ "$(curl -s --max-time 2 "http://$1/readyz")" == ok ]]
}

# start_agent_sandbox DIR: applies the CRDs (server-side: the Sandbox CRD
# is too large for the last-applied annotation) and starts the controller;
# returns once its probe is ready. Its variables go to AGENT_SANDBOX_VARS
# for cluster.env.
start_agent_sandbox() {
    local d="$1" t0=$SECONDS crds="$AGENT_SANDBOX_CRDS_DIR" name files=()
    build_agent_sandbox
    for name in "${AGENT_SANDBOX_CRDS[@]}"; do files+=(-f "$crds/$name.yaml"); done
    local kubectl=("$KUBECTL_BIN" --kubeconfig="$d/kubeconfig")
    "${kubectl[@]}" apply --server-side --field-manager=cluster.sh "${files[@]}" >/dev/null ||
        die "applying agent-sandbox's CRDs failed"
    "${kubectl[@]}" wait --for=condition=Established --timeout=60s "${files[@]}" >/dev/null ||
        die "agent-sandbox's CRDs were not established"
    local metrics probe
    pick_ports metrics probe
    log "starting agent-sandbox-controller $AGENT_SANDBOX_VERSION (extensions on)"
    # --kubeconfig on the command line, not in the environment: `stop` only
    # signals processes whose command line names DIR.
    spawn "$d" agent-sandbox-controller "$AGENT_SANDBOX_BIN" --kubeconfig="$d/kubeconfig" \
        --leader-elect=false --extensions --cache-label-selectors \
        --metrics-bind-address="127.0.0.1:$metrics" --health-probe-bind-address="127.0.0.1:$probe"
    wait_for "agent-sandbox-controller /readyz" 60 "$SPAWNED_PID" probe_ok "127.0.0.1:$probe"
    log "agent-sandbox $AGENT_SANDBOX_VERSION ready in $((SECONDS - t0))s (CRDs from $crds)"
    AGENT_SANDBOX_VARS="AGENT_SANDBOX_VERSION=$AGENT_SANDBOX_VERSION
AGENT_SANDBOX_CONTROLLER=$AGENT_SANDBOX_BIN
AGENT_SANDBOX_CRDS=$crds
AGENT_SANDBOX_PROBE=127.0.0.1:$probe
AGENT_SANDBOX_METRICS=127.0.0.1:$metrics"
}

# stop_agent_sandbox DIR: its controller first, so that nothing recreates
# the pods that stopping the node deletes.
stop_agent_sandbox() {
    local d="$1" pids=()
    [[ -f "$d/pids" ]] || return 0
    mapfile -t pids < <(awk '$1 == "agent-sandbox-controller" { print $2 }' "$d/pids")
    (( ${#pids[@]} )) && stop_pids "$d" "${pids[@]}"
    return 0
}
