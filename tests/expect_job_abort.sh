#!/usr/bin/env bash
# Runs a command that is meant to go wrong (an MPI job whose test fails or
# hangs on one rank) and checks that it ends by itself within LIMIT seconds,
# with a non-zero status and, for each PATTERN (an extended regular
# expression), a line of output that matches it.
#
#   tests/expect_job_abort.sh LIMIT PATTERN... -- COMMAND [ARGS...]
set -uo pipefail
usage="usage: $0 LIMIT PATTERN... -- COMMAND [ARGS...]"
limit=${1:?$usage}
shift
patterns=()
while [[ $# -gt 0 && $1 != -- ]]; do
  patterns+=("$1")
  shift
done
if [[ $# -lt 2 || ${#patterns[@]} -eq 0 ]]; then
  echo "$usage" >&2
  exit 2
fi
shift
start=$(date +%s%N)
out=$(timeout -k 5 "$limit" "$@" 2>&1)
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
elapsed=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
printf '%s\n' "$out"
echo "---- exit status $rc after ${elapsed} s"
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "FAIL: still running after ${limit} s; killed"
  exit 1
fi
if [[ $rc -eq 0 ]]; then
  echo "FAIL: succeeded; expected the job to be aborted"
  exit 1
fi
for pattern in "${patterns[@]}"; do
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: no line matches: $pattern"
    exit 1
  fi
done
echo "PASS: ended in ${elapsed} s with:"
for pattern in "${patterns[@]}"; do grep -E -m1 -- "$pattern" <<<"$out"; done
