#!/usr/bin/env bash
# Instructions per review under callgrind (docs/performance.md, "Reproducing
# the instruction counts"): examples/review_loop runs a body N times and
# once 0 times; the difference over N is one review, without the process's
# start and the body's read. Exact and repeatable, unlike the wall clock of
# a shared machine.
#
#   bench/callgrind.sh LOOP BODY [null] [N]
#
# LOOP is a built examples/review_loop; prints the instructions per review
# of `review` (or of `null_review` with `null`). N defaults to 20.
set -euo pipefail

usage() { echo "usage: $0 LOOP BODY [null] [N]" >&2; exit 2; }
(($# >= 2)) || usage
loop=$1 body=$2 mode=review n=20
shift 2
if [[ ${1:-} == null ]]; then mode=null; shift; fi
[[ -n ${1:-} ]] && n=$1
[[ $n =~ ^[1-9][0-9]*$ ]] || usage
command -v valgrind >/dev/null || { echo "$0: valgrind is not installed" >&2; exit 1; }

# Total instructions of one run (callgrind's "Collected" line).
count() { # reviews
  local args=("$body" "$1") out
  [[ $mode == null ]] && args+=(null)
  out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$loop" "${args[@]}" 2>&1 >/dev/null) || {
    echo "$out" >&2
    exit 1
  }
  sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' <<<"$out"
}

zero=$(count 0)
many=$(count "$n")
[[ -n $zero && -n $many ]] || { echo "$0: no instruction count in valgrind's output" >&2; exit 1; }
echo $(((many - zero) / n))
