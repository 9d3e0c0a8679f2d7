# shellcheck shell=bash
# Shared by bench/run.sh and bench/server_cpu.sh (sourced, not run): start
# and stop a release server on ports the kernel picks, read its CPU time,
# drive it with wrk.
#
# The caller sets WORK (a scratch folder holding certs/ from
# `sandbox-webhook certs`; see scratch_dir), BIN (the binary), and an array
# PIDS whose servers it kills on exit. SERVER_CPU and LOAD_CPU (the cores)
# and CONNECTIONS (the load's) are the environment's, or the defaults below.

SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
CONNECTIONS=${CONNECTIONS:-32}

# Where the kernel groups processes by session for the scheduler
# (autogroup), a nice value orders processes only within their session, so
# the builds of other sessions (at nice 10) share the two cores with a
# benchmark as equals, and a saturating wrk gets a third of its core. So a
# benchmark re-runs itself (`priority_session "$0" "$@"`, before it starts
# anything) in a session of its own whose group gets nice AUTOGROUP_NICE
# (default -20): the precedence /work/bin/quiet's nice -5 over nice 10
# builds means without autogroups. AUTOGROUP_NICE= (empty) leaves the
# scheduling as it is.
priority_session() { # script [args…]
  local nice=${AUTOGROUP_NICE--20}
  [[ -n $nice && -z ${BENCH_PRIORITY_SESSION:-} ]] || return 0
  [[ $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null) == 1 ]] || return 0
  export BENCH_PRIORITY_SESSION=1
  # shellcheck disable=SC2016 # expanded by the inner shell
  exec setsid -w bash -c 'echo "$1" >/proc/self/autogroup 2>/dev/null ||
    echo "cannot give this session'"'"'s scheduling group nice $1: other sessions share the cores as equals" >&2
    shift; exec "$@"' _ "$nice" "$@"
}

# utime + stime of a process, all its threads, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# the same, apart: "utime stime"
cpu_split() { awk '{print $14, $15}' "/proc/$1/stat"; }
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
# the value of KEY=value in a line of KEY=value pairs
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Starts a server (production log level, log to a file) pinned to
# SERVER_CPU on ports the kernel picks, and sets SERVER_PID, SERVER_PORT and
# SERVER_ADMIN from its "serving admission requests" log line.
# shellcheck disable=SC2034 # SERVER_PID and SERVER_PORT are for the caller
start_server() { # name [flags…]
  local name=$1 log="$WORK/$1.log" ports
  shift
  : >"$log"
  RUST_LOG=info taskset -c "$SERVER_CPU" "$BIN" serve \
    --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" \
    --addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 --shutdown-delay 0s "$@" \
    >>"$log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 100); do
    ports=$(sed -n 's/.*serving admission requests.*local_addr=[^ ]*:\([0-9]*\).*admin_addr=[^ ]*:\([0-9]*\).*/\1 \2/p' "$log")
    if [[ -n $ports ]]; then
      read -r SERVER_PORT SERVER_ADMIN <<<"$ports"
      curl -sf "http://127.0.0.1:$SERVER_ADMIN/readyz" >/dev/null && { SERVER_PID=$pid; return; }
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "server $name did not become ready:" >&2
  cat "$log" >&2
  exit 1
}

stop_server() {
  kill "$1"
  wait "$1" 2>/dev/null || true
}

# wrk (one thread, pinned to LOAD_CPU) against https://127.0.0.1:PORT/mutate
# with the review in BODY: prints wrk's "WRK requests=… seconds=… errors=…
# p50_us=… p99_us=…" line (bench/wrk.lua).
wrk_line() { # port body seconds connections
  BODY="$2" taskset -c "$LOAD_CPU" wrk -t1 -c"$4" -d"$3s" --timeout 5s \
    -s bench/wrk.lua "https://127.0.0.1:$1/mutate" | grep '^WRK '
}

# The tables' figures: KiB as MB, a ratio, a target met or missed.
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
ok() { if awk "BEGIN { exit !($1) }"; then echo met; else echo "**missed**"; fi; }

# scratch_dir: WORK, a temporary directory, and PIDS, the processes started
# into it; both are cleaned up when the script exits.
scratch_dir() {
  WORK=$(mktemp -d)
  PIDS=()
  trap scratch_cleanup EXIT
}
scratch_cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
