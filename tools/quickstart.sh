#!/usr/bin/env bash
# The main job: installs what is missing, builds, and shows hvdtune's whole
# promise on synthetic training on a 2-node x 2-rank cluster emulated by
# tools/cluster.sh (one network namespace per node, shared memory inside a
# node, TCP across links shaped like 1 GbE: the setting where the knobs are
# worth most, measured in docs/benchmarks.md):
#   1. the default configuration's throughput (its allreduce algorithm
#      follows the node layout: hierarchical here);
#   2. a first run with HOROVOD_AUTOTUNE=1: it explores (a progress line per
#      10-step window shows the phase and sample n/N), freezes, and records
#      every sample and the best configuration in a config store;
#   3. a second run of the same job: it finds its fingerprint in the store,
#      applies the stored best at once and only confirms it (zero
#      exploration samples);
#   4. default and tuned re-measured side by side, interleaved, so the
#      printed speed-up compares like with like; with them the default knobs
#      on the library's own allreduce (native, Horovod's default).
# On the cluster the workload is resnet50 at 1/10 of its gradient size.
# Where network namespaces cannot be made (not root, no veth/tbf), it says
# why and runs on loopback fake nodes (tools/fake_nodes.sh) instead, where
# every knob is within the noise.
# A few minutes on 2 cores. The store is a fresh file (HOROVOD_AUTOTUNE_DB)
# unless QUICKSTART_DB names one. QUICKSTART_NODES=1 runs the 4 ranks as one
# node; QUICKSTART_LINK picks the link preset (1gbe; see tools/cluster.sh
# presets); QUICKSTART_WORKLOAD and QUICKSTART_SCALE the workload
# (resnet50, 0.1 on the cluster; many-small, 1 on fake nodes);
# QUICKSTART_ROUNDS the side-by-side rounds (5); QUICKSTART_ENGINE=gloo runs
# the runtime on the Gloo engine instead of MPI (docs/gloo.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HVDTUNE_BUILD_DIR:-$root/build}
# QUICKSTART_NO_BUILD=1: use an existing build as it is.
if [ "${QUICKSTART_NO_BUILD:-0}" != 1 ]; then
  "$root/tools/setup.sh"
  HVDTUNE_BUILD_DIR=$build "$root/tools/build.sh"
fi

ranks=4
nodes=${QUICKSTART_NODES:-2}
rounds=${QUICKSTART_ROUNDS:-5}
case $nodes in
  1 | 2 | 4) ;;
  *) echo "$0: QUICKSTART_NODES must be 1, 2 or 4 (4 ranks), not '$nodes'" >&2; exit 2 ;;
esac
link=${QUICKSTART_LINK:-1gbe}
scratch=$(mktemp -d)
cluster=""
cleanup() {
  [[ -n $cluster ]] && "$root/tools/cluster.sh" --id "$cluster" down
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The emulated cluster when namespaces can be made; loopback fake nodes else.
if ((nodes > 1)); then
  if why=$("$root/tools/cluster.sh" check); then
    cluster=quickstart$$
    cluster=${cluster:0:16}
    # --owner: the cluster goes with this script even if it is killed.
    "$root/tools/cluster.sh" --id "$cluster" up "$nodes" $((ranks / nodes)) \
      --link "$link" --owner $$
  else
    echo "$why" >&2
    echo "$0: falling back to loopback fake nodes (tools/fake_nodes.sh): no link is slower than another, so the knobs are within the noise there" >&2
  fi
fi
# On the 1 GbE cluster the gradients of resnet50 x0.1 (10 MB a step) make
# the link the bottleneck, and the hierarchical allreduce, which sends each
# byte across it once per node rather than once per rank, is worth about
# 1.4x over native, steadily (the default starts with it; the tuner adds
# about 1.1x with the fusion threshold, the ring segment and the cycle
# thread's boost); many-small (1,000 small tensors) gains as much but its
# steps are CPU-bound and swing with whatever else the machine runs. On one
# machine's loopback nothing is worth much; many-small gains most there.
if [[ -n $cluster ]]; then
  workload=${QUICKSTART_WORKLOAD:-resnet50}
  scale=${QUICKSTART_SCALE:-0.1}
else
  workload=${QUICKSTART_WORKLOAD:-many-small}
  scale=${QUICKSTART_SCALE:-1}
fi
args=(--workload "$workload" --scale "$scale" --batch-size 32 --json)
# QUICKSTART_ENGINE=gloo: the runtime on the Gloo engine (docs/gloo.md), its
# traffic on the cluster's eth0 (loopback on one machine).
case ${QUICKSTART_ENGINE:-mpi} in
  mpi) ;;
  gloo) args+=(--gloo-iface "$([[ -n $cluster ]] && echo eth0 || echo lo)") ;;
  *) echo "$0: QUICKSTART_ENGINE must be mpi or gloo, not '$QUICKSTART_ENGINE'" >&2; exit 2 ;;
esac
export HOROVOD_AUTOTUNE_DB=${QUICKSTART_DB:-$scratch/store.db}
export HVDTUNE_AUTOTUNE_STORE=auto

# Runs the trainer with HOROVOD_AUTOTUNE=$1 on every rank; the rest are flags.
# Every rank serves Prometheus metrics on $metrics_port + its local rank (the
# runtime adds it). On the emulated cluster every node has its own address,
# as real nodes do; loopback fake nodes share one, so there each node gets
# the base plus its first rank (dashboard/prometheus.yml scrapes 9400-9403).
# Each rank prints its endpoint on stderr when it starts.
metrics_port=${HOROVOD_METRICS_PORT:-9400}
train() {
  local autotune=$1
  shift
  if [[ -n $cluster ]]; then
    HOROVOD_AUTOTUNE=$autotune HOROVOD_METRICS_PORT=$metrics_port \
      "$root/tools/cluster.sh" --id "$cluster" run "$build/bench/synthetic_train" "${args[@]}" "$@"
    return
  fi
  local launch=("$root/tools/mpirun.sh" -np "$ranks")
  if ((nodes > 1)); then
    launch=("$root/tools/fake_nodes.sh" "$nodes" $((ranks / nodes)))
  fi
  # shellcheck disable=SC2016  # expanded by the rank's shell
  HOROVOD_AUTOTUNE=$autotune HOROVOD_METRICS_PORT=$metrics_port \
    "${launch[@]}" -x HOROVOD_AUTOTUNE \
    -x HOROVOD_METRICS_PORT -x HOROVOD_AUTOTUNE_DB -x HVDTUNE_AUTOTUNE_STORE \
    /bin/sh -c 'HOROVOD_METRICS_PORT=$((HOROVOD_METRICS_PORT + OMPI_COMM_WORLD_RANK - OMPI_COMM_WORLD_LOCAL_RANK)) exec "$0" "$@"' \
    "$build/bench/synthetic_train" "${args[@]}" "$@"
}
# The JSON line's numeric field $2 of object text $1 (first occurrence).
field() { sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p" <<<"$1" | head -n 1; }
# The JSON line's string field $2.
text() { sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" <<<"$1" | head -n 1; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
where="$ranks ranks"
((nodes > 1)) && where="$nodes loopback fake nodes x $((ranks / nodes)) ranks"
[[ -n $cluster ]] && where="$nodes emulated nodes x $((ranks / nodes)) ranks, $link links"
echo "== 1. synthetic training, $workload x$scale, $where: default knobs =="
default=$(train 0 --warmup-steps 10 --measure-steps 60)
echo "$default"
echo
echo "== 2. HOROVOD_AUTOTUNE=1, first run: explores, freezes, records in $HOROVOD_AUTOTUNE_DB =="
if [[ -n $cluster ]]; then
  echo "metrics while it runs, inside the cluster: HVDTUNE_CLUSTER=$cluster tools/cluster.sh exec --node N" \
    "curl -s http://10.211.0.(N+1):$metrics_port/metrics (ports $metrics_port..$((metrics_port + ranks / nodes - 1)) on every node)"
else
  echo "metrics while it runs: http://127.0.0.1:$metrics_port/metrics .. port $((metrics_port + ranks - 1))" \
    "(Prometheus: prometheus --config.file=dashboard/prometheus.yml; Grafana: dashboard/hvdtune.json)"
fi
first=$(train 1 --until-frozen --max-steps 800 --measure-steps 40)
echo "$first"
echo
echo "== 3. the same job again: starts from the store =="
second=$(train 1 --until-frozen --max-steps 800 --measure-steps 40)
echo "$second"
echo
echo "== 4. native, default and tuned side by side, $rounds interleaved rounds =="
# "Tuned" applies the stored best without tuning (HVDTUNE_AUTOTUNE_STORE=apply):
# the knobs of run 2, in force from the second step on. "Native" is the
# default knobs with the library's own allreduce (Horovod's default,
# HOROVOD_HIERARCHICAL_ALLREDUCE=0), for reference: hvdtune's default
# algorithm follows the node layout.
# The order rotates between rounds: whichever runs later in a round
# measured a few percent faster here even with identical knobs.
natives=() defaults=() tuneds=()
run_native() {
  field "$(HVDTUNE_ALLREDUCE_ALGORITHM=native train 0 --warmup-steps 10 --measure-steps 60)" samples_per_sec
}
run_default() { field "$(train 0 --warmup-steps 10 --measure-steps 60)" samples_per_sec; }
run_tuned() {
  field "$(HVDTUNE_AUTOTUNE_STORE=apply train 1 --warmup-steps 10 --measure-steps 60)" samples_per_sec
}
for ((r = 1; r <= rounds; r++)); do
  case $((r % 3)) in
    1) n=$(run_native) d=$(run_default) t=$(run_tuned) ;;
    2) d=$(run_default) t=$(run_tuned) n=$(run_native) ;;
    0) t=$(run_tuned) n=$(run_native) d=$(run_default) ;;
  esac
  echo "round $r: native $n, default $d, tuned $t samples/s"
  natives+=("$n") defaults+=("$d") tuneds+=("$t")
done

d1=$(field "$default" samples_per_sec)
t1=$(field "$first" samples_per_sec)
t2=$(field "$second" samples_per_sec)
dm=$(printf '%s\n' "${defaults[@]}" | median)
tm=$(printf '%s\n' "${tuneds[@]}" | median)
nm=$(printf '%s\n' "${natives[@]}" | median)
config=$(sed -n 's/.*"config":{\([^}]*\)}.*/\1/p' <<<"$first" | tr -d '"' | tr ',:' ' =')
echo
echo "== result, $where (a sample = one example: 32 per rank per step x $ranks ranks) =="
printf '1. default configuration:   %10.1f samples/s\n' "$d1"
printf '2. first autotuned run:     %10.1f samples/s  (%s, source %s, %s exploration samples)\n' \
  "$t1" "$(text "$first" phase)" "$(text "$first" source)" "$(field "$first" exploration_samples)"
printf '3. second run of the job:   %10.1f samples/s  (%s, source %s, %s exploration samples)\n' \
  "$t2" "$(text "$second" phase)" "$(text "$second" source)" "$(field "$second" exploration_samples)"
echo "   fingerprint: $(text "$second" fingerprint)"
echo "tuned knobs: $config"
printf '4. side by side, median of %s rounds: native %.1f, default %.1f, tuned %.1f samples/s\n' \
  "$rounds" "$nm" "$dm" "$tm"
awk -v d="$dm" -v t="$tm" -v n="$nm" 'BEGIN {
  printf "speed-up: %.2fx (tuned against the default; against native: default %.2fx, tuned %.2fx)\n", t / d, d / n, t / n
}'
# The cost of tuning (run 2): the training time its exploration lost against
# the default configuration, and how long the tuned configuration, at the
# side-by-side speed-up, takes to win it back.
awk -v s="$(field "$first" exploration_seconds)" -v l="$(field "$first" exploration_loss_seconds)" \
  -v b="$(field "$first" exploration_below_best)" -v d="$dm" -v t="$tm" 'BEGIN {
  if (s == "" || s <= 0) exit
  printf "cost of tuning (run 2): exploring took %.1f s of steps, its samples %.1f%% below the best on average; ", s, 100 * b
  if (l <= 0) { printf "it lost nothing against the default (%.1f s ahead)\n", -l; exit }
  printf "it lost %.1f s of training against the default", l
  if (t > d) printf ", won back in %.1f s of tuned training\n", l / (t / d - 1)
  else printf ", not won back (the tuned configuration is not faster)\n"
}'

