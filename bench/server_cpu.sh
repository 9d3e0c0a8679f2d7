#!/usr/bin/env bash
# The server's CPU per review, the real handler against the null handler
# (`serve --null-handler`: the same TLS, HTTP, limits, budget, metrics and
# log line, the object unread), from one run (docs/performance.md, "Server
# CPU per review, real against null").
#
#   bench/server_cpu.sh BIN                    one build ("this")
#   bench/server_cpu.sh NAME=BIN NAME=BIN ...  builds side by side (before/after)
#
# Every build gets a real and a null server, all pinned to SERVER_CPU (one
# core); wrk (one thread, CONNECTIONS keep-alive TLS 1.3 connections) runs
# on LOAD_CPU. A round measures every (build, handler) pair on every shape
# for SECONDS_PER_RUN at saturation, in an order rotated by one each round,
# so that a neighbour's burst or a drift of the machine falls on every pair
# alike. CPU per review is the server's utime + stime (/proc/PID/stat, all
# threads: the log writer included) over the run, divided by the reviews
# answered. real/null is taken within each round and reported as the median
# of the rounds, with their spread (min-max).
#
# Prints a Markdown table, then one line per build and shape, e.g.
#   server CPU real/null [this] pod-10k: 1.38x (1.35-1.41, 5 rounds); real 61.2 us, null 44.3 us
# Exits 1 if any request failed, never because of speed.
#
# Use it under /work/bin/quiet; it runs in a scheduling group of its own
# (see priority_session in bench/server-lib.sh).
#
# Environment: SERVER_CPU (0), LOAD_CPU (1), ROUNDS (5), SECONDS_PER_RUN (5),
# SHAPES ("pod-8k pod-10k": bench/reviews/<shape>.json), CONNECTIONS (32),
# AUTOGROUP_NICE (-20; empty: leave the scheduling as it is).
set -euo pipefail
cd "$(dirname "$0")/.."

(($# >= 1)) || { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
command -v wrk >/dev/null || { echo "$0: wrk is required (apt-get install wrk)" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR source=server-lib.sh
source bench/server-lib.sh
priority_session "$0" "$@"
ROUNDS=${ROUNDS:-5}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
read -r -a SHAPES <<<"${SHAPES:-pod-8k pod-10k}"
CLK_TCK=$(getconf CLK_TCK)
scratch_dir
log() { echo "[server-cpu] $*" >&2; }

BUILDS=()
declare -A BUILD_BIN
for arg in "$@"; do
  if [[ $arg == *=* ]]; then name=${arg%%=*} bin=${arg#*=}; else name=this bin=$arg; fi
  [[ -x $bin ]] || { echo "$0: $bin is not an executable" >&2; exit 2; }
  BUILDS+=("$name")
  BUILD_BIN[$name]=$bin
done
for shape in "${SHAPES[@]}"; do
  [[ -f bench/reviews/$shape.json ]] || python3 bench/make_reviews.py >&2
done

"${BUILD_BIN[${BUILDS[0]}]}" certs --ip 127.0.0.1 --dns localhost --days 2 --out "$WORK/certs" >/dev/null
declare -A PID PORT
PAIRS=()
for b in "${BUILDS[@]}"; do
  BIN=${BUILD_BIN[$b]}
  start_server "$b-real"
  PID[$b,real]=$SERVER_PID PORT[$b,real]=$SERVER_PORT
  start_server "$b-null" --null-handler
  PID[$b,null]=$SERVER_PID PORT[$b,null]=$SERVER_PORT
  PAIRS+=("$b,real" "$b,null")
done

ERRORS=0
# One run at saturation: sets RUN to "user_us sys_us rps busy" per review
# (busy: the server's CPU time over the run's wall time).
measure() { # pair shape seconds
  local pid=${PID[$1]} port=${PORT[$1]} u0 s0 u1 s1 out requests seconds errors
  read -r u0 s0 < <(cpu_split "$pid")
  out=$(wrk_line "$port" "bench/reviews/$2.json" "$3" "$CONNECTIONS")
  read -r u1 s1 < <(cpu_split "$pid")
  requests=$(field requests "$out") seconds=$(field seconds "$out") errors=$(field errors "$out")
  ERRORS=$((ERRORS + ${errors:-1}))
  ((requests > 0)) || { log "$1 $2: no requests: $out"; ERRORS=$((ERRORS + 1)); requests=1; }
  RUN=$(awk -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v r="$requests" -v w="$seconds" -v hz="$CLK_TCK" \
    'BEGIN { printf "%.2f %.2f %.0f %.2f", u * 1e6 / hz / r, s * 1e6 / hz / r, r / w, (u + s) / hz / w }')
}

log "builds: ${BUILDS[*]}; shapes: ${SHAPES[*]}; server on CPU $SERVER_CPU, wrk on CPU $LOAD_CPU;" \
  "$ROUNDS rounds of ${SECONDS_PER_RUN}s per pair and shape"
for shape in "${SHAPES[@]}"; do
  for pair in "${PAIRS[@]}"; do measure "$pair" "$shape" 1; done
done
declare -A CPU_USR CPU_SYS RPS BUSY
n=${#PAIRS[@]}
for ((round = 0; round < ROUNDS; round++)); do
  for shape in "${SHAPES[@]}"; do
    for ((i = 0; i < n; i++)); do
      pair=${PAIRS[$(((i + round) % n))]}
      measure "$pair" "$shape" "$SECONDS_PER_RUN"
      read -r u s r busy <<<"$RUN"
      log "round $((round + 1))/$ROUNDS $shape ${pair/,/ }: $u + $s µs CPU per review, $r/s, server busy $busy"
      CPU_USR[$pair,$shape]+=" $u" CPU_SYS[$pair,$shape]+=" $s" RPS[$pair,$shape]+=" $r" BUSY[$pair,$shape]+=" $busy"
    done
  done
done

# per-round totals of a pair: "u+s" for each round
totals() { paste -d' ' <(tr ' ' '\n' <<<"${CPU_USR[$1]# }") <(tr ' ' '\n' <<<"${CPU_SYS[$1]# }") | awk '{ print $1 + $2 }'; }
# shellcheck disable=SC2046 # lists of numbers
summary() { # build shape: "ratio min max real null real_user real_sys null_user null_sys real_rps null_rps busy_min"
  local b=$1 shape=$2 real null ratios
  mapfile -t real < <(totals "$b,real,$shape")
  mapfile -t null < <(totals "$b,null,$shape")
  ratios=$(paste -d' ' <(printf '%s\n' "${real[@]}") <(printf '%s\n' "${null[@]}") | awk '{ printf "%.3f\n", $1 / $2 }')
  # shellcheck disable=SC2086
  echo "$(median $ratios) $(sort -n <<<"$ratios" | head -1) $(sort -n <<<"$ratios" | tail -1)" \
    "$(median "${real[@]}") $(median "${null[@]}")" \
    "$(median ${CPU_USR[$b,real,$shape]}) $(median ${CPU_SYS[$b,real,$shape]})" \
    "$(median ${CPU_USR[$b,null,$shape]}) $(median ${CPU_SYS[$b,null,$shape]})" \
    "$(median ${RPS[$b,real,$shape]}) $(median ${RPS[$b,null,$shape]})" \
    "$(printf '%s\n' ${BUSY[$b,real,$shape]} ${BUSY[$b,null,$shape]} | sort -n | head -1)"
}

echo "| build | review | real: CPU µs / review (user + sys) | null: CPU µs / review (user + sys) | **real / null** (median of $ROUNDS rounds; min–max) | req/s real / null | least server busy |"
echo "|---|---|---:|---:|---:|---:|---:|"
LINES=()
for b in "${BUILDS[@]}"; do
  for shape in "${SHAPES[@]}"; do
    read -r ratio lo hi real null ru rs nu ns rr nr busy <<<"$(summary "$b" "$shape")"
    printf '| %s | %s (%s B) | %.1f (%.1f + %.1f) | %.1f (%.1f + %.1f) | **%.2f ×** (%.2f–%.2f) | %s / %s | %.0f %% |\n' \
      "$b" "$shape" "$(stat -c %s "bench/reviews/$shape.json")" "$real" "$ru" "$rs" "$null" "$nu" "$ns" \
      "$ratio" "$lo" "$hi" "$rr" "$nr" "$(awk -v b="$busy" 'BEGIN { print b * 100 }')"
    LINES+=("$(printf 'server CPU real/null [%s] %s: %.2fx (%.2f-%.2f, %d rounds); real %.1f us, null %.1f us per review' \
      "$b" "$shape" "$ratio" "$lo" "$hi" "$ROUNDS" "$real" "$null")")
  done
done
echo
printf '%s\n' "${LINES[@]}"
if ((ERRORS > 0)); then
  echo "server-cpu: $ERRORS failed requests" >&2
  exit 1
fi
