#!/usr/bin/env bash
# Configures and builds hvdtune into build/ (or $HVDTUNE_BUILD_DIR).
# Extra arguments go to CMake's configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HVDTUNE_BUILD_DIR:-$root/build}
jobs=${HVDTUNE_JOBS:-$(nproc)}
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$jobs"
