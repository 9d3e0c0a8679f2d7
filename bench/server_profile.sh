#!/usr/bin/env bash
# Where the server's CPU per review goes beyond the null handler's:
# callgrind on the whole server process (TLS, HTTP, the handler, the answer's
# accounting, logging, metrics) under load (docs/performance.md, "Server CPU
# per review: where the gap goes").
#
#   bench/server_profile.sh BIN LOADGEN [BODY]
#
# BIN is a release `sandbox-webhook` that keeps its symbols (built with
# CARGO_PROFILE_RELEASE_STRIP=false); LOADGEN a built examples/loadgen;
# BODY the review (default bench/reviews/pod-10k.json). For each handler
# (real, null) the server runs under callgrind, pinned to SERVER_CPU, twice:
# FEW and then MANY requests from loadgen (CONNECTIONS keep-alive TLS 1.3
# connections, each request sent when the last is answered), then stopped.
# The difference of the two runs over MANY - FEW requests is one review
# without the start-up, the handshakes and the shutdown, in every thread of
# the server (the log writer included). The kernel's side (the syscalls) is
# not counted: bench/server_cpu.sh measures it as system time.
#
# Prints the instructions per review of each handler, then the functions
# whose own (exclusive) instructions differ most between the handlers, and
# the same for inclusive costs; writes the four callgrind files to OUT
# (default: a temporary folder, removed) for callgrind_annotate.
#
# Environment: SERVER_CPU (0), LOAD_CPU (1), FEW (400), MANY (4000),
# CONNECTIONS (32), TOP (30), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

(($# >= 2)) || { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BIN=$1 LOADGEN=$2 BODY=${3:-bench/reviews/pod-10k.json}
FEW=${FEW:-400}
MANY=${MANY:-4000}
TOP=${TOP:-30}
# shellcheck source-path=SCRIPTDIR source=server-lib.sh
source bench/server-lib.sh
command -v valgrind >/dev/null || { echo "$0: valgrind is not installed" >&2; exit 1; }
scratch_dir
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT"
log() { echo "[server-profile] $*" >&2; }

"$BIN" certs --ip 127.0.0.1 --dns localhost --days 2 --out "$WORK/certs" >/dev/null 2>&1

# One server under callgrind, REQUESTS reviews through it, stopped: its
# callgrind file is OUT/HANDLER-REQUESTS.out.
profile() { # handler requests
  local handler=$1 requests=$2 flags=() log="$WORK/$1-$2.log" port
  [[ $handler == null ]] && flags=(--null-handler)
  RUST_LOG=info taskset -c "$SERVER_CPU" valgrind --tool=callgrind \
    --callgrind-out-file="$OUT/$handler-$requests.out" \
    "$BIN" serve --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" \
    --addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 --shutdown-delay 0s "${flags[@]}" \
    >"$log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 600); do
    port=$(sed -n 's/.*serving admission requests.*local_addr=[^ ]*:\([0-9]*\).*/\1/p' "$log")
    [[ -z $port ]] || break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n $port ]] || { echo "$0: the server did not start" >&2; cat "$log" >&2; exit 1; }
  local out
  out=$(taskset -c "$LOAD_CPU" "$LOADGEN" --addr "127.0.0.1:$port" --ca "$WORK/certs/ca.crt" \
    --body "$BODY" --connections "$CONNECTIONS" --requests "$requests") || {
    echo "$0: loadgen failed: $out" >&2
    exit 1
  }
  log "$handler, $requests requests: $out"
  kill "$pid"
  wait "$pid" || true
}

for handler in real null; do
  for n in "$FEW" "$MANY"; do profile "$handler" "$n"; done
done

# Per function, (MANY - FEW run) / (MANY - FEW), real against null.
table() { # inclusive: yes or no
  for f in "$OUT"/*.out; do
    callgrind_annotate --inclusive="$1" --threshold=100 "$f" >"${f%.out}.$1.txt"
  done
  python3 - "$OUT" "$FEW" "$MANY" "$TOP" "$1" <<'EOF'
import re, sys
out, few, many, top, inclusive = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
row = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)\s*$")

def costs(handler, n):
    per, total = {}, 0
    for line in open(f"{out}/{handler}-{n}.{inclusive}.txt"):
        m = row.match(line)
        # "=> callee (Nx)" lines and the summary's "events annotated" are not functions
        if not m or m.group(2).startswith(("=>", "events annotated")):
            continue
        value, name = int(m.group(1).replace(",", "")), m.group(2)
        if name.startswith("PROGRAM TOTALS"):
            total = value
        elif name not in ("file:function",):
            # the binary's path after the symbol says nothing here
            name = re.sub(r"\s+\[[^\]]*\]$", "", name)
            name = re.sub(r"^\?\?\?:", "", name)
            per[name] = per.get(name, 0) + value
    return per, total

def per_review(handler):
    a, ta = costs(handler, few)
    b, tb = costs(handler, many)
    keys = set(a) | set(b)
    return {k: (b.get(k, 0) - a.get(k, 0)) / (many - few) for k in keys}, (tb - ta) / (many - few)

real, real_total = per_review("real")
null, null_total = per_review("null")
if inclusive == "no":
    print(f"instructions per review: real {real_total:,.0f}, null {null_total:,.0f},"
          f" real/null {real_total / null_total:.2f}, gap {real_total - null_total:,.0f}")
print()
kind = "inclusive" if inclusive == "yes" else "self"
print(f"| function ({kind}) | real | null | real - null |")
print("|---|---:|---:|---:|")
keys = sorted(set(real) | set(null), key=lambda k: -abs(real.get(k, 0) - null.get(k, 0)))
for k in keys[:top]:
    r, n = real.get(k, 0), null.get(k, 0)
    name = k if len(k) <= 110 else k[:107] + "..."
    print(f"| `{name}` | {r:,.0f} | {n:,.0f} | {r - n:+,.0f} |")
EOF
}
table no
echo
table yes
