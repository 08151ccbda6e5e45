#!/usr/bin/env bash
# Runs an MPI program on emulated nodes of this machine: NODES fake hosts
# (node0, node1, ...) with RANKS_PER_NODE ranks each. Ranks on one fake host
# share memory (vader); ranks on different fake hosts talk over TCP, and
# MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) sees NODES nodes.
#
#   tools/fake_nodes.sh NODES RANKS_PER_NODE PROGRAM [ARGS...]
#
# It writes the hostfile and launches mpirun with tools/fake_node_rsh.sh as
# Open MPI's rsh agent. The fake host names need not resolve: Open MPI only
# hands them to the agent, which runs everything locally. Extra mpirun flags
# can be given in HVDTUNE_FAKE_NODES_MPIRUN_ARGS (e.g. "--map-by node"), the
# mpirun to use in HVDTUNE_MPIRUN.
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: $0 NODES RANKS_PER_NODE PROGRAM [ARGS...]" >&2
  exit 2
fi
nodes=$1
per_node=$2
shift 2
if ! [[ $nodes =~ ^[1-9][0-9]*$ && $per_node =~ ^[1-9][0-9]*$ ]]; then
  echo "$0: NODES and RANKS_PER_NODE must be positive integers" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
dir=${HVDTUNE_FAKE_NODE_DIR:-/tmp/hvdtune-fake-nodes}
mkdir -p "$dir"
hostfile=$dir/hostfile.$$
trap 'rm -f "$hostfile"' EXIT
for ((n = 0; n < nodes; n++)); do
  echo "node$n slots=$per_node"
done >"$hostfile"
export HVDTUNE_FAKE_NODE_DIR=$dir
# Open MPI sees "slots" on every fake host and so believes it is not
# oversubscribed, and busy-polls. With more ranks than cores that starves the
# other ranks and the kernel's TCP stack: a 16 KiB allreduce across fake
# hosts took 13-25 ms instead of 0.1 ms here. Yield when idle, as Open MPI
# does by itself when it knows it is oversubscribed.
if ((nodes * per_node > $(nproc))); then
  export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
fi
# shellcheck disable=SC2086  # the extra flags are meant to split
"${HVDTUNE_MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe --bind-to none \
  --mca btl self,vader,tcp \
  --mca plm_rsh_agent "$here/fake_node_rsh.sh" \
  --hostfile "$hostfile" -np $((nodes * per_node)) \
  ${HVDTUNE_FAKE_NODES_MPIRUN_ARGS:-} "$@"
