#!/usr/bin/env bash
# An Open MPI rsh launch agent (plm_rsh_agent) that emulates several nodes on
# one machine. Open MPI calls it as `fake_node_rsh.sh HOST COMMAND...` to start
# its daemon on HOST; this runs COMMAND here instead, in a per-host sandbox:
#   - its own session directory (orte_tmpdir_base, TMPDIR) and its own shared
#     memory backing directory for the vader BTL, so two fake hosts never
#     share (or clobber) each other's segments even though gethostname() is
#     the same for both;
#   - Open MPI then sees one daemon per host, so the ranks a daemon starts are
#     one node to MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) and talk through
#     shared memory, while ranks of different fake hosts talk over TCP
#     (launch with --mca btl self,vader,tcp).
# tools/fake_nodes.sh writes the hostfile and launches mpirun with it.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 HOST COMMAND..." >&2
  exit 2
fi
host=$1
shift
# ssh-style options Open MPI might pass before the host are not expected: the
# agent is named explicitly and no plm_rsh_args are set.
case $host in
  */* | .* | '') echo "$0: bad host name '$host'" >&2; exit 2 ;;
esac
base=${HVDTUNE_FAKE_NODE_DIR:-/tmp/hvdtune-fake-nodes}/$host
mkdir -p "$base/shm"
export TMPDIR=$base
export OMPI_MCA_orte_tmpdir_base=$base
export OMPI_MCA_btl_vader_backing_directory=$base/shm
export HVDTUNE_FAKE_NODE=$host
# Like sshd, run the command line through a shell: Open MPI sends it as one
# string with PATH/LD_LIBRARY_PATH assignments in front.
exec /bin/sh -c "$*"
