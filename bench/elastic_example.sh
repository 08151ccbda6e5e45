#!/usr/bin/env bash
# Runs Horovod's elastic example (examples/elastic/pytorch/
# pytorch_synthetic_benchmark_elastic.py from a Horovod checkout; give its
# path) on hvdtune with only its import changed, under
# `hvd-tune run --host-discovery-script` on two hosts of this machine,
# localhost and 127.0.0.1 (docs/elastic.md):
#   kill: starts on 4 ranks (2 per host), kills both ranks of 127.0.0.1
#         mid-run; passes when the job exits 0 on 2 ranks.
#   add:  starts on localhost's 2 ranks, adds 127.0.0.1:2 to the discovery
#         output mid-run; passes when the job exits 0 on 4 ranks.
# Prints the example's output, the launcher's world changes and the time
# from the event to the new world.
#
#   bench/elastic_example.sh PATH/TO/pytorch_synthetic_benchmark_elastic.py kill|add [BUILD_DIR]
set -euo pipefail
example=${1:?path to Horovod\'s pytorch_synthetic_benchmark_elastic.py}
scenario=${2:?kill or add}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${3:-$root/build}
cli=$build/tools/hvd_tune/hvd-tune
work=$(mktemp -d /tmp/hvdtune-elastic-example.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The one change: the import.
sed 's/^import horovod\.torch as hvd$/import hvdtune.torch as hvd/' "$example" >"$work/example.py"
grep -q '^import hvdtune.torch as hvd$' "$work/example.py" ||
  { echo "$example: no 'import horovod.torch as hvd' line" >&2; exit 2; }
diff "$example" "$work/example.py" || true
args=(--no-cuda --model squeezenet1_1 --batch-size 4 --num-warmup-batches 2
  --num-batches-per-iter 2 --num-iters ${HVDTUNE_EXAMPLE_ITERS:-40})
export PYTHONPATH=$build/python OMP_NUM_THREADS=1
case $scenario in
  kill) printf 'localhost:2\n127.0.0.1:2\n' >"$work/hosts"; np=(-np 4 --min-np 2 --max-np 4); final=2 ;;
  add) printf 'localhost:2\n' >"$work/hosts"; np=(-np 2 --min-np 2 --max-np 4); final=4 ;;
  *) echo "scenario: kill or add, not '$scenario'" >&2; exit 2 ;;
esac
log=$work/job.log
start=$(date +%s.%N)
"$cli" run "${np[@]}" --host-discovery-script "cat $work/hosts" -- \
  /usr/bin/python3 "$work/example.py" "${args[@]}" >"$log" 2>&1 &
job=$!
for _ in $(seq 600); do
  grep -q '^Iter #3:' "$log" && break
  kill -0 $job 2>/dev/null || break
  sleep 0.2
done
event=$(date +%s.%N)
if [[ $scenario == kill ]]; then
  victims=()
  for pid in $(pgrep -P $job); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'HOROVOD_HOSTNAME=127.0.0.1'; then
      victims+=("$pid")
    fi
  done
  echo "# killing the ranks of 127.0.0.1: ${victims[*]}"
  [[ ${#victims[@]} -eq 2 ]] || { cat "$log"; echo "FAIL: expected 2 ranks on 127.0.0.1" >&2; exit 1; }
  kill -9 "${victims[@]}"
else
  echo "# adding 127.0.0.1:2"
  printf 'localhost:2\n127.0.0.1:2\n' >"$work/hosts.new" && mv "$work/hosts.new" "$work/hosts"
fi
rc=0
wait $job || rc=$?
end=$(date +%s.%N)
grep -v '^\s*$' "$log" | grep -v 'Traceback\|^  File\|^    ' || true
echo "# exit status $rc; $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s in all"
world=$(grep -o 'elastic: world [0-9]*: [0-9]* ranks' "$log" | tail -1 | awk '{print $4}')
if [[ $rc -eq 0 ]] && grep -q "^Total img/sec on $final CPU(s)" "$log" && [[ $world == "$final" ]]; then
  echo "PASS: $scenario: finished on $final ranks, exit 0"
else
  echo "FAIL: $scenario: expected exit 0 on $final ranks (exit $rc, last world $world)"
  exit 1
fi
