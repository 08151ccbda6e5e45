#!/usr/bin/env bash
# Open MPI's rsh launch agent (plm_rsh_agent) for tools/cluster.sh: Open MPI
# calls `cluster_rsh.sh HOST COMMAND...` to start its daemon on HOST (node0,
# node1, ...); this runs COMMAND inside that node's network namespace of the
# cluster $HVDTUNE_CLUSTER, with the node's own host name (a UTS namespace),
# its own session directory and its own shared-memory backing directory, so
# the ranks of one node talk through shared memory and no two nodes share a
# segment.
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 HOST COMMAND... (Open MPI calls it)" >&2; exit 2; }
host=$1
shift
id=${HVDTUNE_CLUSTER:?cluster_rsh.sh runs under tools/cluster.sh run (HVDTUNE_CLUSTER unset)}
[[ $host =~ ^node[0-9]+$ ]] || { echo "$0: bad host name '$host' (node0, node1, ...)" >&2; exit 2; }
ns=hvdtune-$id-$host
state=${HVDTUNE_CLUSTER_DIR:-/run/hvdtune-cluster}/$id/$host
shm=/dev/shm/hvdtune-cluster-$id/$host
mkdir -p "$state" "$shm"
export TMPDIR=$state
export OMPI_MCA_orte_tmpdir_base=$state
export OMPI_MCA_btl_vader_backing_directory=$shm
export HVDTUNE_CLUSTER_NODE=$host
# Like sshd, run the command line through a shell: Open MPI sends it as one
# string with PATH/LD_LIBRARY_PATH assignments in front.
exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' "$host" "$*"
