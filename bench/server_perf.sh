#!/usr/bin/env bash
# The server's CPU time per review, real handler against null, by function,
# kernel included: `perf record -e cpu-clock` (a software clock, so it works
# on a VM without hardware counters) on the pinned server while wrk loads it
# (docs/performance.md, "Server CPU per review: where the gap goes"). The
# time-based companion of bench/server_profile.sh, whose instruction counts
# are exact but leave out the kernel and the cost of cache misses.
#
#   bench/server_perf.sh BIN [BODY]
#
# BIN is a release `sandbox-webhook` that keeps its symbols
# (CARGO_PROFILE_RELEASE_STRIP=false); BODY the review (default
# bench/reviews/pod-10k.json). A real and a null server run pinned to
# SERVER_CPU; each is sampled ROUNDS times, in turns, for SECONDS_PER_RUN under wrk
# (one thread on LOAD_CPU, CONNECTIONS keep-alive TLS 1.3 connections);
# each function's samples are summed over the rounds and divided by the
# reviews answered in them. Prints a Markdown table of the functions whose
# time per review differs most (`[k]` marks the kernel's), then the totals.
# Run it under /work/bin/quiet (it takes a scheduling group of its own: see
# priority_session in bench/server-lib.sh): a neighbour's samples are not in
# the table, but it still evicts the server's caches.
#
# Environment: SERVER_CPU (0), LOAD_CPU (1), ROUNDS (3), SECONDS_PER_RUN (5),
# CONNECTIONS (32), FREQ (4999 samples a second), TOP (30), OUT (a folder
# to keep each round's `perf report` in; default: none kept).
set -euo pipefail
cd "$(dirname "$0")/.."

(($# >= 1)) || { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BIN=$1 BODY=${2:-bench/reviews/pod-10k.json}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
FREQ=${FREQ:-4999}
TOP=${TOP:-30}
# shellcheck source-path=SCRIPTDIR source=server-lib.sh
source bench/server-lib.sh
priority_session "$0" "$@"
for tool in perf wrk; do
  command -v "$tool" >/dev/null || { echo "$0: $tool is required" >&2; exit 1; }
done
scratch_dir

"$BIN" certs --ip 127.0.0.1 --dns localhost --days 2 --out "$WORK/certs" >/dev/null 2>&1
declare -A PID PORT
start_server real
PID[real]=$SERVER_PID PORT[real]=$SERVER_PORT
start_server null --null-handler
PID[null]=$SERVER_PID PORT[null]=$SERVER_PORT
for h in real null; do wrk_line "${PORT[$h]}" "$BODY" 1 "$CONNECTIONS" >/dev/null; done

declare -A REQUESTS=([real]=0 [null]=0)
for ((round = 0; round < ROUNDS; round++)); do
  order=(real null)
  ((round % 2 == 0)) || order=(null real)
  for h in "${order[@]}"; do
    out=$(perf record -q -e cpu-clock -F "$FREQ" -p "${PID[$h]}" -o "$WORK/$h-$round.data" -- \
      bash -c "$(declare -f wrk_line); LOAD_CPU=$LOAD_CPU wrk_line ${PORT[$h]} $BODY $SECONDS_PER_RUN $CONNECTIONS")
    n=$(field requests "$out")
    ((n > 0 && $(field errors "$out") == 0)) || { echo "$0: $h: $out" >&2; exit 1; }
    REQUESTS[$h]=$((REQUESTS[$h] + n))
    perf report -i "$WORK/$h-$round.data" --stdio --no-children --sort sym -g none \
      --percent-limit 0 2>/dev/null >"$WORK/$h-$round.txt"
    [[ -z ${OUT:-} ]] || { mkdir -p "$OUT"; cp "$WORK/$h-$round.txt" "$OUT/"; }
    echo "[server-perf] round $((round + 1))/$ROUNDS $h: $n reviews" >&2
  done
done

python3 - "$WORK" "$ROUNDS" "${REQUESTS[real]}" "${REQUESTS[null]}" "$TOP" <<'EOF'
import re, sys
work, rounds, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[5])
requests = {"real": int(sys.argv[3]), "null": int(sys.argv[4])}
line = re.compile(r"^\s*([\d.]+)%\s+(\[[k.]\])\s+(.*?)\s*$")

def per_review(handler):
    """ns per review by symbol, summed over the rounds"""
    ns = {}
    for r in range(rounds):
        total = 0
        for text in open(f"{work}/{handler}-{r}.txt"):
            m = re.match(r"# Event count \(approx\.\): (\d+)", text)
            if m:
                total = int(m.group(1))
            m = line.match(text)
            if m:
                key = ("[k] " if m.group(2) == "[k]" else "") + m.group(3)
                ns[key] = ns.get(key, 0) + total * float(m.group(1)) / 100
    return {k: v / requests[handler] for k, v in ns.items()}

real, null = per_review("real"), per_review("null")
us = lambda v: f"{v / 1000:.2f}"
print(f"| function (self time) | real µs | null µs | real − null µs |")
print("|---|---:|---:|---:|")
keys = sorted(set(real) | set(null), key=lambda k: -abs(real.get(k, 0) - null.get(k, 0)))
for k in keys[:top]:
    name = k if len(k) <= 100 else k[:97] + "..."
    print(f"| `{name}` | {us(real.get(k, 0))} | {us(null.get(k, 0))} | {(real.get(k, 0) - null.get(k, 0)) / 1000:+.2f} |")
print()
for part, pick in (("kernel", lambda k: k.startswith("[k] ")), ("user", lambda k: not k.startswith("[k] "))):
    r = sum(v for k, v in real.items() if pick(k))
    n = sum(v for k, v in null.items() if pick(k))
    print(f"{part}: real {us(r)} µs, null {us(n)} µs, gap {(r - n) / 1000:+.2f} µs per review")
r, n = sum(real.values()), sum(null.values())
print(f"all: real {us(r)} µs, null {us(n)} µs per review, real/null {r / n:.2f}"
      f" ({requests['real']} and {requests['null']} reviews)")
EOF
