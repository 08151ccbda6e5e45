#!/usr/bin/env bash
# Runs the README's two commands on a really fresh Debian 12: builds a
# minimal chroot (debootstrap --variant=minbase bookworm), clones this
# repository's HEAD into it and runs, as root and with nothing else prepared,
#   tools/test.sh        then        tools/quickstart.sh
# logging each, then unmounts everything (and removes the chroot unless
# --keep). Proves that tools/setup.sh installs all that the tests and the
# main job use. See docs/testing.md.
#
#   tools/fresh_debian_check.sh [--dir DIR] [--logs DIR] [--keep]
#                               [--only test|quickstart]
#
# Needs root (debootstrap, mounts, and the emulated cluster's network
# namespaces inside the chroot), network access to a Debian mirror, and a
# few GB of disk. Installs debootstrap when missing. The mirror is the
# host's (the first Debian URI in /etc/apt/sources.list*), or
# $FRESH_DEBIAN_MIRROR; the chroot's apt sources are the host's Debian ones
# (bookworm, -updates, -security), as on an installed machine. Downloaded
# packages are cached in /var/cache/hvdtune-debootstrap between runs. Of
# the host it takes only the network's settings: its resolver, proxy
# variables, and local CA certificates (/usr/local/share/ca-certificates,
# where a TLS proxy sits between this machine and npm's registry).
# Exit status: 0 when both commands succeed, else 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prog=fresh_debian_check.sh
dir=/var/tmp/hvdtune-fresh-debian
logs=""
keep=0
only=""
die() { echo "$prog: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    --logs) logs=${2:?--logs needs a value}; shift 2 ;;
    --keep) keep=1; shift ;;
    --only)
      only=${2:?--only needs test or quickstart}
      [[ $only == test || $only == quickstart ]] || die "--only takes test or quickstart, not '$only'"
      shift 2
      ;;
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $(id -u) == 0 ]] || die "must run as root (debootstrap, mounts, network namespaces)"
[[ $dir == /* && $dir != / ]] || die "--dir must be an absolute path other than /, not '$dir'"
logs=${logs:-$dir.logs}
mkdir -p "$logs"
# Every mount below is made in a private mount namespace of this script's
# own: none propagates to the host's /dev or /run, and all go when it ends.
if [[ ${FRESH_DEBIAN_PRIVATE_NS:-} != "$$" ]]; then
  command -v unshare >/dev/null || die "needs unshare (util-linux)"
  again=(--dir "$dir" --logs "$logs")
  [[ $keep == 1 ]] && again+=(--keep)
  [[ -n $only ]] && again+=(--only "$only")
  exec unshare --mount --propagation private /usr/bin/env FRESH_DEBIAN_PRIVATE_NS=$$ "$0" "${again[@]}"
fi

log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$logs/summary.txt"; }

if ! command -v debootstrap >/dev/null; then
  echo "$prog: installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
fi

# The host's Debian mirror: the first deb822 URIs (or one-line deb) entry
# that serves bookworm itself (not -security).
host_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    if [[ $f == *.sources ]]; then
      awk '/^URIs:/ { u = $2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") { print u; exit } }' "$f"
    else
      awk '$1 == "deb" && $0 ~ / bookworm / { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }' "$f"
    fi
  done | head -n 1
}
mirror=${FRESH_DEBIAN_MIRROR:-$(host_mirror)}
mirror=${mirror:-http://deb.debian.org/debian}

# Everything mounted below $dir, deepest first.
unmount_all() {
  local m
  awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
# Processes left running inside the chroot (a database server, a cluster's
# watchdog): TERM, then KILL.
kill_chroot_procs() {
  local sig p pids
  for sig in TERM KILL; do
    pids=()
    for p in /proc/[0-9]*; do
      [[ $(readlink "$p/root" 2>/dev/null) == "$dir" ]] && pids+=("${p#/proc/}")
    done
    [[ ${#pids[@]} -eq 0 ]] && return 0
    kill -"$sig" "${pids[@]}" 2>/dev/null || true
    sleep 2
  done
}
# Network namespaces of the emulated cluster live in the chroot's /run.
cleanup() {
  kill_chroot_procs
  if [[ -d $dir/run/netns ]]; then
    local ns
    for ns in "$dir"/run/netns/*; do
      if [[ -e $ns ]]; then umount -l "$ns" 2>/dev/null || true; fi
    done
  fi
  unmount_all
  if [[ $keep == 0 && -f $dir/.hvdtune-fresh-debian ]]; then
    rm -rf --one-file-system "$dir"
  fi
}

# A chroot left by an earlier run (marked by us) is removed first.
if [[ -e $dir ]]; then
  [[ -f $dir/.hvdtune-fresh-debian ]] ||
    die "$dir exists and is not a chroot this script made; pick another --dir"
  keep_was=$keep
  keep=0
  cleanup
  keep=$keep_was
fi
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

: >"$logs/summary.txt"
log "repository $(git -C "$root" rev-parse --short HEAD) ($(git -C "$root" log -1 --format=%s | cut -c1-60))"
log "debootstrap --variant=minbase bookworm $dir $mirror"
start=$(date +%s)
mkdir -p "$dir" /var/cache/hvdtune-debootstrap
touch "$dir/.hvdtune-fresh-debian"
debootstrap --variant=minbase --cache-dir=/var/cache/hvdtune-debootstrap bookworm "$dir" "$mirror" \
  >"$logs/debootstrap.log" 2>&1 || { tail -n 20 "$logs/debootstrap.log"; die "debootstrap failed (log: $logs/debootstrap.log)"; }
log "debootstrap took $(($(date +%s) - start)) s"

# The host's Debian apt sources (an installed Debian 12 has -updates and
# -security too) and its resolver.
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
  cp /etc/apt/sources.list.d/debian.sources "$dir/etc/apt/sources.list.d/"
  rm -f "$dir/etc/apt/sources.list"
fi
cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
# Where this network puts a TLS proxy in the way (npm's registry is reached
# over https), its own CA certificates: the ca-certificates package that
# setup.sh installs adds them to the chroot's bundle.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$dir/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/"
fi

# The chroot's root is a mount point (ip netns exec remounts /sys and makes
# / a slave mount: both need / to be one), with the kernel file systems and
# a fresh /dev/shm and /run of its own.
mount --bind "$dir" "$dir"
mount -t proc proc "$dir/proc"
mount -t sysfs sysfs "$dir/sys"
mount --bind /dev "$dir/dev"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$dir/dev/pts"
mount -t tmpfs -o mode=1777 shm "$dir/dev/shm"
mount -t tmpfs -o mode=0755 run "$dir/run"

# A clean clone of this repository's HEAD (nothing untracked, no build).
git clone -q "$root" "$dir/root/hvdtune"
log "cloned $(git -C "$dir/root/hvdtune" rev-parse --short HEAD) into $dir/root/hvdtune"

# Runs $1 in the chroot as a fresh root login would: a clean environment,
# but for the host's network settings (proxies; node's extra CA bundle, the
# file of that name in the chroot).
in_chroot() {
  local net=() v
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY NODE_EXTRA_CA_CERTS; do
    [[ -n ${!v:-} ]] && net+=("$v=${!v}")
  done
  chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${net[@]}" \
    /bin/bash -c "cd /root/hvdtune && $1"
}
status=0
run_step() { # NAME COMMAND
  local t0 rc
  t0=$(date +%s)
  log "$1: $2"
  # In the background, so that a signal to this script is handled at once.
  in_chroot "$2" >"$logs/$1.log" 2>&1 &
  rc=0
  wait $! || rc=$?
  log "$1: exit $rc after $(($(date +%s) - t0)) s (log: $logs/$1.log)"
  ((rc == 0)) || status=1
  return 0
}
if [[ $only != quickstart ]]; then
  run_step test tools/test.sh
  grep -E '^[0-9]+% tests passed|tests failed out of|^\s*[0-9]+ - .*\((Failed|Timeout|Skipped|Not Run)' \
    "$logs/test.log" | tee -a "$logs/summary.txt" || true
fi
if [[ $only != test ]]; then
  run_step quickstart tools/quickstart.sh
  grep -E 'cannot emulate|falling back|^== result|speed-up' "$logs/quickstart.log" |
    tee -a "$logs/summary.txt" || true
fi
log "total $(($(date +%s) - start)) s; $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit "$status"
