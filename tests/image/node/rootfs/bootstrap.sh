#!/bin/sh
# Stand-in for OpenSandbox execd's bootstrap.sh, keeping the contract the
# webhook relies on: the main container's command becomes
# `/opt/opensandbox/bootstrap.sh <command>...`; this starts $EXECD
# (default /opt/opensandbox/execd) in the background, then runs "$@",
# forwards TERM and INT to both, and exits with the command's status.
set -e
EXECD="${EXECD:=/opt/opensandbox/execd}"
echo "bootstrap.sh: starting $EXECD in the background, then: $*"
"$EXECD" &
EXECD_PID=$!
CMD_PID=""
# shellcheck disable=SC2329 # invoked by the traps below
stop() {
	kill "-$1" "$CMD_PID" "$EXECD_PID" 2>/dev/null || true
	wait "$CMD_PID" 2>/dev/null || true
	exit 0
}
trap 'stop TERM' TERM
trap 'stop INT' INT
"$@" &
CMD_PID=$!
set +e
wait "$CMD_PID"
status=$?
set -e
kill -TERM "$EXECD_PID" 2>/dev/null || true
wait "$EXECD_PID" 2>/dev/null || true
exit "$status"
