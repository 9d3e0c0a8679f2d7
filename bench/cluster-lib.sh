# shellcheck shell=bash
# What the cluster benchmarks (bench/controller.sh, bench/scale.sh) share.
# Sourced from the repository's root. Sets WORK, a temporary directory whose
# cluster ($WORK/cluster) and controller ($CTL_PID, when set) are stopped and
# which is removed on exit.
WORK="$(mktemp -d)"
CTL_PID=""
bench_cleanup() {
    [[ -n "$CTL_PID" ]] && kill "$CTL_PID" 2>/dev/null || true
    tests/e2e/cluster.sh stop "$WORK/cluster" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap bench_cleanup EXIT

# release_build EXAMPLE: the release binary and one example; sets BIN and
# EXAMPLE to their absolute paths.
release_build() {
    nice cargo build --release --bin sandbox-webhook --example "$1" >&2
    local dir
    dir="$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)"
    BIN="$dir/sandbox-webhook" EXAMPLE="$dir/examples/$1"
}

# free_port: a loopback TCP port nothing listens on now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# rss_mib PID [FIELD]: a process's VmRSS (or FIELD, e.g. VmHWM) in MiB.
rss_mib() {
    awk -v f="${2:-VmRSS}:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"
}
