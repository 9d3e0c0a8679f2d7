# shellcheck shell=bash
# What the cluster benchmarks (bench/controller.sh, bench/scale.sh) share.
# Sourced from the repository's root. Sets WORK, a temporary directory whose
# cluster ($WORK/cluster) and controller ($CTL_PID, when set) are stopped and
# which is removed on exit; so are the processes in $BENCH_PIDS.
WORK="$(mktemp -d)"
CTL_PID=""
BENCH_PIDS=""
bench_cleanup() {
    local pid
    for pid in $CTL_PID $BENCH_PIDS; do
        kill "$pid" 2>/dev/null || true
    done
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

# baseline_build REV: the release binary of git revision REV, for a
# before/after comparison in one run; sets BASE_BIN and BASE_REV. Built
# once from REV's tree (git archive) into target/baseline/REV, with this
# checkout's target dir, so the dependencies are shared; call it before
# release_build, which must rebuild its own binary over REV's.
baseline_build() {
    BASE_REV="$(git rev-parse --short=12 "$1^{commit}")"
    local target dir
    target="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)"
    dir="$target/baseline/$BASE_REV"
    if [[ ! -x "$dir/sandbox-webhook" ]]; then
        rm -rf "$dir/src" && mkdir -p "$dir/src"
        git archive "$BASE_REV" | tar -x -C "$dir/src"
        (cd "$dir/src" && SANDBOX_WEBHOOK_REVISION="$BASE_REV" CARGO_TARGET_DIR="$target" \
            nice cargo build --release --locked --bin sandbox-webhook >&2)
        cp "$target/release/sandbox-webhook" "$dir/sandbox-webhook"
        rm -rf "$dir/src"
    fi
    BASE_BIN="$dir/sandbox-webhook"
}

# free_port: a loopback TCP port nothing listens on now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# rss_mib PID [FIELD]: a process's VmRSS (or FIELD, e.g. VmHWM) in MiB.
rss_mib() {
    awk -v f="${2:-VmRSS}:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"
}
