#!/usr/bin/env bash
# A whole Kubernetes control plane as plain processes, for sandbox-webhook's
# end-to-end tests and for trying the product without kind or a container
# engine: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# kwok, whose fake nodes (3 linux/amd64, 2 linux/arm64, 1 tainted
# windows/amd64) take pods to Running without a container runtime, and
# (`--node`, and `up` by default) one real node: a kubelet with containerd,
# runc and a bridge of its own, where pods really run (cluster-node.sh).
# `--bare` starts only etcd and kube-apiserver, in the spirit of
# controller-runtime's envtest. With the real node, and in `up`, agent-sandbox
# (sigs.k8s.io/agent-sandbox) is installed too: its CRDs and its controller
# (cluster-agent-sandbox.sh).
#
# Usage:
#   tests/e2e/cluster.sh up [--no-node] [DIR]
#                                     the whole product: a control plane with the real
#                                     node, the webhook and the controller as host
#                                     processes, wired with the webhook configurations
#                                     the chart renders (sandboxes get the node's
#                                     stand-in execd and egress images); prints the
#                                     `export` lines to use it
#   tests/e2e/cluster.sh env [DIR]    print those `export` lines again
#   tests/e2e/cluster.sh down [DIR]   stop everything `up` started (idempotent)
#                                     (DIR defaults to $SANDBOX_WEBHOOK_CLUSTER, else
#                                     ${SANDBOX_WEBHOOK_CACHE:-~/.cache/sandbox-webhook}/cluster)
#   tests/e2e/cluster.sh build        build (or reuse) etcd, the Kubernetes binaries
#                                     (kube-apiserver, kube-scheduler,
#                                     kube-controller-manager, kubectl, kubelet), kwok,
#                                     helm, the real node (below) and agent-sandbox's
#                                     controller; prints NAME=PATH lines on stdout
#   tests/e2e/cluster.sh build-agent-sandbox
#                                     build (or reuse) agent-sandbox's controller only;
#                                     prints its path
#   tests/e2e/cluster.sh build-node   build (or reuse) the real node's containerd, its
#                                     stand-in programs and images (installs runc, the
#                                     CNI plugins and podman from Debian when missing)
#   tests/e2e/cluster.sh helm         build (or reuse) helm only; prints its path
#   tests/e2e/cluster.sh kubectl      build (or reuse) the Kubernetes binaries only; prints
#                                     kubectl's path
#   tests/e2e/cluster.sh start [--bare|--node] DIR
#                                     start a control plane whose state lives in DIR
#                                     (`--node`: with the real node and agent-sandbox);
#                                     prints `export KUBECONFIG=DIR/kubeconfig` on stdout
#   tests/e2e/cluster.sh load DIR ARCHIVE...
#                                     import OCI image archives into DIR's real node
#   tests/e2e/cluster.sh smoke DIR    check a started control plane: pod, namespace,
#                                     MutatingWebhookConfiguration create/delete
#   tests/e2e/cluster.sh stop DIR     stop the processes listed in DIR/pids and remove
#                                     the real node's containers, mounts and bridge
#                                     (idempotent)
#
# Everything informational goes to stderr, so `eval "$(cluster.sh up)"` works.
# `helm` builds only helm. Binaries are cached in
# ${SANDBOX_WEBHOOK_CACHE:-$HOME/.cache/sandbox-webhook}/bin, keyed by version
# (and, for helm, the Kubernetes version stamped into it).
# Network traffic stays on the machine: everything listens on 127.0.0.1,
# except, with the real node, the apiserver and the kubelet, which listen on
# the node's bridge, whose pods are the only other addresses anything reaches.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MOD_DIR="$SCRIPT_DIR/cluster"
# The real node's stand-in programs and images.
STANDIN_SRC="$(cd "$SCRIPT_DIR/../image/node" && pwd)"
CACHE_DIR="${SANDBOX_WEBHOOK_CACHE:-$HOME/.cache/sandbox-webhook}"
BIN_DIR="$CACHE_DIR/bin"

log() { printf '[cluster.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Version of module $2 as pinned in the go.mod at $1 (the single source of truth).
pinned_version() {
    local v
    v="$(awk -v m="$2" '($1 == m && $2 ~ /^v/) { print $2; exit } ($1 == "require" && $2 == m) { print $3; exit }' "$1")"
    [[ -n "$v" ]] || die "cannot find $2 in $1"
    printf '%s\n' "$v"
}

KUBE_VERSION="$(pinned_version "$MOD_DIR/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(pinned_version "$MOD_DIR/etcd/go.mod" go.etcd.io/etcd/server/v3)"
KWOK_VERSION="$(pinned_version "$MOD_DIR/kwok/go.mod" sigs.k8s.io/kwok)"
HELM_VERSION="$(pinned_version "$MOD_DIR/helm/go.mod" helm.sh/helm/v3)"
CONTAINERD_VERSION="$(pinned_version "$MOD_DIR/containerd/go.mod" github.com/containerd/containerd/v2)"
AGENT_SANDBOX_VERSION="$(pinned_version "$MOD_DIR/agent-sandbox/go.mod" sigs.k8s.io/agent-sandbox)"

# Kubernetes major/minor of the control plane, e.g. v1.37.2 -> 1 and 37.
KUBE_MAJOR="${KUBE_VERSION#v}"; KUBE_MAJOR="${KUBE_MAJOR%%.*}"
KUBE_MINOR="${KUBE_VERSION#v*.}"; KUBE_MINOR="${KUBE_MINOR%%.*}"

# The four Kubernetes binaries come out of one `go build` (see
# build_control_plane), into one directory per version.
KUBE_BIN_DIR="$BIN_DIR/kubernetes-$KUBE_VERSION"
KUBE_APISERVER_BIN="$KUBE_BIN_DIR/kube-apiserver"
KUBE_SCHEDULER_BIN="$KUBE_BIN_DIR/kube-scheduler"
KUBE_CONTROLLER_MANAGER_BIN="$KUBE_BIN_DIR/kube-controller-manager"
KUBECTL_BIN="$KUBE_BIN_DIR/kubectl"
KUBELET_BIN="$KUBE_BIN_DIR/kubelet"
ETCD_BIN="$BIN_DIR/etcd-$ETCD_VERSION"
KWOK_BIN="$BIN_DIR/kwok-$KWOK_VERSION"
# helm is stamped with the control plane's Kubernetes version (see build_helm),
# so the cache key names it too: a build with other stamping is another file.
HELM_BIN="$BIN_DIR/helm-$HELM_VERSION-k8s$KUBE_MAJOR.$KUBE_MINOR"
# The real node's runtime: containerd, its runc shim and ctr, one go build.
CONTAINERD_BIN_DIR="$BIN_DIR/containerd-$CONTAINERD_VERSION"
# agent-sandbox's controller (Sandbox and its extensions).
AGENT_SANDBOX_BIN="$BIN_DIR/agent-sandbox-controller-$AGENT_SANDBOX_VERSION"
AGENT_SANDBOX_CRDS_DIR="$BIN_DIR/agent-sandbox-crds-$AGENT_SANDBOX_VERSION"

# ---------------------------------------------------------------------------
# Sourced parts: builds (cluster-build.sh), certificates and the kubeconfig
# (cluster-pki.sh), the controller-manager, scheduler, kwok and nodes
# (cluster-plane.sh), and up/env/down (cluster-up.sh).
# ---------------------------------------------------------------------------
# shellcheck source-path=SCRIPTDIR source=cluster-build.sh
source "$SCRIPT_DIR/cluster-build.sh"
# shellcheck source-path=SCRIPTDIR source=cluster-pki.sh
source "$SCRIPT_DIR/cluster-pki.sh"
# shellcheck source-path=SCRIPTDIR source=cluster-plane.sh
source "$SCRIPT_DIR/cluster-plane.sh"
# shellcheck source-path=SCRIPTDIR source=cluster-up.sh
source "$SCRIPT_DIR/cluster-up.sh"
# shellcheck source-path=SCRIPTDIR source=cluster-node.sh
source "$SCRIPT_DIR/cluster-node.sh"
# shellcheck source-path=SCRIPTDIR source=cluster-images.sh
source "$SCRIPT_DIR/cluster-images.sh"
# shellcheck source-path=SCRIPTDIR source=cluster-agent-sandbox.sh
source "$SCRIPT_DIR/cluster-agent-sandbox.sh"

# ---------------------------------------------------------------------------
# start / stop
# ---------------------------------------------------------------------------

need_tools() {
    local missing=()
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    if (( ${#missing[@]} )); then
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
            log "installing ${missing[*]} with apt-get"
            apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
        else
            die "missing tools: ${missing[*]}"
        fi
    fi
}

# A currently free TCP port on 127.0.0.1 (the kernel picks it).
free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
        return
    fi
    local p i
    for i in $(seq 1 100); do
        p=$(( 20000 + RANDOM % 40000 ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then printf '%s\n' "$p"; return; fi
    done
    die "no free port found"
}

# Distinct free ports, one per argument name: sets the named variables.
pick_ports() {
    local used=" " name p
    for name in "$@"; do
        p="$(free_port)"
        while [[ "$used" == *" $p "* ]]; do p="$(free_port)"; done
        used+="$p "
        printf -v "$name" '%s' "$p"
    done
}

# True if PID is alive and its command line mentions DIR (guards against PID reuse).
pid_is_ours() {
    local pid="$1" d="$2"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    [[ -r "/proc/$pid/cmdline" ]] || return 0
    # Read the whole command line before matching: under pipefail a grep -q
    # that stops at the first match can SIGPIPE the writer and fail the pipe.
    local cmdline
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline")"
    grep -qF -- "$d" <<<"$cmdline"
}

# stop_pids DIR PID...: TERM, wait up to STOP_GRACE seconds (15 unless set),
# then KILL; only our own processes.
stop_pids() {
    local d="$1"; shift
    local pid live=() i
    for pid in "$@"; do
        if pid_is_ours "$pid" "$d"; then live+=("$pid"); kill -TERM "$pid" 2>/dev/null || true; fi
    done
    (( ${#live[@]} )) || return 0
    for i in $(seq 1 $(( ${STOP_GRACE:-15} * 10 ))); do
        local still=()
        for pid in "${live[@]}"; do kill -0 "$pid" 2>/dev/null && still+=("$pid"); done
        (( ${#still[@]} )) || return 0
        sleep 0.1
    done
    for pid in "${live[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            log "pid $pid ($(ps -o comm= -p "$pid" 2>/dev/null || echo '?')) did not exit on TERM in ${STOP_GRACE:-15}s; sending KILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    for pid in "${live[@]}"; do
        for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    done
}

cmd_stop() {
    local d="${1:?usage: cluster.sh stop DIR}"
    [[ -d "$d" ]] || { log "nothing to stop: $d does not exist"; return 0; }
    d="$(cd "$d" && pwd)"
    # agent-sandbox's controller first (it would recreate what is stopped),
    # then the real node's pods, through the API, while it still answers.
    stop_agent_sandbox "$d"
    node_drain "$d"
    if [[ -f "$d/pids" ]]; then
        # Kubernetes' own processes first (reverse order of start) with 3 s:
        # kube-apiserver waits ~60 s for a client still watching, and a
        # throwaway plane has nothing to drain. Then, with 15 s, the webhook
        # and controller (their drain is the product's), containerd, etcd.
        local kube=() rest=()
        mapfile -t kube < <(awk '$1 ~ /^(kube-|kubelet$|kwok$|agent-sandbox)/ {print $2}' "$d/pids" | tac)
        mapfile -t rest < <(awk '$1 !~ /^(kube-|kubelet$|kwok$|agent-sandbox)/ {print $2}' "$d/pids" | tac)
        STOP_GRACE=3 stop_pids "$d" "${kube[@]}"
        stop_pids "$d" "${rest[@]}"
        rm -f "$d/pids"
        log "stopped control plane in $d"
    else
        log "nothing to stop: no $d/pids"
    fi
    if [[ -f "$d/node.env" ]]; then
        node_cleanup "$d"
        log "removed the real node's containers, mounts and bridge"
    fi
}

# ---- start ----
START_DIR=""
STARTED_PIDS=()
START_OK=0

on_start_exit() {
    local rc=$?
    if (( ! START_OK )) && [[ -n "$START_DIR" && -f "$START_DIR/node.env" ]] && (( ! ${#STARTED_PIDS[@]} )); then
        node_cleanup "$START_DIR"
    fi
    if (( ! START_OK )) && (( ${#STARTED_PIDS[@]} )); then
        log "start failed (exit $rc); stopping what was started"
        local i rev=()
        for (( i=${#STARTED_PIDS[@]}-1; i>=0; i-- )); do rev+=("${STARTED_PIDS[i]}"); done
        stop_pids "$START_DIR" "${rev[@]}"
        rm -f "$START_DIR/pids"
        node_cleanup "$START_DIR"
        for f in "$START_DIR"/*.log; do
            if [[ -f "$f" ]]; then
                log "--- last lines of $f ---"
                tail -n 25 "$f" >&2 || true
            fi
        done
    fi
}

# begin_start DIR: makes DIR, sets START_DIR to its absolute path and arms the
# traps that stop whatever a failed start left running (on_start_exit).
begin_start() {
    mkdir -p "$1"
    START_DIR="$(cd "$1" && pwd)"
    trap on_start_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# wait_for DESCRIPTION TIMEOUT_S PID COMMAND...: poll COMMAND until success.
wait_for() {
    local what="$1" timeout="$2" pid="$3"; shift 3
    local deadline=$((SECONDS + timeout))
    until "$@" >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || die "$what: process $pid exited"
        (( SECONDS < deadline )) || die "$what: not ready after ${timeout}s"
        sleep 0.2
    done
}

api_curl() {
    # Usage: api_curl DIR URL [curl args...]
    local d="$1" url="$2"; shift 2
    curl -sS --fail-with-body --max-time 10 --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" \
        "$@" "$url"
}

readyz_ok() {
    [[ "$(api_curl "$1" "$2/readyz")" == "ok" ]]
}

namespaces_exist() {
    local d="$1" url="$2" ns
    for ns in default kube-system; do
        api_curl "$d" "$url/api/v1/namespaces/$ns" >/dev/null || return 1
    done
}

# start_plane DIR MODE: the control plane in DIR: MODE `bare` is etcd and
# kube-apiserver only, `whole` adds the controller-manager, the scheduler
# and kwok's nodes, `node` adds the real node too (cluster-node.sh; the
# apiserver then listens on the node's bridge, see there). cluster.env is
# written last. The caller sets the traps.
start_plane() {
    local d="$1" mode="$2"
    START_DIR="$d"
    if [[ -f "$d/pids" ]]; then
        local pid old=()
        mapfile -t old < <(awk '{print $2}' "$d/pids")
        for pid in "${old[@]}"; do
            pid_is_ours "$pid" "$d" && die "a control plane is already running in $d (run: $0 stop $d)"
        done
        rm -f "$d/pids"
    fi
    [[ -f "$d/node.env" ]] && node_cleanup "$d"

    need_tools
    build_control_plane
    [[ "$mode" == bare ]] || build_kwok
    # With the real node, helm too: it is there to install the chart on.
    if [[ "$mode" == node ]]; then build_node; build_helm; fi
    if [[ "$mode" == node || "${WITH_AGENT_SANDBOX:-0}" == 1 ]]; then build_agent_sandbox; fi

    rm -rf "$d/etcd-data"
    rm -f "$d/kubeconfig" "$d/cluster.env" "$d"/*.log
    : >"$d/pids"

    local etcd_port etcd_peer_port api_port
    pick_ports etcd_port etcd_peer_port api_port
    local etcd_url="http://127.0.0.1:$etcd_port"
    # Where the apiserver listens, its Service range, and how it is authorized.
    local api_addr=127.0.0.1 service_cidr=10.0.0.0/24 authz=RBAC node_flags=() extra_san=""
    if [[ "$mode" == node ]]; then
        node_net_up "$d"
        node_env "$d"
        api_addr="$NODE_IP" api_port=443 service_cidr="$NODE_SERVICE_CIDR" authz=Node,RBAC
        extra_san="IP:$NODE_IP"
    fi
    local api_url="https://$api_addr:$api_port"
    gen_certs "$d" "$extra_san"
    if [[ "$mode" == node ]]; then
        gen_node_certs "$d"
        node_apiserver_flags "$d"
        node_flags=("${NODE_APISERVER_FLAGS[@]}")
    fi

    log "starting etcd $ETCD_VERSION on $etcd_url"
    # 8 GiB backend quota: the scale benchmark stores 50,000 injected pods.
    spawn "$d" etcd "$ETCD_BIN" \
        --name=default \
        --data-dir="$d/etcd-data" \
        --listen-client-urls="$etcd_url" \
        --advertise-client-urls="$etcd_url" \
        --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
        --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
        --initial-cluster="default=http://127.0.0.1:$etcd_peer_port" \
        --unsafe-no-fsync=true \
        --quota-backend-bytes=8589934592 \
        --log-level=warn
    local etcd_pid=$SPAWNED_PID
    wait_for "etcd" 30 "$etcd_pid" curl -sf --max-time 2 "$etcd_url/health"

    # The ServiceAccount admission plugin needs each namespace's `default`
    # ServiceAccount, which only a controller-manager creates: off in a bare
    # plane, where every Pod create would otherwise be refused.
    local enabled="MutatingAdmissionWebhook,ValidatingAdmissionWebhook,NamespaceLifecycle,PodSecurity"
    local plugins=("--enable-admission-plugins=$enabled,ServiceAccount")
    case "$mode" in
        bare) plugins=("--enable-admission-plugins=$enabled" --disable-admission-plugins=ServiceAccount) ;;
        node) plugins=("--enable-admission-plugins=$enabled,ServiceAccount,NodeRestriction") ;;
    esac
    audit_policy "$d"
    log "starting kube-apiserver $KUBE_VERSION on $api_url"
    # PodSecurity is on by default; it is named so that the Pod Security e2e
    #   scenario (restricted/baseline/privileged namespaces) never silently
    #   tests nothing.
    # --authorization-mode=RBAC: the admin client cert is in system:masters
    #   (Node,RBAC with the real node, whose kubelet is system:node:real-node).
    # --endpoint-reconciler-type=none: the reconciler of the `kubernetes` Service's
    #   endpoints refuses a loopback advertise address and the apiserver exits.
    # --max-*-inflight: the scale benchmark creates pods as fast as the
    #   apiserver takes them; the defaults (400/200) would throttle it first.
    spawn "$d" kube-apiserver "$KUBE_APISERVER_BIN" \
        --etcd-servers="$etcd_url" \
        --bind-address="$api_addr" \
        --advertise-address="$api_addr" \
        --endpoint-reconciler-type=none \
        --secure-port="$api_port" \
        --cert-dir="$d/apiserver-certs" \
        --tls-cert-file="$d/apiserver.crt" \
        --tls-private-key-file="$d/apiserver.key" \
        --client-ca-file="$d/ca.crt" \
        --service-cluster-ip-range="$service_cidr" \
        --service-account-issuer="$api_url" \
        --service-account-key-file="$d/sa.pub" \
        --service-account-signing-key-file="$d/sa.key" \
        --authorization-mode="$authz" \
        "${plugins[@]}" \
        "${node_flags[@]}" \
        --audit-policy-file="$d/audit-policy.yaml" \
        --audit-log-path="$d/audit.log" \
        --audit-log-maxsize=100 \
        --audit-log-maxbackup=1 \
        --allow-privileged=true \
        --max-requests-inflight=1000 \
        --max-mutating-requests-inflight=500 \
        --profiling=false
    local api_pid=$SPAWNED_PID
    wait_for "kube-apiserver /readyz" 120 "$api_pid" readyz_ok "$d" "$api_url"
    wait_for "namespaces default and kube-system" 60 "$api_pid" namespaces_exist "$d" "$api_url"
    write_kubeconfig "$d" "$api_url"

    PLANE_PORTS="" NODE_VARS="" AGENT_SANDBOX_VARS=""
    local plane=bare
    if [[ "$mode" != bare ]]; then
        start_rest_of_plane "$d" "$api_url"
        plane=whole
    fi
    if [[ "$mode" == node ]]; then
        start_node "$d" "$api_url"
        plane=node
    fi
    # agent-sandbox comes with the real node, and with `up` (WITH_AGENT_SANDBOX).
    if [[ "$mode" == node || "${WITH_AGENT_SANDBOX:-0}" == 1 ]]; then
        start_agent_sandbox "$d"
    fi
    cat >"$d/cluster.env.tmp" <<EOF
KUBECONFIG=$d/kubeconfig
KUBE_APISERVER_URL=$api_url
ETCD_URL=$etcd_url
CA_CERT=$d/ca.crt
CA_KEY=$d/ca.key
ADMIN_CERT=$d/admin.crt
ADMIN_KEY=$d/admin.key
HELM=$HELM_BIN
KUBECTL=$KUBECTL_BIN
AUDIT_LOG=$d/audit.log
PLANE=$plane
${PLANE_PORTS}
${NODE_VARS}
${AGENT_SANDBOX_VARS}
EOF
    mv -f "$d/cluster.env.tmp" "$d/cluster.env"
    log "control plane ready: $api_url ($(awk '{printf "%s%s", s, $1; s=", "}' "$d/pids"); logs in $d)"
}

# cmd_load DIR ARCHIVE...: OCI archives into DIR's real node.
cmd_load() {
    local d
    d="$(cd "$1" && pwd)"; shift
    [[ -S "$d/node/containerd.sock" ]] || die "no real node runs in $d (start it with --node, or up)"
    node_import "$d" "$@"
}

cmd_start() {
    local mode=whole
    case "${1:-}" in
        --bare) mode=bare; shift ;;
        --node) mode=node; shift ;;
    esac
    [[ $# -eq 1 ]] || usage
    begin_start "$1"
    local d="$START_DIR"
    start_plane "$d" "$mode"
    START_OK=1
    printf 'export KUBECONFIG=%s\n' "$d/kubeconfig"
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

main() {
    local sub="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$sub" in
        build) cmd_build "$@" ;;
        build-node) build_node; log "node: containerd, stand-ins and images in $CACHE_DIR" ;;
        load) [[ $# -ge 2 ]] || usage; cmd_load "$@" ;;
        helm) cmd_helm "$@" ;;
        kubectl) build_control_plane; printf '%s\n' "$KUBECTL_BIN" ;;
        build-agent-sandbox) build_agent_sandbox; printf '%s\n' "$AGENT_SANDBOX_BIN" ;;
        start) cmd_start "$@" ;;
        up) cmd_up "$@" ;;
        env) cmd_env "$@" ;;
        down) cmd_down "$@" ;;
        stop) [[ $# -eq 1 ]] || usage; cmd_stop "$1" ;;
        smoke) [[ $# -eq 1 ]] || usage; cmd_smoke "$1" ;;
        *) usage ;;
    esac
}

main "$@"
