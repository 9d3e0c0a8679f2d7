#!/usr/bin/env bash
# The image users run, built and run on this machine.
#
#   tests/image/run.sh
#
# Builds the shipped flavour of the release binary (bench/flavours.sh: the one
# bench/run.sh measures) and the image from the Dockerfile with
# BINARY=prebuilt (the release build's final stage, the binary from the build
# context), tagged as the chart's default image, then checks, each as a test
# that can fail:
# - the image: no shell, User 65532:65532, Entrypoint, OCI labels (version =
#   the binary's = the chart's tag, revision = HEAD); its size (≤ 20 MB);
# - `serve` as the chart's webhook Deployment runs it (its args, volumes, env
#   and securityContext, tests/image/chart_pod.py): uid/gid 65532, no
#   capabilities, no_new_privs, seccomp, read-only root, seen in /proc;
#   /livez and /readyz 200; a review's answer is byte for byte what the
#   image's `sandbox-webhook review` prints for it; on SIGTERM /readyz is
#   503 at once, and the process exits 0 after the delay, within delay plus
#   drain timeout;
# - `controller` as the chart's controller Deployment runs it, against a bare
#   control plane (tests/e2e/cluster.sh start --bare) named `localhost` in its
#   kubeconfig, removes an expired pod.
#
# podman (Debian's; apt-get when missing) with the runc runtime (crun refuses
# this machine's hybrid cgroups), the host network (the control plane and the
# ports are on 127.0.0.1), and --ulimit values no higher than the host's (a
# container cannot raise them without CAP_SYS_RESOURCE). No registry is needed.
# Prints `N passed, M failed` last; exits non-zero when anything failed.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../chart/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../chart/lib.sh"
HERE="$ROOT/tests/image"
NS=sbx-image
DELAY=2 DRAIN=5 # shutdownDelaySeconds, shutdownTimeoutSeconds rendered into the chart
WORK="$(mktemp -d)"
chmod 755 "$WORK"
CONTAINERS=()
# The control plane's directory (controller.sh). Not PLANE: the cluster.env
# it sources sets PLANE=bare, and the plane was left running.
PLANE_DIR=""
cleanup() {
    local c
    for c in "${CONTAINERS[@]}"; do podman rm -f "$c" >/dev/null 2>&1 || true; done
    [[ -z $PLANE_DIR ]] || "$CLUSTER_SH" stop "$PLANE_DIR" >/dev/null 2>&1 ||
        echo "run.sh: could not stop the control plane in $PLANE_DIR" >&2
    rm -rf "$WORK"
}
trap cleanup EXIT
pass=0
fail=0
equal() { # equal WHAT EXPECTED ACTUAL
    if [[ $2 == "$3" ]]; then ok "$1: $3"; else not_ok "$1: expected '$2', got '$3'"; fi
}

# ------------------------------------------------------------------ tools
if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
    log "installing podman and runc (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends podman runc >&2 ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends podman runc; } >&2
fi
ensure_pyyaml || { echo "run.sh: PyYAML is missing and could not be installed" >&2; exit 1; }
HELM="$("$CLUSTER_SH" helm)"
# min(host's hard limit, what the process needs)
limit() { local host=$1 want=$2; [[ $host == unlimited || $host -gt $want ]] && echo "$want" || echo "$host"; }
NOFILE=$(limit "$(ulimit -Hn)" 65536) NPROC=$(limit "$(ulimit -Hu)" 4096)
PODMAN=(podman --runtime runc)
RUN=("${PODMAN[@]}" run --network host --ulimit "nofile=$NOFILE:$NOFILE" --ulimit "nproc=$NPROC:$NPROC")
log "podman $(podman version --format '{{.Client.Version}}'), runc, --ulimit nofile=$NOFILE nproc=$NPROC"

# ------------------------------------------------------------------ binary and chart
BIN="$(cd "$ROOT" && bench/flavours.sh path)"
VERSION="$("$BIN" --version | awk '{print $2}')"
REVISION="$(git -C "$ROOT" rev-parse HEAD)"
"$HELM" template rel "$CHART" --namespace "$NS" \
    --set shutdownDelaySeconds=$DELAY --set shutdownTimeoutSeconds=$DRAIN >"$WORK/chart.yaml"
pod() { # pod COMPONENT DIR: sets REF, FLAGS and ARGS from the chart's Deployment
    local lines
    mapfile -t lines < <(python3 "$HERE/chart_pod.py" "$1" "$NS" "$2" <"$WORK/chart.yaml")
    [[ ${#lines[@]} -gt 2 ]] || { echo "chart_pod.py $1 failed" >&2; exit 1; }
    local sep
    for sep in "${!lines[@]}"; do [[ ${lines[$sep]} != -- ]] || break; done
    REF=${lines[0]} FLAGS=("${lines[@]:1:sep-1}") ARGS=("${lines[@]:sep+1}")
}
# The kubelet's name for a reference without a registry (docker.io), which
# is the name podman must store the image under to stand for it.
qualify() {
    local ref=$1 first=${1%%/*}
    [[ $ref == */* ]] || ref="library/$ref"
    [[ $ref == */* && ( $first == *.* || $first == *:* || $first == localhost ) ]] || ref="docker.io/$ref"
    echo "$ref"
}
pod webhook "$WORK/webhook"
IMAGE="$(qualify "$REF")"
equal "the chart's default image tag is the binary's version" "$VERSION" "${REF##*:}"
run_test "docs/operations.md's podman build tags the image as the chart's default ($IMAGE)" \
    grep -qF -- "-f Dockerfile -t $IMAGE \"\$ctx\"" "$ROOT/docs/operations.md"

# ------------------------------------------------------------------ the image
case "$(uname -m)" in x86_64) ARCH=amd64 ;; aarch64) ARCH=arm64 ;; *) ARCH="$(uname -m)" ;; esac
# The previous run's image goes (its tag moves to the new one anyway).
podman rmi --force "$IMAGE" >/dev/null 2>&1 || true
mkdir "$WORK/context"
cp "$BIN" "$WORK/context/sandbox-webhook-$ARCH"
run_test "podman build (BINARY=prebuilt) -t $IMAGE" "${PODMAN[@]}" build --build-arg BINARY=prebuilt \
    --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" \
    --build-arg CREATED="$(git -C "$ROOT" log -1 --format=%cI)" \
    -f "$ROOT/Dockerfile" -t "$IMAGE" "$WORK/context"
inspect() { podman image inspect "$IMAGE" --format "$1"; }
equal "image User" "65532:65532" "$(inspect '{{.Config.User}}')"
equal "image Entrypoint" '["/sandbox-webhook"]' "$(inspect '{{json .Config.Entrypoint}}')"
equal "label org.opencontainers.image.version" "$VERSION" "$(inspect '{{index .Labels "org.opencontainers.image.version"}}')"
equal "label org.opencontainers.image.revision" "$REVISION" "$(inspect '{{index .Labels "org.opencontainers.image.revision"}}')"
SIZE="$(inspect '{{.Size}}')"
log "image size: $SIZE bytes ($(awk -v s="$SIZE" 'BEGIN { printf "%.1f", s / 1048576 }') MiB); binary $(stat -c %s "$BIN") bytes"
run_test "image size ≤ 20 MB ($SIZE bytes)" test "$SIZE" -le 20000000
cid="$(podman create "$IMAGE")"
CONTAINERS+=("$cid")
podman export "$cid" | tar -tv >"$WORK/files"
log "image files: $(awk '$1 !~ /^d/ {print $NF}' "$WORK/files" | tr '\n' ' ')"
run_test "no shell in the image (sh, bash, ash, dash, busybox)" \
    bash -c "! awk '{print \$NF}' '$WORK/files' | grep -E '(^|/)(sh|bash|ash|dash|zsh|busybox)\$'"
run_test "the only executable is /sandbox-webhook" \
    bash -c "[[ \$(awk '\$1 ~ /^-..x/ {print \$NF}' '$WORK/files') == sandbox-webhook ]]"
run_test "running /bin/sh in the image fails" bash -c "! ${RUN[*]} --rm --entrypoint /bin/sh '$IMAGE' -c true"

# ------------------------------------------------------------------ serve, as the chart runs it
mkdir -p "$WORK/webhook/tls"
"$BIN" certs --ip 127.0.0.1 --dns localhost --out "$WORK/webhook/tls" >/dev/null
# The kubelet's view of the chart's volumes: Secret 0440 and ConfigMap 0444,
# group-owned by fsGroup.
chgrp -R 65532 "$WORK/webhook"
chmod 0440 "$WORK/webhook/tls/"*
chmod 0444 "$WORK/webhook/config/"*
PORT=$(free_port) ADMIN=$(free_port)
args=()
for a in "${ARGS[@]}"; do
    case $a in
        --addr=*) a="--addr=127.0.0.1:$PORT" ;;
        --admin-addr=*) a="--admin-addr=127.0.0.1:$ADMIN" ;;
    esac
    args+=("$a")
done
log "serve: ${FLAGS[*]} $IMAGE ${args[*]}"
"${RUN[@]}" -d --name "sbx-image-serve-$$" "${FLAGS[@]}" "$IMAGE" "${args[@]}" >/dev/null
CONTAINERS+=("sbx-image-serve-$$")
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$ADMIN$1" || true; }
for _ in $(seq 100); do [[ $(code /readyz) == 200 ]] && break; sleep 0.1; done
equal "/livez" 200 "$(code /livez)"
equal "/readyz" 200 "$(code /readyz)"
PID="$(podman inspect "sbx-image-serve-$$" --format '{{.State.Pid}}')"
status() { awk -v k="$1:" '$1 == k { $1 = ""; print substr($0, 2) }' "/proc/$PID/status" | tr -s ' \t' ' '; }
equal "process uid (real, effective, saved, fs)" "65532 65532 65532 65532" "$(status Uid)"
equal "process gid" "65532 65532 65532 65532" "$(status Gid)"
equal "effective capabilities" 0000000000000000 "$(status CapEff)"
equal "bounding capabilities" 0000000000000000 "$(status CapBnd)"
equal "no_new_privs" 1 "$(status NoNewPrivs)"
equal "seccomp filter" 2 "$(status Seccomp)"
equal "root filesystem mount" ro "$(awk '$5 == "/" { split($6, o, ","); print o[1] }' "/proc/$PID/mountinfo")"

# A review whose answer depends neither on the clock nor on a random token:
# a bench pod with an `expires-at` instead of a timeout, no network policy.
python3 - "$ROOT/bench/reviews/pod-10k.json" >"$WORK/review.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
a = r["request"]["object"]["metadata"]["annotations"]
del a["opensandbox.io/timeout"]
a["opensandbox.io/expires-at"] = "2099-01-01T00:00:00Z"
json.dump(r, sys.stdout)
EOF
cli_review() { # cli_review NOW TOKEN: the image's `review` of review.json
    "${RUN[@]}" --rm -i "${FLAGS[@]}" "$IMAGE" review -f - --namespace "$NS" \
        --config /etc/sandbox-webhook/config/config.yaml --now "$1" --egress-token "$2" <"$WORK/review.json"
}
cli_review 2030-01-01T00:00:00Z token-a >"$WORK/cli-a.json"
cli_review 2031-06-01T12:00:00Z token-b >"$WORK/cli-b.json"
run_test "review answer is the same for any --now and --egress-token" cmp "$WORK/cli-a.json" "$WORK/cli-b.json"
run_test "review answer carries a patch" grep -q '"patch":"' "$WORK/cli-a.json"
post() {
    curl -sS --cacert "$WORK/webhook/tls/ca.crt" -H 'Content-Type: application/json' \
        --data-binary "@$WORK/review.json" "https://127.0.0.1:$PORT/mutate" -o "$1" -w '%{http_code}'
}
equal "POST /mutate (TLS, the container's port)" 200 "$(post "$WORK/served.json")"
run_test "the server's answer is byte for byte the image's \`review\`" \
    cmp <(tr -d '\n' <"$WORK/served.json") <(tr -d '\n' <"$WORK/cli-a.json")

# SIGTERM: not ready at once, still answering during the delay, exit 0 after it.
t0=$(date +%s.%N)
podman kill --signal TERM "sbx-image-serve-$$" >/dev/null
first=""
while [[ $(awk -v t="$t0" -v n="$(date +%s.%N)" 'BEGIN { print (n - t < 0.5) }') == 1 ]]; do
    first=$(code /readyz)
    [[ $first == 200 ]] || break
done
equal "/readyz within 0.5 s of SIGTERM" 503 "$first"
equal "POST /mutate during the shutdown delay" 200 "$(post /dev/null)"
rc=$(timeout $((DELAY + DRAIN + 10)) podman wait "sbx-image-serve-$$" || echo timeout)
elapsed=$(awk -v t="$t0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - t }')
equal "exit status after SIGTERM" 0 "$rc"
run_test "exit after the delay ($DELAY s), within delay + drain ($((DELAY + DRAIN)) s), nothing in flight: ${elapsed}s" \
    awk "BEGIN { exit !($elapsed >= $DELAY - 0.2 && $elapsed <= $DELAY + 1.5) }"
[[ $fail == 0 ]] || podman logs "sbx-image-serve-$$" 2>&1 | tail -n 20 | sed 's/^/    /'

# shellcheck source-path=SCRIPTDIR source=controller.sh
source "$HERE/controller.sh"

echo
printf '%d passed, %d failed\n' "$pass" "$fail"
[[ $fail -eq 0 ]]
