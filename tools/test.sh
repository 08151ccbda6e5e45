#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, runs every test;
# then builds every library shared (no link may run the wrong way) and runs
# the fast tier and a few end-to-end tests against the shared libraries.
#   HVDTUNE_SKIP_SHARED=1 leaves out the shared build.
# The PostgreSQL store's tests and the emulated cluster's tests fail here,
# rather than skip, where no server can start or no cluster can be made
# (tools/setup.sh installs all they need). Only on a machine that cannot
# run them:
#   HVDTUNE_REQUIRE_CLUSTER=0   (not root, no network namespaces, veth or tbf)
#   HVDTUNE_REQUIRE_POSTGRES=0  (no PostgreSQL server can run)
# and they show as "Skipped" in ctest's summary, with the reason.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export HVDTUNE_REQUIRE_CLUSTER=${HVDTUNE_REQUIRE_CLUSTER:-1}
export HVDTUNE_REQUIRE_POSTGRES=${HVDTUNE_REQUIRE_POSTGRES:-1}
"$root/tools/setup.sh"
build=${HVDTUNE_BUILD_DIR:-$root/build}
HVDTUNE_BUILD_DIR=$build "$root/tools/build.sh" -DHVDTUNE_WERROR=ON
(cd "$build" && ctest --output-on-failure --timeout 900)
if [ "${HVDTUNE_SKIP_SHARED:-0}" != 1 ]; then
  shared=${HVDTUNE_SHARED_BUILD_DIR:-$build-shared}
  HVDTUNE_BUILD_DIR=$shared "$root/tools/build.sh" -DHVDTUNE_WERROR=ON \
    -DBUILD_SHARED_LIBS=ON
  cd "$shared"
  ctest --output-on-failure --timeout 900 -L unit
  ctest --output-on-failure --timeout 900 -R \
    '^(find_package_downstream|c_api_np2|mpi_runtime_np2|store_warm_start_np2|store_warm_start_pg_np2|python_binding_np2|cli_sweep|cli_store)$'
fi
