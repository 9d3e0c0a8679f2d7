# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): the rest of a whole
# control plane once etcd and kube-apiserver answer: kube-controller-manager,
# kube-scheduler, kwok and its fake nodes; and `smoke`. Uses cluster.sh's
# paths, log, die, pick_ports, wait_for, api_curl and STARTED_PIDS.
#
# Nodes: CLUSTER_NODES lists `os/arch=count` groups (default
# "linux/amd64=3 linux/arm64=2 windows/amd64=1"); each node has
# CLUSTER_NODE_CPU cpus (default 8), 32Gi of memory and CLUSTER_NODE_PODS
# pod slots (default 110, the kubelet's default). Windows nodes carry the
# taint node.kubernetes.io/os=windows:NoSchedule, as GKE's do.

CLUSTER_NODES="${CLUSTER_NODES:-linux/amd64=3 linux/arm64=2 windows/amd64=1}"
CLUSTER_NODE_CPU="${CLUSTER_NODE_CPU:-8}"
CLUSTER_NODE_PODS="${CLUSTER_NODE_PODS:-110}"

# spawn DIR NAME BIN ARGS...: start one control-plane process in its own
# session (it outlives the caller's job control), output to DIR/NAME.log,
# its pid recorded in DIR/pids for `stop`.
spawn() {
    local d="$1" name="$2"; shift 2
    setsid "$@" </dev/null >"$d/$name.log" 2>&1 &
    local pid=$!
    STARTED_PIDS+=("$pid")
    echo "$name $pid" >>"$d/pids"
    SPAWNED_PID=$pid
}

# healthz_ok PORT: a component's own /healthz (self-signed, so -k).
healthz_ok() {
    [[ "$(curl -sk --max-time 2 "https://127.0.0.1:$1/healthz")" == "ok" ]]
}

# py_check DIR URL PATH PROGRAM: GET PATH and run the Python PROGRAM on the
# JSON (as `doc`); succeeds when it prints "yes".
py_check() {
    local d="$1" url="$2" path="$3" prog="$4" body
    body="$(api_curl "$d" "$url$path")" || return 1
    [[ "$(python3 -c "import json,sys
doc = json.load(sys.stdin)
$prog" <<<"$body")" == yes ]]
}

# nodes_ready DIR URL N: at least N nodes are Ready.
nodes_ready() {
    py_check "$1" "$2" /api/v1/nodes "
ready = [n for n in doc['items'] if any(c['type'] == 'Ready' and c['status'] == 'True'
         for c in n.get('status', {}).get('conditions', []))]
print('yes' if len(ready) >= $3 else 'no')"
}

default_service_account() {
    api_curl "$1" "$2/api/v1/namespaces/default/serviceaccounts/default" >/dev/null
}

# node_json NAME OS ARCH: a kwok node as a kubelet would register it.
node_json() {
    local name="$1" os="$2" arch="$3" taints="[]"
    if [[ "$os" == windows ]]; then
        taints='[{"key":"node.kubernetes.io/os","value":"windows","effect":"NoSchedule"}]'
    fi
    local res="{\"cpu\":\"$CLUSTER_NODE_CPU\",\"memory\":\"32Gi\",\"pods\":\"$CLUSTER_NODE_PODS\"}"
    cat <<EOF
{"apiVersion":"v1","kind":"Node",
 "metadata":{"name":"$name",
   "annotations":{"kwok.x-k8s.io/node":"fake","node.alpha.kubernetes.io/ttl":"0"},
   "labels":{"type":"kwok","kubernetes.io/hostname":"$name","kubernetes.io/os":"$os","kubernetes.io/arch":"$arch"}},
 "spec":{"taints":$taints},
 "status":{"allocatable":$res,"capacity":$res,
   "nodeInfo":{"architecture":"$arch","operatingSystem":"$os","bootID":"","containerRuntimeVersion":"kwok",
     "kernelVersion":"kwok","kubeProxyVersion":"kwok","kubeletVersion":"kwok","machineID":"","osImage":"","systemUUID":""}}}
EOF
}

# create_nodes DIR URL: the CLUSTER_NODES groups; prints how many.
create_nodes() {
    local d="$1" url="$2" group platform count os arch i n=0
    for group in $CLUSTER_NODES; do
        platform="${group%%=*}"; count="${group#*=}"
        os="${platform%%/*}"; arch="${platform#*/}"
        [[ "$count" =~ ^[0-9]+$ && -n "$os" && -n "$arch" && "$platform" == */* ]] \
            || die "CLUSTER_NODES: '$group' is not os/arch=count"
        for (( i = 0; i < count; i++ )); do
            local name="kwok-$os-$arch-$i"
            [[ "$os" == linux ]] && name="kwok-$arch-$i"
            node_json "$name" "$os" "$arch" \
                | api_curl "$d" "$url/api/v1/nodes" -X POST -H 'Content-Type: application/json' -d @- >/dev/null \
                || die "cannot create node $name"
            n=$((n + 1))
        done
    done
    printf '%s\n' "$n"
}

# check_scheduling DIR URL: a pod in `default` is bound by the scheduler and
# Running through kwok, then deleted; proves the chain before any test runs.
check_scheduling() {
    local d="$1" url="$2" pod="cluster-check-$$"
    local pods="$url/api/v1/namespaces/default/pods"
    api_curl "$d" "$pods" -X POST -H 'Content-Type: application/json' -d @- >/dev/null <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$pod"},
 "spec":{"nodeSelector":{"kubernetes.io/os":"linux"},"automountServiceAccountToken":false,
   "containers":[{"name":"c","image":"busybox"}]}}
EOF
    wait_for "pod default/$pod Running on a kwok node" 60 "$SCHEDULER_PID" \
        py_check "$d" "$url" "/api/v1/namespaces/default/pods/$pod" "
print('yes' if doc['spec'].get('nodeName') and doc.get('status', {}).get('phase') == 'Running' else 'no')"
    api_curl "$d" "$pods/$pod" -X DELETE >/dev/null
    wait_for "pod default/$pod deleted by kwok" 30 "$KWOK_PID" pod_gone "$d" "$pods/$pod"
}

pod_gone() {
    local code
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$1/ca.crt" \
        --cert "$1/admin.crt" --key "$1/admin.key" "$2")"
    [[ "$code" == 404 ]]
}

# start_rest_of_plane DIR API_URL: controller-manager, scheduler, kwok,
# the nodes; returns once a pod can be scheduled and run.
start_rest_of_plane() {
    local d="$1" url="$2" kc="$1/kubeconfig"
    local cm_port sched_port kwok_port
    pick_ports cm_port sched_port kwok_port
    local auth=(--kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc"
                --bind-address=127.0.0.1 --leader-elect=false --profiling=false)

    log "starting kube-controller-manager $KUBE_VERSION (https://127.0.0.1:$cm_port)"
    # Every default controller; the admin credentials for all of them (one
    # user, so no per-controller ServiceAccounts to bootstrap). The QPS is
    # raised so that the garbage collector and the Job controller keep up
    # with the scale benchmark.
    spawn "$d" kube-controller-manager "$KUBE_CONTROLLER_MANAGER_BIN" "${auth[@]}" \
        --secure-port="$cm_port" --cert-dir="$d/kcm-certs" \
        --service-account-private-key-file="$d/sa.key" --root-ca-file="$d/ca.crt" \
        --cluster-name=sandbox-webhook-e2e --use-service-account-credentials=false \
        --kube-api-qps=1000 --kube-api-burst=2000
    local cm_pid=$SPAWNED_PID

    log "starting kube-scheduler $KUBE_VERSION (https://127.0.0.1:$sched_port)"
    spawn "$d" kube-scheduler "$KUBE_SCHEDULER_BIN" "${auth[@]}" \
        --secure-port="$sched_port" --cert-dir="$d/scheduler-certs" \
        --kube-api-qps=1000 --kube-api-burst=2000
    SCHEDULER_PID=$SPAWNED_PID

    log "starting kwok $KWOK_VERSION (http://127.0.0.1:$kwok_port)"
    cp "$MOD_DIR/kwok/stages.yaml" "$d/kwok.yaml"
    # Only nodes annotated kwok.x-k8s.io/node=fake are kwok's.
    spawn "$d" kwok "$KWOK_BIN" --kubeconfig="$kc" --config="$d/kwok.yaml" \
        --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
        --server-address="127.0.0.1:$kwok_port" --node-lease-duration-seconds=40 \
        --cidr=10.244.0.0/16
    KWOK_PID=$SPAWNED_PID

    wait_for "kube-controller-manager /healthz" 60 "$cm_pid" healthz_ok "$cm_port"
    wait_for "kube-scheduler /healthz" 60 "$SCHEDULER_PID" healthz_ok "$sched_port"
    local n
    n="$(create_nodes "$d" "$url")"
    wait_for "$n kwok nodes Ready" 60 "$KWOK_PID" nodes_ready "$d" "$url" "$n"
    # The ServiceAccount admission plugin refuses pods until the
    # controller-manager has made a namespace's `default` ServiceAccount.
    wait_for "ServiceAccount default/default" 60 "$cm_pid" default_service_account "$d" "$url"
    check_scheduling "$d" "$url"
    log "nodes: $CLUSTER_NODES (cpu $CLUSTER_NODE_CPU, pods $CLUSTER_NODE_PODS each), all Ready"
    PLANE_PORTS="KUBE_CONTROLLER_MANAGER_PORT=$cm_port
KUBE_SCHEDULER_PORT=$sched_port
KWOK_PORT=$kwok_port"
}

# ---------------------------------------------------------------------------
# smoke: exercise a started control plane with plain REST calls
# ---------------------------------------------------------------------------
# smoke_pod_create DIR URL NAME: creates pod default/NAME through the
# apiserver at URL (a busybox container; nothing schedules it).
smoke_pod_create() {
    api_curl "$1" "$2/api/v1/namespaces/default/pods" -X POST \
        -H 'Content-Type: application/json' -d @- >/dev/null <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$3"},
 "spec":{"containers":[{"name":"c","image":"busybox"}]}}
EOF
}

# smoke_pod_delete DIR URL NAME: deletes pod default/NAME at once.
smoke_pod_delete() {
    api_curl "$1" "$2/api/v1/namespaces/default/pods/$3" -X DELETE \
        -H 'Content-Type: application/json' -d '{"gracePeriodSeconds":0}' >/dev/null
}

cmd_smoke() {
    local d="${1:?usage: cluster.sh smoke DIR}"
    d="$(cd "$d" && pwd)"
    [[ -f "$d/cluster.env" ]] || die "no control plane in $d (run: $0 start $d)"
    local url
    url="$(sed -n 's/^KUBE_APISERVER_URL=//p' "$d/cluster.env")"
    local suffix="$$-$RANDOM"
    local json=(-H 'Content-Type: application/json')

    namespaces_exist "$d" "$url" || die "namespaces default/kube-system missing"
    log "ok: namespaces default and kube-system exist"

    local pod="smoke-$suffix"
    smoke_pod_create "$d" "$url" "$pod"
    grep -q "\"name\": *\"$pod\"" <<<"$(api_curl "$d" "$url/api/v1/namespaces/default/pods/$pod")" \
        || die "pod $pod not readable"
    smoke_pod_delete "$d" "$url" "$pod"
    log "ok: created, read and deleted pod default/$pod"

    local ns="smoke-$suffix" out
    out="$(api_curl "$d" "$url/api/v1/namespaces" -X POST "${json[@]}" \
        -d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}")"
    grep -q "\"kubernetes.io/metadata.name\": *\"$ns\"" <<<"$out" \
        || die "namespace $ns lacks the kubernetes.io/metadata.name label"
    log "ok: created namespace $ns (label kubernetes.io/metadata.name set; without a"
    log "    controller-manager a deleted namespace stays Terminating, so it is left in place)"

    local mwc="smoke-$suffix"
    api_curl "$d" "$url/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations" \
        -X POST "${json[@]}" -d @- >/dev/null <<EOF
{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration",
 "metadata":{"name":"$mwc"},
 "webhooks":[{"name":"smoke.sandbox-webhook.test",
   "clientConfig":{"url":"https://127.0.0.1:1/mutate"},
   "rules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["pods"]}],
   "failurePolicy":"Ignore","sideEffects":"None","admissionReviewVersions":["v1"],"timeoutSeconds":2}]}
EOF
    # With failurePolicy Ignore an unreachable webhook must not block pod creation.
    local pod2="smoke2-$suffix"
    smoke_pod_create "$d" "$url" "$pod2"
    smoke_pod_delete "$d" "$url" "$pod2"
    api_curl "$d" "$url/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/$mwc" \
        -X DELETE >/dev/null
    if api_curl "$d" "$url/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/$mwc" \
        >/dev/null 2>&1; then
        die "MutatingWebhookConfiguration $mwc still present after delete"
    fi
    log "ok: MutatingWebhookConfiguration $mwc created (failurePolicy Ignore, pod create passed) and deleted"
    log "smoke test passed"
}

# audit_policy DIR: the apiserver's audit policy, at Metadata (no bodies):
# who writes Leases (the controller's leader election is checked against
# it), and every pod create and workload write, whose events carry the
# admission webhooks' audit annotations (sandbox-webhook.<prefix>/decision
# and the like, contract: audit.log). --audit-log-maxsize bounds the file
# under the scale benchmark's tens of thousands of creates.
audit_policy() {
    cat >"$1/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    resources: [{group: coordination.k8s.io, resources: [leases]}]
    verbs: [create, update, patch]
  - level: Metadata
    resources: [{group: "", resources: [pods]}]
    verbs: [create]
  - level: Metadata
    resources:
      - {group: apps, resources: [deployments, statefulsets, daemonsets, replicasets]}
      - {group: batch, resources: [jobs, cronjobs]}
    verbs: [create, update]
  - level: None
EOF
}
