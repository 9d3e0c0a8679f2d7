# shellcheck shell=bash
# Part of tests/e2e/cluster.sh (sourced there, not run): the real node, a
# kubelet with containerd (built from the Go module proxy), Debian's runc and
# CNI plugins, beside the kwok nodes. Everything it makes lives in DIR/node
# or is named in DIR/node.env, so that `stop` removes exactly that.
#
# Network: a bridge of its own (a free name, a free 10.x.y.0/24) with no
# masquerade and no route off the machine: a pod's only route is the
# bridge's subnet. The bridge's own address is the node's InternalIP and the
# apiserver's address: the apiserver listens there on 443, and the Service
# range is the first /27 of the same subnet, so the `kubernetes` Service's
# ClusterIP is that very address and pods reach the apiserver through it
# without kube-proxy. Pods get addresses from .32 on.
#
# Identity: the kubelet runs as system:node:real-node (Node authorizer,
# NodeRestriction); it serves 10250 on the node's address with a certificate
# of the cluster's CA, authenticates clients by that CA and by webhook, and
# authorizes by webhook; the apiserver calls it with its own client
# certificate (kube-apiserver-kubelet-client, bound to
# system:kubelet-api-admin), so `kubectl logs` and `exec` work with
# authentication on.
#
# The node is tainted sandbox-webhook.test/real-node=true:NoSchedule and
# labelled sandbox-webhook.test/node=real: only pods that ask for it land
# there (the kwok nodes take everything else, as before).
#
# Uses cluster.sh's paths, log, die, spawn, wait_for, api_curl, py_check,
# pick_ports and the image functions of cluster-images.sh.

NODE_NAME="real-node"
NODE_TAINT_KEY="sandbox-webhook.test/real-node"
NODE_LABEL_KEY="sandbox-webhook.test/node"

# node_packages: what the node needs from Debian (runc, the CNI plugins,
# podman for the images), installed when missing; root and iproute2.
node_packages() {
    [[ "$(id -u)" == 0 ]] || die "the real node needs root (a bridge, mounts, containerd); run as root or use --no-node"
    command -v ip >/dev/null 2>&1 || die "iproute2 (ip) is needed for the real node"
    local missing=()
    command -v runc >/dev/null 2>&1 || missing+=(runc)
    [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
        missing+=(containernetworking-plugins)
    command -v podman >/dev/null 2>&1 || missing+=(podman)
    if (( ${#missing[@]} )); then
        log "installing ${missing[*]} with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
            { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; } ||
            die "apt-get install ${missing[*]} failed"
    fi
}

# build_node: everything the node runs, built or reused.
build_node() {
    node_packages
    build_containerd
    build_standins
    build_node_images
}

node_ctr() {
    local d="$1"; shift
    "$CONTAINERD_BIN_DIR/ctr" --address "$d/node/containerd.sock" --namespace k8s.io "$@"
}

# ---------------------------------------------------------------------------
# network
# ---------------------------------------------------------------------------

# node_net_up DIR: a new bridge on a free /24; its names go to DIR/node.env.
# Picking and creating hold a lock so that concurrent runs never pick the same.
node_net_up() {
    local d="$1" pick bridge="" i
    mkdir -p "$CACHE_DIR"
    exec 8>"$CACHE_DIR/.node-net.lock"
    flock 8
    # A /24 in 10.200.0.0/13 that overlaps no address and no route here.
    pick="$(python3 - <<'EOF'
import ipaddress, json, random, subprocess
taken = []
for args in (["-j", "-4", "addr"], ["-j", "-4", "route", "show", "table", "all"]):
    for item in json.loads(subprocess.run(["ip", *args], capture_output=True, check=True).stdout or b"[]"):
        for net in [a.get("local") + "/" + str(a.get("prefixlen")) for a in item.get("addr_info", [])] + [item.get("dst")]:
            if net and net not in ("default", "0.0.0.0/0"):
                taken.append(ipaddress.ip_network(net if "/" in net else net + "/32", strict=False))
for _ in range(1000):
    net = ipaddress.ip_network(f"10.{random.randint(200, 207)}.{random.randint(0, 255)}.0/24")
    if not any(net.overlaps(t) for t in taken):
        print(net)
        break
EOF
)" || true
    [[ -n "$pick" ]] || { exec 8>&-; die "no free 10.200.0.0/13 subnet for the node's bridge"; }
    local prefix="${pick%.0/24}"
    for i in $(seq 1 20); do
        bridge="swb$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
        # `ip link add` refuses an existing name: another run's bridge is never taken over.
        if ip link add name "$bridge" type bridge 2>/dev/null; then break; fi
        bridge=""
    done
    [[ -n "$bridge" ]] || { exec 8>&-; die "could not create a bridge"; }
    cat >"$d/node.env" <<EOF
NODE_BRIDGE=$bridge
NODE_SUBNET=$pick
NODE_IP=$prefix.1
NODE_SERVICE_CIDR=$prefix.0/27
NODE_POD_RANGE=$prefix.32-$prefix.254
EOF
    ip addr add "$prefix.1/24" dev "$bridge"
    ip link set "$bridge" up
    exec 8>&-
    log "node network: bridge $bridge, $pick (no masquerade, no route off the machine)"
}

# node_env DIR: loads DIR/node.env into NODE_* variables.
node_env() {
    [[ -f "$1/node.env" ]] || return 1
    # shellcheck disable=SC1091
    source "$1/node.env"
}

node_net_down() {
    local d="$1"
    node_env "$d" || return 0
    # Only a bridge that still carries this run's address is ours to delete.
    if ip -4 -o addr show dev "$NODE_BRIDGE" 2>/dev/null | grep -qF " $NODE_IP/24 "; then
        ip link del "$NODE_BRIDGE" 2>/dev/null || log "could not delete bridge $NODE_BRIDGE"
    fi
    # libcni's result cache, keyed by the network's name (the bridge's).
    rm -f /var/lib/cni/results/"$NODE_BRIDGE"-* 2>/dev/null || true
}

# ---------------------------------------------------------------------------
# certificates: the kubelet's serving and client certificates, and the
# apiserver's client certificate for the kubelet (before the apiserver starts)
# ---------------------------------------------------------------------------
gen_node_certs() {
    local d="$1"
    node_env "$d"
    {
        cat "$d/openssl.cnf"
        leaf_extensions v3_kubelet serverAuth "IP:$NODE_IP, DNS:$NODE_NAME"
    } >"$d/node-openssl.cnf"
    sign_cert "$d" kubelet-serving "/CN=$NODE_NAME" v3_kubelet "$d/node-openssl.cnf"
    sign_cert "$d" kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" v3_client
    sign_cert "$d" apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client" v3_client
}

# The apiserver's flags for a plane with the real node (see the top).
node_apiserver_flags() {
    local d="$1"
    NODE_APISERVER_FLAGS=(
        --kubelet-client-certificate="$d/apiserver-kubelet-client.crt"
        --kubelet-client-key="$d/apiserver-kubelet-client.key"
        --kubelet-certificate-authority="$d/ca.crt"
        --kubelet-preferred-address-types=InternalIP
        --enable-aggregator-routing=true
    )
}

# ---------------------------------------------------------------------------
# containerd and the kubelet
# ---------------------------------------------------------------------------
containerd_config() {
    local nd="$1"
    cat <<EOF
version = 3
root = "$nd/containerd/root"
state = "$nd/containerd/state"
# Plugins with fixed paths shared by every containerd on the machine (NRI's
# socket, /opt/containerd) and snapshotters the node does not use.
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs"]
[grpc]
  address = "$nd/containerd.sock"
[ttrpc]
  address = "$nd/containerd.sock.ttrpc"
[debug]
  address = ""
  level = "warn"
[metrics]
  address = ""
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$(node_image pause)"
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    # No CAP_SYS_RESOURCE here: a sandbox's oom_score_adj of -998 is refused,
    # so never ask for less than containerd's own.
    restrict_oom_score_adj = true
    # Network namespaces under DIR, not /run/netns, so that stop finds them.
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          Root = "$nd/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$nd/cni/net.d"
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
EOF
}

# The bridge network: host-local addresses from .32, the gateway is the
# bridge; no ipMasq, no default route, no routes.
cni_config() {
    cat <<EOF
{"cniVersion": "1.0.0", "name": "$NODE_BRIDGE", "plugins": [
  {"type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": true, "isDefaultGateway": false,
   "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$1/cni/ipam",
            "ranges": [[{"subnet": "$NODE_SUBNET", "gateway": "$NODE_IP",
                         "rangeStart": "${NODE_POD_RANGE%-*}", "rangeEnd": "${NODE_POD_RANGE#*-}"}]]}}]}
EOF
}

kubelet_config() {
    local d="$1" nd="$1/node" healthz="$2"
    cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine: hybrid cgroups (v1), no systemd, no swap accounting.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://$nd/containerd.sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz
tlsCertFile: $d/kubelet-serving.crt
tlsPrivateKeyFile: $d/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $d/ca.crt}
authorization:
  mode: Webhook
registerNode: true
registerWithTaints:
  - {key: $NODE_TAINT_KEY, value: "true", effect: NoSchedule}
podLogsDir: $nd/pod-logs
resolvConf: ""
clusterDNS: []
serializeImagePulls: false
# The cache's disk is shared: never evict or collect images for disk pressure.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
nodeStatusReportFrequency: 10s
# Mounted Secrets and ConfigMaps follow their objects within this period.
syncFrequency: 5s
maxPods: 50
EOF
}

# node_ready DIR URL: the real node is Ready.
node_ready() {
    py_check "$1" "$2" "/api/v1/nodes/$NODE_NAME" "
print('yes' if any(c['type'] == 'Ready' and c['status'] == 'True'
                   for c in doc.get('status', {}).get('conditions', [])) else 'no')"
}

# start_node DIR API_URL: containerd, the images, the kubelet; returns once
# a pod ran on the node and its log was read through the apiserver.
start_node() {
    local d="$1" url="$2" nd="$1/node" t0=$SECONDS
    node_env "$d"
    rm -rf "$nd"
    mkdir -p "$nd/cni/net.d" "$nd/pod-logs" "$nd/kubelet"
    # The apiserver's kubelet client may use the kubelet's API.
    api_curl "$d" "$url/apis/rbac.authorization.k8s.io/v1/clusterrolebindings" -X POST \
        -H 'Content-Type: application/json' -d @- >/dev/null <<'EOF' || die "cannot bind the apiserver's kubelet client"
{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding",
 "metadata":{"name":"sandbox-webhook-e2e:apiserver-kubelet-client"},
 "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"system:kubelet-api-admin"},
 "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"kube-apiserver-kubelet-client"}]}
EOF
    containerd_config "$nd" >"$nd/containerd.toml"
    cni_config "$nd" >"$nd/cni/net.d/10-$NODE_BRIDGE.conflist"
    local path="$CONTAINERD_BIN_DIR:/usr/sbin:/usr/bin:/sbin:/bin"
    log "starting containerd $CONTAINERD_VERSION (runc $(runc --version | awk 'NR == 1 { print $3 }'))"
    spawn "$d" containerd env PATH="$path" "$CONTAINERD_BIN_DIR/containerd" --config "$nd/containerd.toml"
    local ctd_pid=$SPAWNED_PID
    wait_for "containerd" 30 "$ctd_pid" node_ctr "$d" version
    local images name
    images="$(node_images_dir)"
    for name in "${NODE_IMAGES[@]}"; do node_import "$d" "$images/$name.tar"; done

    write_kubeconfig "$d" "$url" kubelet "$nd/kubelet.kubeconfig"
    local healthz
    pick_ports healthz
    kubelet_config "$d" "$healthz" >"$nd/kubelet.yaml"
    log "starting kubelet $KUBE_VERSION as node $NODE_NAME on https://$NODE_IP:10250"
    spawn "$d" kubelet env PATH="$path" "$KUBELET_BIN" --config="$nd/kubelet.yaml" \
        --kubeconfig="$nd/kubelet.kubeconfig" --root-dir="$nd/kubelet" --cert-dir="$nd/kubelet/pki" \
        --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
        --node-labels="$NODE_LABEL_KEY=real" --v=1
    local kubelet_pid=$SPAWNED_PID
    wait_for "node $NODE_NAME Ready" 60 "$kubelet_pid" node_ready "$d" "$url"
    node_probe "$d" "$url" "$kubelet_pid"
    log "node $NODE_NAME ready in $((SECONDS - t0))s: a pod ran there and its log came back"
    NODE_VARS="NODE_NAME=$NODE_NAME
NODE_IP=$NODE_IP
NODE_BRIDGE=$NODE_BRIDGE
NODE_SUBNET=$NODE_SUBNET
NODE_TAINT=$NODE_TAINT_KEY=true:NoSchedule
NODE_SELECTOR=$NODE_LABEL_KEY=real
NODE_CTR=$CONTAINERD_BIN_DIR/ctr
NODE_CONTAINERD_SOCK=$nd/containerd.sock
NODE_KUBELET_HEALTHZ=127.0.0.1:$healthz
PAUSE_IMAGE=$(node_image pause)
BUSYBOX_IMAGE=$(node_image busybox)
EXECD_IMAGE=$(node_image execd)
EGRESS_IMAGE=$(node_image egress)"
}

# node_probe DIR URL PID: a pod runs to completion on the node and its log
# comes back through the apiserver (its kubelet client, the kubelet's authn).
node_probe() {
    local d="$1" url="$2" pid="$3" pod="node-check-$$"
    local pods="$url/api/v1/namespaces/default/pods"
    api_curl "$d" "$pods" -X POST -H 'Content-Type: application/json' -d @- >/dev/null <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"$pod"},
 "spec":{"nodeSelector":{"$NODE_LABEL_KEY":"real"},
   "tolerations":[{"key":"$NODE_TAINT_KEY","operator":"Exists","effect":"NoSchedule"}],
   "automountServiceAccountToken":false,"enableServiceLinks":false,"restartPolicy":"Never",
   "terminationGracePeriodSeconds":0,
   "containers":[{"name":"c","image":"$(node_image busybox)","imagePullPolicy":"Never",
     "command":["sh","-c","echo node-check-ok"]}]}}
EOF
    wait_for "pod default/$pod Succeeded on $NODE_NAME" 60 "$pid" \
        py_check "$d" "$url" "/api/v1/namespaces/default/pods/$pod" "
print('yes' if doc.get('status', {}).get('phase') == 'Succeeded' else 'no')"
    local said
    said="$(api_curl "$d" "$pods/$pod/log")" || die "reading the log of $pod failed"
    [[ "$said" == node-check-ok ]] || die "the log of $pod is '$said', not node-check-ok"
    api_curl "$d" "$pods/$pod" -X DELETE >/dev/null
    wait_for "pod default/$pod deleted" 30 "$pid" pod_gone "$d" "$pods/$pod"
}

# ---------------------------------------------------------------------------
# stop: drain through the API while it answers, then remove by force
# whatever is left: containers, shims, mounts, the bridge, cgroups
# ---------------------------------------------------------------------------
node_drain() {
    local d="$1" url
    node_env "$d" || return 0
    url="$(sed -n 's/^KUBE_APISERVER_URL=//p' "$d/cluster.env" 2>/dev/null)"
    [[ -n "$url" && -S "$d/node/containerd.sock" ]] || return 0
    api_curl "$d" "$url/readyz" >/dev/null 2>&1 || return 0
    # Cordoned first, so that no controller's replacement lands here again.
    api_curl "$d" "$url/api/v1/nodes/$NODE_NAME" -X PATCH -H 'Content-Type: application/merge-patch+json' \
        -d '{"spec":{"unschedulable":true}}' >/dev/null 2>&1 || return 0
    local pods ns name
    pods="$(api_curl "$d" "$url/api/v1/pods?fieldSelector=spec.nodeName%3D$NODE_NAME" 2>/dev/null |
        python3 -c 'import json, sys
for p in json.load(sys.stdin)["items"]: print(p["metadata"]["namespace"], p["metadata"]["name"])')" || return 0
    while read -r ns name; do
        [[ -n "$name" ]] || continue
        api_curl "$d" "$url/api/v1/namespaces/$ns/pods/$name" -X DELETE -H 'Content-Type: application/json' \
            -d '{"gracePeriodSeconds":0}' >/dev/null 2>&1 || true
    done <<<"$pods"
    local i
    for i in $(seq 1 150); do
        [[ -z "$(node_ctr "$d" tasks ls -q 2>/dev/null)" ]] && return 0
        sleep 0.2
    done
    log "containers still running on $NODE_NAME after 30s; removing them by force"
}

# node_cleanup DIR: after the processes were stopped.
node_cleanup() {
    local d="$1" nd="$1/node" id pid
    node_env "$d" || return 0
    if [[ -d "$nd/runc" ]]; then
        for id in $(runc --root "$nd/runc" list -q 2>/dev/null); do
            runc --root "$nd/runc" kill --all "$id" KILL 2>/dev/null || true
            runc --root "$nd/runc" delete --force "$id" 2>/dev/null || true
        done
    fi
    # containerd's shims outlive it; each names this run's socket.
    for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $nd/containerd.sock" 2>/dev/null); do
        if pid_is_ours "$pid" "$nd"; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
    # A shim killed before it could clean up leaves its socket in /run/containerd/s.
    local addr
    for addr in "$nd"/containerd/state/io.containerd.runtime.v2.task/k8s.io/*/address; do
        [[ -f "$addr" ]] || continue
        rm -f "$(sed 's#^unix://##' "$addr")" 2>/dev/null || true
    done
    # Mounts under the node's directory, deepest first: the kubelet's
    # root-dir bind mount, volumes, network namespaces, container rootfs.
    local target
    while read -r target; do
        umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null || log "could not unmount $target"
    done < <(awk -v p="$nd" '$5 == p || index($5, p "/") == 1 { print length($5), $5 }' /proc/self/mountinfo |
        sort -rn | cut -d' ' -f2- | uniq)
    # The cgroups runc made for this run's containers (k8s.io/<id>).
    local task
    for task in "$nd"/containerd/state/io.containerd.runtime.v2.task/k8s.io/*; do
        [[ -d "$task" ]] || continue
        rmdir /sys/fs/cgroup/*/k8s.io/"$(basename "$task")" 2>/dev/null || true
    done
    # Their parent too, once no run's container is left in it (rmdir of a
    # cgroup with children fails, so another live node keeps its own).
    rmdir /sys/fs/cgroup/*/k8s.io 2>/dev/null || true
    node_net_down "$d"
    rm -f "$d/node.env"
}
