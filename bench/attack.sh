#!/usr/bin/env bash
# Before/after figures for the attacks of SPEC 9: builds `serve` at a base
# revision and at the working tree, runs each attack of examples/attack.rs
# against each (on loopback, with 1,024 open files as in a default
# container), and prints one line per attack and build.
#
#   bench/attack.sh [BASE_REV]      (default: ddebb86, before the limits)
#   ATTACKS="raw-tcp pipeline" bench/attack.sh     only these rows
#
# Takes a few minutes plus two release builds; not part of ./test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-ddebb86}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; git worktree remove --force "$WORK/base" 2>/dev/null || true; rm -rf "$WORK"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cargo build --release --quiet --bin sandbox-webhook --example attack
TARGET=${CARGO_TARGET_DIR:-target}
NEW=$TARGET/release/sandbox-webhook
ATTACK=$TARGET/release/examples/attack
git worktree add --quiet --detach "$WORK/base" "$BASE"
(cd "$WORK/base" && CARGO_TARGET_DIR="$PWD/../base-target" cargo build --release --quiet --bin sandbox-webhook)
OLD="$WORK/base-target/release/sandbox-webhook"
"$NEW" certs --dns localhost --ip 127.0.0.1 --out "$WORK/certs" >/dev/null

run() { # label binary attack
  local label=$1 bin=$2 attack=$3 port admin pid
  port=$(free_port); admin=$(free_port)
  local extra=()
  [[ "$label" == after ]] && extra=(--shutdown-delay 5s)
  prlimit --nofile=1024:1024 "$bin" serve --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" \
    --addr "127.0.0.1:$port" --admin-addr "127.0.0.1:$admin" "${extra[@]}" >>"$WORK/$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null && break; sleep 0.1; done
  printf '%-6s ' "$label"
  "$ATTACK" "$attack" "127.0.0.1:$port" "127.0.0.1:$admin" "$WORK/certs/ca.crt" "$pid" || echo "(attack failed)"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

for attack in ${ATTACKS:-raw-tcp idle-after-request trickle stalled-bodies declared-bodies admin-flood pipeline early-close shutdown shutdown-load}; do
  run before "$OLD" "$attack"
  run after "$NEW" "$attack"
done
