#!/usr/bin/env bash
# An emulated cluster on one machine: every node is a network namespace
# joined to a switch namespace (a bridge) by a veth pair shaped like a real
# network link; ranks inside a node share memory (vader), ranks of different
# nodes talk TCP through the shaped links. See docs/cluster.md.
#
#   tools/cluster.sh up NODES RANKS_PER_NODE [--link PRESET] [--owner PID] [-- COMMAND...]
#   tools/cluster.sh run COMMAND...            mpirun across the nodes
#   tools/cluster.sh set --link PRESET [--node N]   reshape links (a job may run)
#   tools/cluster.sh link down|up --node N     unplug / replug node N's cable
#   tools/cluster.sh exec --node N COMMAND...  a command inside node N
#   tools/cluster.sh netperf --from A --to B [--seconds S]   TCP goodput, Gbit/s
#   tools/cluster.sh status | down | check | presets
#
# Presets (rate, tbf burst, tbf queue limit; why these: docs/cluster.md):
#   1gbe 1gbit/128kb/1mb   10gbe 10gbit/256kb/4mb   25gbe 25gbit/640kb/8mb
#   unshaped: no tbf, whatever this machine's CPUs carry through veth
#
# Several clusters can coexist: every name carries the cluster's id, from
# --id ID or $HVDTUNE_CLUSTER (default "default"). `up` removes what a dead
# cluster of the same id left; `up -- COMMAND` tears down when COMMAND ends
# (exit, Ctrl-C); `--owner PID` tears down when process PID is gone, even if
# it was killed. Addresses (10.211.0.0/24) exist only inside the cluster's
# namespaces: nothing routes to or from the root namespace.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
me=$here/cluster.sh
prog=cluster.sh
subnet_prefix=10.211.0
subnet=$subnet_prefix.0/24

die() { echo "$prog: $*" >&2; exit 2; }

preset_params() { # PRESET -> "rate burst limit"
  case $1 in
    1gbe) echo "1gbit 128kb 1mb" ;;
    10gbe) echo "10gbit 256kb 4mb" ;;
    25gbe) echo "25gbit 640kb 8mb" ;;
    unshaped) echo "none - -" ;;
    *) return 1 ;;
  esac
}
check_preset() {
  preset_params "$1" >/dev/null || die "unknown link preset '$1' (known: 1gbe, 10gbe, 25gbe, unshaped)"
}

# --- the cluster's id and names -------------------------------------------
id=${HVDTUNE_CLUSTER:-default}
if [[ ${1:-} == --id ]]; then
  [[ $# -ge 2 ]] || die "--id needs a value"
  id=$2
  shift 2
fi
[[ $id =~ ^[a-z0-9][a-z0-9_]{0,15}$ ]] ||
  die "bad cluster id '$id' (1-16 of a-z, 0-9, _; from --id or HVDTUNE_CLUSTER)"
export HVDTUNE_CLUSTER=$id
prefix=hvdtune-$id-
switch_ns=${prefix}switch
node_ns() { echo "${prefix}node$1"; }
state_root=${HVDTUNE_CLUSTER_DIR:-/run/hvdtune-cluster}
state=$state_root/$id
shm_dir=/dev/shm/hvdtune-cluster-$id

# Serialises up/down/set (of every id: they take a second at most); a lock
# on the directory leaves no file behind.
lock() {
  mkdir -p "$state_root"
  exec 9<"$state_root"
  flock 9
}

# One line saying why namespaces cannot be made here, or nothing.
why_not() {
  local probe=hvdtune-probe-$$ msg
  if [[ $(id -u) != 0 ]]; then
    echo "not root (network namespaces, veth and tc need CAP_NET_ADMIN as root)"
    return
  fi
  command -v ip >/dev/null || { echo "no 'ip' command (iproute2)"; return; }
  command -v tc >/dev/null || { echo "no 'tc' command (iproute2)"; return; }
  if ! msg=$(ip netns add "$probe" 2>&1); then
    echo "cannot create a network namespace: $msg"
    return
  fi
  if ! msg=$(ip -n "$probe" link add v0 type veth peer name v1 2>&1); then
    echo "cannot create a veth pair (kernel without veth?): $msg"
  elif ! msg=$(ip -n "$probe" link add br0 type bridge 2>&1); then
    echo "cannot create a bridge: $msg"
  elif ! msg=$(tc -n "$probe" qdisc add dev v0 root tbf rate 1gbit burst 128kb limit 1mb 2>&1); then
    echo "cannot shape a link with tc tbf (kernel without sch_tbf?): $msg"
  fi
  ip netns del "$probe" 2>/dev/null || true
}

# Kills the processes living in namespace $1 (TERM, then KILL).
kill_ns_procs() {
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null || true)
  [[ -z $pids ]] && return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    pids=$(ip netns pids "$1" 2>/dev/null || true)
    [[ -z $pids ]] && return 0
    sleep 0.2
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}

# Removes everything of this id: processes, namespaces, state, shared memory.
teardown() {
  local ns w
  if [[ -f $state/watchdog ]]; then
    w=$(cat "$state/watchdog")
    [[ $w != "${HVDTUNE_CLUSTER_WATCHDOG:-}" ]] && kill "$w" 2>/dev/null || true
  fi
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -F -- "$prefix" || true); do
    [[ $ns == "$prefix"* ]] || continue
    kill_ns_procs "$ns"
  done
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep -F -- "$prefix" || true); do
    [[ $ns == "$prefix"* ]] || continue
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$state" "$shm_dir"
}

need_cluster() {
  [[ -f $state/config ]] ||
    die "no cluster '$id' is up (tools/cluster.sh up NODES RANKS_PER_NODE; id from --id or HVDTUNE_CLUSTER)"
  # shellcheck disable=SC1091
  source "$state/config"
}

node_arg() { # validates a node index against the cluster
  [[ $1 =~ ^[0-9]+$ ]] && (($1 < nodes)) || die "bad node '$1' (this cluster has nodes 0..$((nodes - 1)))"
}

# Shapes both directions of node $1's link: the node's egress (its NIC) and
# the switch port's egress towards it.
shape() {
  local n=$1 preset=$2 rate burst limit
  read -r rate burst limit < <(preset_params "$preset")
  if [[ $rate == none ]]; then
    tc -n "$(node_ns "$n")" qdisc del dev eth0 root 2>/dev/null || true
    tc -n "$switch_ns" qdisc del dev "p$n" root 2>/dev/null || true
  else
    tc -n "$(node_ns "$n")" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" limit "$limit"
    tc -n "$switch_ns" qdisc replace dev "p$n" root tbf rate "$rate" burst "$burst" limit "$limit"
  fi
  echo "$preset" >"$state/link.$n"
}

cmd_up() {
  local nodes per_node preset=1gbe owner="" n ns why
  [[ $# -ge 2 ]] || die "usage: $prog up NODES RANKS_PER_NODE [--link PRESET] [--owner PID] [-- COMMAND...]"
  nodes=$1 per_node=$2
  shift 2
  [[ $nodes =~ ^[1-9][0-9]*$ && $nodes -le 64 ]] || die "NODES must be 1..64, not '$nodes'"
  [[ $per_node =~ ^[1-9][0-9]*$ ]] || die "RANKS_PER_NODE must be a positive integer, not '$per_node'"
  while [[ $# -gt 0 ]]; do
    case $1 in
      --link) [[ $# -ge 2 ]] || die "--link needs a preset"; preset=$2; shift 2 ;;
      --owner) [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || die "--owner needs a process id"; owner=$2; shift 2 ;;
      --) shift; break ;;
      *) die "up: unknown argument '$1'" ;;
    esac
  done
  check_preset "$preset"
  why=$(why_not)
  if [[ -n $why ]]; then
    echo "$prog: cannot emulate a cluster here: $why" >&2
    exit 3
  fi
  lock
  teardown # whatever a dead cluster of this id left behind
  mkdir -p "$state" "$shm_dir"
  printf 'nodes=%d\nper_node=%d\n' "$nodes" "$per_node" >"$state/config"
  ip netns add "$switch_ns"
  ip -n "$switch_ns" link set lo up
  ip -n "$switch_ns" link add br0 type bridge
  ip -n "$switch_ns" link set br0 up
  for ((n = 0; n < nodes; n++)); do
    ns=$(node_ns "$n")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add eth0 type veth peer name "p$n" netns "$switch_ns"
    ip -n "$ns" addr add "$subnet_prefix.$((n + 1))/24" dev eth0
    ip -n "$switch_ns" link set "p$n" master br0
    ip -n "$switch_ns" link set "p$n" up
    ip -n "$ns" link set eth0 up
    # A connection to a node that is cut off fails after about 6 s of
    # unanswered retransmissions (4 retries from a 200 ms timeout) instead
    # of the kernel's 15 minutes (15), so that mpirun and its daemons give
    # up on a dead node; a link down for 2 s still recovers.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=4
    shape "$n" "$preset"
    echo "node$n slots=$per_node" >>"$state/hostfile"
  done
  if [[ -n $owner || $# -gt 0 ]]; then
    # Tears down when the owner is gone, even if it was killed (SIGKILL runs
    # no trap). It leaves when the cluster is gone by other means.
    local watched=${owner:-$$}
    setsid bash -c 'while kill -0 "$1" 2>/dev/null && [ -f "$2/config" ]; do sleep 1; done
      [ -f "$2/config" ] && HVDTUNE_CLUSTER_WATCHDOG=$$ exec "$3" --id "$4" down' \
      cluster-watchdog "$watched" "$state" "$me" "$id" </dev/null >/dev/null 2>&1 9<&- &
    echo $! >"$state/watchdog"
  fi
  echo "cluster '$id' up: $nodes nodes x $per_node ranks, links $preset ($(preset_params "$preset" | awk '{ print "rate " $1 ", burst " $2 ", queue " $3 }'))" >&2
  if [[ $# -gt 0 ]]; then
    exec 9<&- # the command must not hold the lock
    trap 'teardown' EXIT
    # The command runs in the background so that a signal reaches this
    # shell's trap at once (bash defers traps while a foreground child runs).
    "$@" &
    local pid=$! rc=0
    trap 'kill -INT $pid 2>/dev/null; wait $pid; exit 130' INT
    trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit 143' TERM
    wait "$pid" || rc=$?
    exit "$rc"
  fi
}

cmd_run() {
  need_cluster
  [[ $# -gt 0 ]] || die "usage: $prog run COMMAND..."
  local np=$((nodes * per_node)) v
  local args=(--allow-run-as-root --oversubscribe --bind-to none
    --mca btl self,vader,tcp
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet"
    --mca plm_rsh_agent "$here/cluster_rsh.sh"
    --hostfile "$state/hostfile" -np "$np"
    --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1
    --mca oob_tcp_keepalive_probes 5)
  # mpirun and the nodes' daemons end the job when a node is cut off (link
  # down): TCP keepalives on their idle connections give up after 5
  # unanswered probes, at most 7 s after the last answer, and a connection
  # with data in flight gives up after tcp_retries2 (about 6 s; see `up`).
  # Without keepalives (Open MPI's default waits 300 s, then 9 probes 20 s
  # apart) a job whose ranks do not end by themselves waits for minutes;
  # with fewer probes an outage of 2 s can end a job that would go on.
  # docs/cluster.md#faults has the measurements.
  # Open MPI believes every node has its slots and busy-polls; with more
  # ranks than cores that starves the other ranks and the kernel's TCP
  # stack. Yield when idle, as Open MPI does when it knows it is
  # oversubscribed.
  if ((np > $(nproc))); then
    export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
  fi
  for v in $(compgen -e); do
    [[ $v == HOROVOD_* || $v == HVDTUNE_* ]] && args+=(-x "$v")
  done
  # shellcheck disable=SC2206  # the extra flags are meant to split
  local extra=(${HVDTUNE_CLUSTER_MPIRUN_ARGS:-})
  ip netns exec "$(node_ns 0)" "${HVDTUNE_MPIRUN:-mpirun}" "${args[@]}" "${extra[@]}" "$@" &
  local pid=$! rc=0
  trap 'kill -TERM $pid 2>/dev/null || true' INT TERM
  wait "$pid" || rc=$?
  # A signal interrupts the first wait; wait for mpirun to clean up.
  if kill -0 "$pid" 2>/dev/null; then wait "$pid" || rc=$?; fi
  trap - INT TERM
  return "$rc"
}

cmd_set() {
  local preset="" node="" n
  while [[ $# -gt 0 ]]; do
    case $1 in
      --link) [[ $# -ge 2 ]] || die "--link needs a preset"; preset=$2; shift 2 ;;
      --node) [[ $# -ge 2 ]] || die "--node needs a node index"; node=$2; shift 2 ;;
      *) die "set: unknown argument '$1' (usage: $prog set --link PRESET [--node N])" ;;
    esac
  done
  [[ -n $preset ]] || die "usage: $prog set --link PRESET [--node N]"
  check_preset "$preset"
  lock
  need_cluster
  if [[ -n $node ]]; then
    node_arg "$node"
    shape "$node" "$preset"
  else
    for ((n = 0; n < nodes; n++)); do shape "$n" "$preset"; done
  fi
}

cmd_link() {
  local what=${1:-} node=""
  [[ $what == up || $what == down ]] || die "usage: $prog link down|up --node N"
  shift
  [[ ${1:-} == --node && $# -ge 2 ]] || die "usage: $prog link down|up --node N"
  node=$2
  need_cluster
  node_arg "$node"
  # The switch side: the node keeps its address and carrier, its frames go
  # nowhere, as with a pulled cable or a dead switch port.
  ip -n "$switch_ns" link set "p$node" "$what"
}

cmd_exec() {
  [[ ${1:-} == --node && $# -ge 3 ]] || die "usage: $prog exec --node N COMMAND..."
  local node=$2
  shift 2
  need_cluster
  node_arg "$node"
  exec ip netns exec "$(node_ns "$node")" "$@"
}

cmd_netperf() {
  local from=0 to=1 seconds=3 port=5201
  while [[ $# -gt 0 ]]; do
    case $1 in
      --from) from=${2:?}; shift 2 ;;
      --to) to=${2:?}; shift 2 ;;
      --seconds) seconds=${2:?}; shift 2 ;;
      *) die "netperf: unknown argument '$1' (usage: $prog netperf --from A --to B [--seconds S])" ;;
    esac
  done
  need_cluster
  node_arg "$from"
  node_arg "$to"
  [[ $from != "$to" ]] || die "netperf: --from and --to must differ"
  local out
  out=$(mktemp)
  ip netns exec "$(node_ns "$to")" /usr/bin/python3 "$here/net_throughput.py" server \
    "$subnet_prefix.$((to + 1))" "$port" >"$out" &
  local server=$!
  local rc=0
  ip netns exec "$(node_ns "$from")" /usr/bin/python3 "$here/net_throughput.py" client \
    "$subnet_prefix.$((to + 1))" "$port" "$seconds" || rc=$?
  if ((rc != 0)); then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -f "$out"
    return "$rc"
  fi
  wait "$server" || rc=$?
  cat "$out"
  rm -f "$out"
  return "$rc"
}

cmd_status() {
  if [[ ! -f $state/config ]]; then
    echo "cluster '$id': down"
    ip netns list 2>/dev/null | awk '{ print $1 }' | grep -F -- "$prefix" |
      sed 's/^/  leftover namespace (tools\/cluster.sh up or down removes it): /' || true
    return 0
  fi
  need_cluster
  local n ns
  echo "cluster '$id': $nodes nodes x $per_node ranks, subnet $subnet, state $state"
  for ((n = 0; n < nodes; n++)); do
    ns=$(node_ns "$n")
    printf '  node%d %-9s %-6s port %-5s rate %-8s processes %s\n' "$n" \
      "$subnet_prefix.$((n + 1))" "$(cat "$state/link.$n")" \
      "$(ip -n "$switch_ns" -o link show "p$n" | grep -q 'state UP' && echo up || echo down)" \
      "$(tc -n "$ns" qdisc show dev eth0 | sed -n 's/.* rate \([^ ]*\).*/\1/p' | grep . || echo none)" \
      "$(ip netns pids "$ns" | wc -l)"
  done
}

cmd_down() {
  lock
  teardown
}

cmd_presets() {
  local p
  for p in 1gbe 10gbe 25gbe unshaped; do
    read -r rate burst limit < <(preset_params "$p")
    echo "$p rate=$rate burst=$burst limit=$limit"
  done
}

sub=${1:-}
[[ $# -gt 0 ]] && shift
case $sub in
  up) cmd_up "$@" ;;
  run) cmd_run "$@" ;;
  set) cmd_set "$@" ;;
  link) cmd_link "$@" ;;
  exec) cmd_exec "$@" ;;
  netperf) cmd_netperf "$@" ;;
  status) cmd_status ;;
  down) cmd_down ;;
  presets) cmd_presets ;;
  check)
    why=$(why_not)
    if [[ -n $why ]]; then
      echo "$prog: cannot emulate a cluster here: $why"
      exit 3
    fi
    echo "ok"
    ;;
  *) die "usage: $prog [--id ID] up|run|set|link|exec|netperf|status|down|check|presets ... (see the top of tools/cluster.sh)" ;;
esac
