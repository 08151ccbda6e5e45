# Sourced by the test scripts that need the emulated cluster or a PostgreSQL
# server: where one cannot be had, the test skips with the reason (exit 77,
# CTest's SKIP_RETURN_CODE: reported as "Skipped"), or fails where it is
# required. tools/test.sh (and so CI) requires both, unless told otherwise:
#   HVDTUNE_REQUIRE_CLUSTER=0   this machine cannot make network namespaces
#                               (not root, no veth/tbf): cluster tests skip
#   HVDTUNE_REQUIRE_POSTGRES=0  no PostgreSQL server here: its tests skip
# shellcheck shell=bash

# Skips or fails unless tools/cluster.sh ($1) can make a cluster here.
require_cluster() {
  local why
  why=$("$1" check) && return 0
  if [[ ${HVDTUNE_REQUIRE_CLUSTER:-0} == 1 ]]; then
    echo "FAIL: the emulated cluster is required (HVDTUNE_REQUIRE_CLUSTER=1) but $why." \
      "On a machine that cannot make one, run HVDTUNE_REQUIRE_CLUSTER=0 tools/test.sh" >&2
    exit 1
  fi
  echo "SKIP: $why"
  exit 77
}

# Skips or fails for the reason $1 that no PostgreSQL server can run.
no_postgres() {
  if [[ ${HVDTUNE_REQUIRE_POSTGRES:-0} == 1 ]]; then
    echo "FAIL: PostgreSQL is required here (HVDTUNE_REQUIRE_POSTGRES=1) but no server can run: $1" >&2
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}
