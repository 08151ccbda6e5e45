#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs synthetic training
# of ResNet-50's gradients (scaled to 1/10 for a small machine) on 4 ranks,
# first with the default knobs, then with HOROVOD_AUTOTUNE=1 until tuning
# froze, and prints both throughputs, the tuned knobs and the speed-up.
# Both throughputs are measured the same way (median of 10-step windows;
# the tuned one after the freeze). A few minutes on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
build=${HVDTUNE_BUILD_DIR:-$root/build}
HVDTUNE_BUILD_DIR=$build "$root/tools/build.sh"

ranks=4
args=(--workload resnet50 --scale 0.1 --batch-size 32 --json)
# Runs the trainer with HOROVOD_AUTOTUNE=$1 on every rank; the rest are flags.
# Every rank serves Prometheus metrics on $metrics_port + its local rank
# (dashboard/prometheus.yml scrapes 9400-9403); each rank prints its
# endpoint on stderr when it starts.
metrics_port=${HOROVOD_METRICS_PORT:-9400}
train() {
  local autotune=$1
  shift
  HOROVOD_AUTOTUNE=$autotune HOROVOD_METRICS_PORT=$metrics_port \
    "$root/tools/mpirun.sh" -np "$ranks" -x HOROVOD_AUTOTUNE -x HOROVOD_METRICS_PORT \
    "$build/bench/synthetic_train" "${args[@]}" "$@"
}
# The JSON line's numeric field $2 of object text $1.
field() { sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p" <<<"$1" | head -n 1; }

echo
echo "== synthetic training, resnet50 x0.1, $ranks ranks: default knobs =="
default=$(train 0 --warmup-steps 10 --measure-steps 60)
echo "$default"
echo
echo "== the same with HOROVOD_AUTOTUNE=1, until tuning froze =="
echo "metrics while it runs: http://127.0.0.1:$metrics_port/metrics .. port $((metrics_port + ranks - 1))" \
  "(Prometheus: prometheus --config.file=dashboard/prometheus.yml; Grafana: dashboard/hvdtune.json)"
tuned=$(train 1 --until-frozen --max-steps 600 --measure-steps 60)
echo "$tuned"

d=$(field "$default" samples_per_sec)
t=$(field "$tuned" samples_per_sec)
config=$(sed -n 's/.*"config":{\([^}]*\)}.*/\1/p' <<<"$tuned" | tr -d '"' | tr ',:' ' =')
phase=$(sed -n 's/.*"phase":"\([a-z]*\)".*/\1/p' <<<"$tuned")
samples=$(sed -n 's/.*"autotune":{[^}]*"samples":\([0-9]*\).*/\1/p' <<<"$tuned")
echo
echo "== result (a sample = one example: 32 per rank per step x $ranks ranks) =="
printf 'default configuration: %10.1f samples/s\n' "$d"
printf 'tuned configuration:   %10.1f samples/s  (%s after %s tuning samples)\n' "$t" "$phase" "$samples"
echo "tuned knobs: $config"
awk -v d="$d" -v t="$t" 'BEGIN { printf "speed-up: %.2fx\n", t / d }'
