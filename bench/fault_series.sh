#!/usr/bin/env bash
# Fault series on the emulated cluster (docs/cluster.md, "Faults"): runs
# synthetic_train (resnet50 x0.1, autotuning into a fresh SQLite store,
# metrics on) on 2 x 2 ranks over 1gbe links, injects one fault per run
# into node 1, and reports per run and per fault how the job ended, how
# long after the fault, whether anything hung, and whether the store is
# intact and holds every write the metrics counted as committed.
#
#   bench/fault_series.sh [--runs N] [--faults down,flap,kill] [--flap-seconds S]
#                         [--at SECONDS] [--steps N] [--limit S] [--port P]
#                         [--train PATH] [--out DIR]
#
# Faults (all on node 1, --at seconds after mpirun started; default 8,
# about 40 of 150 steps in):
#   down   its link goes down and stays down
#   flap   its link goes down for --flap-seconds (default 2), then up
#   kill   SIGKILL of one of its ranks
# Bounds: after down or kill, every rank and mpirun end within --limit
# (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, default 5; 0: the runtime never
# ends a stalled job itself) + 15 s and every process of the job within
# 60 s; after a flap, the job ends within 120 s. A run past its bound is a
# hang (its processes are then killed).
#
# Per run: how it ended (exit 0, which every step's exact result needs, or
# the first ERROR / Open MPI message), seconds from the fault to the end of
# every rank and mpirun and of every process of the job, the store's
# PRAGMA integrity_check, rank 0's last scraped
# hvdtune_store_writes_total{result="written"} against the rows the store
# holds (a committed write missing from it counts as lost), and the largest
# hvdtune_backend_wait_seconds scraped (n/a where the runtime has none).
# Rank 0's metrics are scraped every 0.5 s on HOROVOD_METRICS_PORT (--port)
# inside node 0. At the end: a Markdown table per fault.
#
# Needs root (network namespaces; tools/cluster.sh check says why not) and
# a built synthetic_train (default: $HVDTUNE_BUILD_DIR or build/, under
# bench/). Cluster id: $HVDTUNE_CLUSTER (default "faults"). Per-run logs,
# stores and scrapes stay in --out (default a new /tmp/fault_series.*).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cluster=$root/tools/cluster.sh
prog=fault_series.sh

runs=10 faults=down,flap,kill flap_seconds=2 at=8 steps=150 limit=5 port=9400
train=${HVDTUNE_BUILD_DIR:-$root/build}/bench/synthetic_train
out=""
die() { echo "$prog: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=${2:?}; shift 2 ;;
    --faults) faults=${2:?}; shift 2 ;;
    --flap-seconds) flap_seconds=${2:?}; shift 2 ;;
    --at) at=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --limit) limit=${2:?}; shift 2 ;;
    --port) port=${2:?}; shift 2 ;;
    --train) train=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer, not '$runs'"
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer, not '$steps'"
[[ $port =~ ^[1-9][0-9]*$ ]] || die "--port must be a port number, not '$port'"
[[ $limit =~ ^[0-9]+$ ]] || die "--limit must be a whole number of seconds, not '$limit'"
[[ $at =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--at must be a number of seconds, not '$at'"
[[ $flap_seconds =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--flap-seconds must be a number of seconds, not '$flap_seconds'"
IFS=, read -r -a fault_list <<<"$faults"
for f in "${fault_list[@]}"; do
  [[ $f == down || $f == flap || $f == kill ]] || die "unknown fault '$f' (known: down, flap, kill)"
done
[[ -x $train ]] || die "no synthetic_train at $train (build it, or --train PATH)"
if ! why=$("$cluster" check); then
  echo "$prog: $why" >&2
  exit 3
fi
export HVDTUNE_CLUSTER=${HVDTUNE_CLUSTER:-faults}
id=$HVDTUNE_CLUSTER
[[ -n $out ]] || out=$(mktemp -d /tmp/fault_series.XXXXXX)
mkdir -p "$out"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
alive() { # the given process ids still running
  local p o=""
  for p in "$@"; do kill -0 "$p" 2>/dev/null && o+=" $p"; done
  echo "${o# }"
}
# Process ids inside node N's namespace whose name is (or, with !, is not) $2.
node_pids() {
  local p c
  for p in $(ip netns pids "hvdtune-$id-node$1" 2>/dev/null); do
    c=$(cat "/proc/$p/comm" 2>/dev/null) || continue
    if [[ $2 == !* ]]; then [[ $c != "${2#!}" ]] && echo "$p"; else [[ $c == "$2" ]] && echo "$p"; fi
  done
  return 0
}

# Rank 0's metrics every 0.5 s while process $3 lives (rank 0 serves
# inside node 0's namespace on 127.0.0.1): keeps the last scrape and the
# largest value of the stall gauge seen.
scraper='
import os, sys, time, urllib.request
port, out, job = sys.argv[1], sys.argv[2], int(sys.argv[3])
gauge, most = "hvdtune_backend_wait_seconds", None
def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
while alive(job):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=1) as r:
            body = r.read().decode()
    except Exception:
        body = ""
    if body:
        with open(out + "/scrape.tmp", "w") as f:
            f.write(body)
        os.replace(out + "/scrape.tmp", out + "/last.prom")
        for line in body.splitlines():
            if line.startswith(gauge + "{") or line.startswith(gauge + " "):
                v = float(line.split()[-1])
                if most is None or v > most:
                    most = v
                    with open(out + "/max_wait", "w") as f:
                        f.write("%g\n" % v)
    time.sleep(0.5)
'
# The store's PRAGMA integrity_check, then its committed writes as rows:
# the run (begun), its end (runs.ended), every sample, the best
# configuration (one row, updated in place).
store_check='
import os, sqlite3, sys
if not os.path.exists(sys.argv[1]):
    print("missing")
    print(0)
    sys.exit()
try:
    c = sqlite3.connect(sys.argv[1])
    print(c.execute("PRAGMA integrity_check").fetchone()[0])
    print(c.execute("SELECT (SELECT count(*) FROM runs)"
                    " + (SELECT count(*) FROM runs WHERE ended IS NOT NULL)"
                    " + (SELECT count(*) FROM samples)"
                    " + (SELECT count(*) FROM best)").fetchone()[0])
except sqlite3.Error as e:
    print(str(e).replace(" ", "_"))
    print(0)
'

tsv=$out/runs.tsv
printf 'fault\trun\toutcome\tend_s\tall_s\thang\tintegrity\twritten\trows\tlost\tmax_wait_s\tnamed\tmessage\n' >"$tsv"

run_one() {
  local fault=$1 i=$2 dir=$out/$1-$2
  mkdir -p "$dir"
  local db=$dir/store.sqlite log=$dir/job.log
  "$cluster" up 2 2 --link 1gbe 2>/dev/null
  HOROVOD_AUTOTUNE=1 HOROVOD_AUTOTUNE_DB=$db HVDTUNE_AUTOTUNE_STORE=auto \
    HOROVOD_METRICS_PORT=$port HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=$limit \
    "$cluster" run "$train" --workload resnet50 --scale 0.1 --steps "$steps" >"$log" 2>&1 &
  local job=$!
  ip netns exec "hvdtune-$id-node0" /usr/bin/python3 -c "$scraper" "$port" "$dir" "$job" &
  local scraper=$!
  sleep "$at"
  local note=""
  grep -q "samples/s" "$log" || note="(fault before training) "
  # A job that ended before the fault tells nothing about the fault: a
  # failed run, never counted as one that ended because of it.
  kill -0 "$job" 2>/dev/null || note+="FAILED: the job ended before the fault; "
  local ranks others
  ranks=$( (node_pids 0 synthetic_train; node_pids 1 synthetic_train) | tr '\n' ' ')
  others=$( (node_pids 0 '!synthetic_train'; node_pids 1 '!synthetic_train') | tr '\n' ' ')
  local job_bound=$((limit + 15)) all_bound=60 tf flapper=""
  tf=$(now)
  case $fault in
    down) "$cluster" link down --node 1 ;;
    flap)
      "$cluster" link down --node 1
      (sleep "$flap_seconds"; "$cluster" link up --node 1) &
      flapper=$!
      job_bound=120 all_bound=120
      ;;
    kill)
      local victim
      victim=$(node_pids 1 synthetic_train)
      victim=${victim%%$'\n'*}
      [[ -n $victim ]] || note+="FAILED: no rank on node 1 to kill; "
      [[ -n $victim ]] && kill -KILL "$victim"
      ;;
  esac
  # Every rank and mpirun (cluster.sh run waits for it), then the rest.
  local end_s="" all_s="" hang="" t
  # shellcheck disable=SC2086
  while :; do
    t=$(elapsed "$tf" "$(now)")
    if [[ -z $end_s && -z $(alive $ranks $job) ]]; then end_s=$t; fi
    if [[ -n $end_s && -z $(alive $others) ]]; then all_s=$t; break; fi
    if [[ -z $end_s ]] && awk -v t="$t" -v b="$job_bound" 'BEGIN { exit !(t > b) }'; then
      hang="ranks/mpirun"; break
    fi
    if awk -v t="$t" -v b="$all_bound" 'BEGIN { exit !(t > b) }'; then
      hang="daemons"; break
    fi
    sleep 0.1
  done
  [[ -n $flapper ]] && wait "$flapper"
  [[ $fault == down ]] && "$cluster" link up --node 1
  if [[ -n $hang ]]; then
    echo "$prog: $fault run $i: $hang still running past the bound; killing the job" >&2
    kill -TERM "$job" 2>/dev/null || true
    "$cluster" down
  fi
  local rc=0
  wait "$job" || rc=$?
  kill "$scraper" 2>/dev/null || true
  wait "$scraper" 2>/dev/null || true
  "$cluster" down
  local left
  left=$(ip netns list | awk '{ print $1 }' | grep -F -- "hvdtune-$id-" || true)
  [[ -z $left ]] || echo "$prog: left behind: $left" >&2

  # Why it ended: a rank's ERROR, else what mpirun said.
  local msg="" outcome
  if [[ -n $hang ]]; then
    outcome="hang, killed"
  elif ((rc == 0)); then
    outcome="finished exit 0"
  else
    outcome="ended exit $rc"
    msg=$(grep -m1 -E "ERROR|negotiation failed|: error on rank" "$log" ||
      grep -m1 -E "noticed that process|lost communication|exited on signal" "$log" || true)
    msg=$(sed -E 's/[[:space:]]+/ /g; s/^ //' <<<"$msg" | cut -c1-160)
  fi
  # The ranks the watchdog named as not answering.
  local named
  named=$(grep -m1 -oE "no answer within [0-9.]+ s from ranks? [0-9, ]+( \([^)]*\))?" "$log" |
    sed 's/.* from //' || true)
  # The store: intact, and every write counted as committed is there.
  local integrity written rows lost max_wait
  { read -r integrity; read -r rows; } < <(/usr/bin/python3 -c "$store_check" "$db")
  written=$(awk '/^hvdtune_store_writes_total[{].*result="written"/ { print $NF }' "$dir/last.prom" 2>/dev/null | head -1)
  written=${written:-0}
  lost=$(awk -v w="$written" -v r="$rows" 'BEGIN { printf "%d", (w > r ? w - r : 0) }')
  max_wait=$(cat "$dir/max_wait" 2>/dev/null || echo n/a)
  printf '%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$fault" "$i" "$note$outcome" \
    "${end_s:-n/a}" "${all_s:-n/a}" "${hang:-no}" "$integrity" "$written" "$rows" "$lost" \
    "$max_wait" "${named:--}" "$msg" >>"$tsv"
  printf '%-4s %2d  %-16s end %5ss all %5ss hang %-3s store %s written %s rows %s lost %s  max wait %s  named %s  %s\n' \
    "$fault" "$i" "$note$outcome" "${end_s:-n/a}" "${all_s:-n/a}" "${hang:-no}" "$integrity" \
    "$written" "$rows" "$lost" "$max_wait" "${named:--}" "$msg"
}

echo "fault series: $runs runs each of ${faults//,/, } (flap ${flap_seconds} s), fault at ${at} s, $steps steps, stall limit $limit s; logs in $out"
for f in "${fault_list[@]}"; do
  for ((i = 1; i <= runs; i++)); do run_one "$f" "$i"; done
done

echo
echo "| fault | runs | ended / finished (exit 0) | s from fault to the end of ranks and mpirun, min / median / max | every process ended, s (max) | hangs | store intact | runs with committed rows lost | max stall gauge seen (s) | errors naming the ranks | failed (no fault injected) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for f in "${fault_list[@]}"; do
  awk -F'\t' -v f="$f" -v fs="$flap_seconds" '
    NR > 1 && $1 == f {
      n++
      if ($3 ~ /FAILED/) { failed++; next }
      if ($3 ~ /finished exit 0/) fin++; else if ($6 == "no") ended++
      if ($6 != "no") hangs++
      if ($7 == "ok") ok++
      if ($10 > 0) lost++
      if ($4 != "n/a") s[++m] = $4 + 0
      if ($11 != "n/a" && ($11 + 0 > w || w == "")) w = $11 + 0
      if ($12 != "-") named++
      if ($5 != "n/a" && ($5 + 0 > all || all == "")) all = $5 + 0
    }
    END {
      if (!n) exit
      for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (s[b] < s[a]) { t = s[a]; s[a] = s[b]; s[b] = t }
      med = m ? (m % 2 ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2) : "n/a"
      name = f == "flap" ? "flap " fs " s" : f
      printf "| %s | %d | %d / %d | %s / %s / %s | %s | %d | %d of %d | %d | %s | %d | %d |\n", name, n, ended, fin,
        m ? sprintf("%.1f", s[1]) : "n/a", m ? sprintf("%.1f", med) : "n/a",
        m ? sprintf("%.1f", s[m]) : "n/a", all == "" ? "n/a" : sprintf("%.1f", all),
        hangs, ok, n - failed, lost, w == "" ? "n/a" : sprintf("%.2f", w), named, failed
    }' "$tsv"
done
echo
echo "per run: $tsv"
