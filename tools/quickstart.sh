#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs hvdtune on 4 ranks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
HVDTUNE_BUILD_DIR=${HVDTUNE_BUILD_DIR:-$root/build} "$root/tools/build.sh"
build=${HVDTUNE_BUILD_DIR:-$root/build}
echo
echo "== hvdtune allreduce vs raw MPI_Allreduce, 4 ranks =="
"$root/tools/mpirun.sh" -np 4 "$build/bench/allreduce_bench" \
  --min-bytes 4096 --max-bytes 67108864 --repeats 5
