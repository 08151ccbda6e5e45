#!/usr/bin/env bash
# Time from a host's failure to the first training step of the next world,
# over RUNS runs of python/tests/test_elastic.py's kill test (4 ranks on
# localhost and 127.0.0.1, both ranks of 127.0.0.1 killed; docs/elastic.md).
# Prints each run's seconds, then the median and the max.
#
#   bench/elastic_reset.sh [RUNS] [BUILD_DIR]
set -euo pipefail
runs=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build}
export HVDTUNE_CLI=$build/tools/hvd_tune/hvd-tune PYTHONPATH=$build/python OMP_NUM_THREADS=1
times=()
for i in $(seq "$runs"); do
  out=$(/usr/bin/python3 -m pytest -q -s -p no:cacheprovider \
    "$root/python/tests/test_elastic.py" -k host_killed 2>&1) ||
    { echo "$out" | tail -30; echo "run $i failed" >&2; exit 1; }
  t=$(echo "$out" | sed -n 's/.*4 -> 2 ranks: \([0-9.]*\) s.*/\1/p')
  echo "run $i: $t s"
  times+=("$t")
done
printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {
  m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
  printf "failure to first step of the new world, %d runs: median %.2f s, max %.2f s\n", NR, m, a[NR]}'
