# shellcheck shell=bash disable=SC2153,SC2154 # ARGS, fail, ...: run.sh's
# Part of tests/image/run.sh (sourced): `controller` from the image, as the
# chart's controller Deployment runs it, against a bare control plane that
# its kubeconfig names by a host name only the container's /etc/hosts knows,
# removes an expired pod.

PLANE_DIR="$WORK/plane"
mkdir -p "$PLANE_DIR"
eval "$("$CLUSTER_SH" start --bare "$PLANE_DIR")"
# shellcheck disable=SC1091 # written by cluster.sh start
source "$PLANE_DIR/cluster.env"
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }

# The admin kubeconfig, its server named kubernetes.default.svc (one of the
# apiserver certificate's names) instead of 127.0.0.1. The name is in the
# container's /etc/hosts only (--add-host, as a pod's hostAliases), not in
# the host's resolver, so the static binary must resolve it itself: glibc's
# built-in `files` service, with no nsswitch.conf in the image.
APISERVER_NAME=kubernetes.default.svc
pod controller "$WORK/controller"
mkdir -p "$WORK/controller/kube"
sed -E "s#(server: https://)127\.0\.0\.1:#\1$APISERVER_NAME:#" "$KUBECONFIG" >"$WORK/controller/kube/config"
chgrp -R 65532 "$WORK/controller"
chmod 0440 "$WORK/controller/kube/config"
run_test "the controller's kubeconfig names the apiserver by host name ($APISERVER_NAME)" \
    grep -Eq "server: https://${APISERVER_NAME//./\\.}:[0-9]+\$" "$WORK/controller/kube/config"
run_test "the host's resolver does not know $APISERVER_NAME (only the container's /etc/hosts will)" \
    bash -c "! getent hosts $APISERVER_NAME"

CADMIN=$(free_port)
args=()
for a in "${ARGS[@]}"; do
    case $a in
        --admin-addr=*) a="--admin-addr=127.0.0.1:$CADMIN" ;;
        --lease-duration=*) a="--lease-duration=4" ;;
        --lease-grace=*) a="--lease-grace=1" ;;
    esac
    args+=("$a")
done
# The controller's own namespace (its Lease) and one for sandboxes: it never
# touches pods of its own namespace.
SANDBOXES="$NS-sandboxes"
kc create namespace "$NS" >/dev/null
kc create namespace "$SANDBOXES" >/dev/null
log "controller: ${FLAGS[*]} $IMAGE ${args[*]}"
"${RUN[@]}" -d --name "sbx-image-controller-$$" "${FLAGS[@]}" --add-host "$APISERVER_NAME:127.0.0.1" \
    --volume "$WORK/controller/kube:/kube:ro" --env KUBECONFIG=/kube/config \
    "$IMAGE" "${args[@]}" >/dev/null
CONTAINERS+=("sbx-image-controller-$$")
leader() { curl -s --max-time 2 "http://127.0.0.1:$CADMIN/metrics" | grep -q '^sandbox_webhook_controller_leader 1$'; }
for _ in $(seq 150); do leader && break; sleep 0.2; done
run_test "controller from the image holds the Lease (reached the apiserver at $APISERVER_NAME)" leader

# A sandbox pod that expires 2-3 s from now; nothing but the controller deletes
# pods in a bare plane.
expires=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)
kc -n "$SANDBOXES" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: expiring
  labels: {opensandbox.io/id: expiring}
  annotations: {opensandbox.io/expires-at: "$expires"}
spec:
  containers: [{name: main, image: busybox:1.36}]
EOF
gone() { [[ -z $(kc -n "$SANDBOXES" get pod expiring --ignore-not-found -o name) ]]; }
run_test "the pod exists before it expires" eval '! gone'
for _ in $(seq 100); do gone && break; sleep 0.2; done
run_test "controller from the image removed the pod that expired at $expires" gone
rc=$(podman stop -t 10 "sbx-image-controller-$$" >/dev/null && podman wait "sbx-image-controller-$$" 2>/dev/null || echo failed)
equal "controller exit status after SIGTERM" 0 "$rc"
[[ $fail == 0 ]] || podman logs "sbx-image-controller-$$" 2>&1 | tail -n 20 | sed 's/^/    /'
