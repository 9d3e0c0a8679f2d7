#!/usr/bin/env bash
# The project's own image, as tests/image/run.sh builds it (the Dockerfile
# with BINARY=prebuilt and the shipped flavour of the release binary), tagged
# as the chart's default image and imported into a real node of
# tests/e2e/cluster.sh, where `helm install` finds it without a registry.
#
#   tests/image/node/webhook-image.sh CLUSTER_DIR
#
# WEBHOOK_BINARY=PATH puts that binary (static, of the chart's appVersion)
# into the image instead of this tree's release build: the real-node
# scenarios then run against another build, e.g. the one before a fix, to
# show the attack the scenario refuses working there.
#
# Prints the image's reference on stdout; build output goes to stderr. podman
# works in a private store (vfs, removed afterwards), so the images of other
# runs' podman (tests/image/run.sh) are never touched.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
CLUSTER_DIR="${1:?usage: webhook-image.sh CLUSTER_DIR}"
cd "$ROOT"

# Run from a test (cargo test --test node_e2e), this inherits the variables
# cargo sets for the test binary (CARGO_MANIFEST_DIR, CARGO_PKG_*, OUT_DIR,
# and what build.rs passes with rustc-env: SANDBOX_WEBHOOK_REVISION).
# Build scripts fingerprint some of them (ring's reruns when
# CARGO_MANIFEST_DIR or OUT_DIR changes, build.rs when
# SANDBOX_WEBHOOK_REVISION does), so passing them on would rebuild the
# release binary and its dependencies that ./test.sh's image step has just
# built (and the next image step would rebuild them back).
for var in $(compgen -e); do
    case "$var" in
        CARGO_MANIFEST_* | CARGO_PKG_* | CARGO_CRATE_NAME | CARGO_BIN_* | CARGO_PRIMARY_PACKAGE | \
            CARGO_TARGET_TMPDIR | CARGO_RUSTC_CURRENT_DIR | OUT_DIR | SANDBOX_WEBHOOK_REVISION) unset "$var" ;;
    esac
done
BIN="${WEBHOOK_BINARY:-$(bench/flavours.sh path)}"
VERSION="$("$BIN" --version | awk '{print $2}')"
APP_VERSION="$(awk '$1 == "appVersion:" { gsub(/"/, "", $2); print $2 }' charts/sandbox-webhook/Chart.yaml)"
[[ "$VERSION" == "$APP_VERSION" ]] ||
    { echo "webhook-image.sh: the binary is $VERSION but the chart's appVersion is $APP_VERSION" >&2; exit 1; }
# The name the kubelet gives the chart's default `opensandbox/sandbox-webhook:<appVersion>`.
IMAGE="docker.io/opensandbox/sandbox-webhook:$VERSION"
case "$(uname -m)" in x86_64) ARCH=amd64 ;; aarch64) ARCH=arm64 ;; *) ARCH="$(uname -m)" ;; esac

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PODMAN=(podman --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs
        --cgroup-manager cgroupfs --events-backend none)
mkdir "$WORK/context"
cp "$BIN" "$WORK/context/sandbox-webhook-$ARCH"
"${PODMAN[@]}" build --quiet --pull=never --network=none --build-arg BINARY=prebuilt \
    --build-arg VERSION="$VERSION" --build-arg REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    -f Dockerfile -t "$IMAGE" "$WORK/context" >&2
"${PODMAN[@]}" save --quiet --format oci-archive -o "$WORK/image.tar" "$IMAGE"
tests/e2e/cluster.sh load "$CLUSTER_DIR" "$WORK/image.tar"
echo "$IMAGE"
