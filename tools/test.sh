#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, runs every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
build=${HVDTUNE_BUILD_DIR:-$root/build}
HVDTUNE_BUILD_DIR=$build "$root/tools/build.sh" -DHVDTUNE_WERROR=ON
cd "$build"
ctest --output-on-failure --timeout 900
