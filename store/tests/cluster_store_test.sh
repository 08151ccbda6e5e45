#!/usr/bin/env bash
# The PostgreSQL config store across the emulated cluster (tools/cluster.sh):
# a server in a node of its own, jobs on the other nodes reaching it through
# the shaped links.
#
#   cluster_store_test.sh warm TRAINER       a job on node 1 starts from the
#                                            best a job on node 0 stored:
#                                            source "store", 0 exploration
#                                            samples
#   cluster_store_test.sh partition TRAINER  node 1's link goes down while its
#                                            job writes samples and comes back
#                                            before the job ends: the job
#                                            completes, one warning, every
#                                            sample stored once, none dropped
#
# TRAINER is bench/synthetic_train. Where network namespaces cannot be made
# or no PostgreSQL server can run it says why and exits 77 (CTest's
# SKIP_RETURN_CODE), or fails where they are required
# (tools/tests/require.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../tools/cluster.sh
case_name=${1:-}
trainer=${2:-}
[[ -x $trainer ]] || { echo "usage: $0 warm|partition TRAINER" >&2; exit 2; }
export HVDTUNE_CLUSTER=pgc$$
HVDTUNE_CLUSTER=${HVDTUNE_CLUSTER:0:16}
pg_bin=${HVDTUNE_PG_BIN:-/usr/lib/postgresql/15/bin}
password=s3cret-pw
db_node=2
db_host=10.211.0.$((db_node + 1))

# shellcheck source=../../tools/tests/require.sh
. "$here/../../tools/tests/require.sh"
require_cluster "$cluster"
for tool in initdb postgres pg_ctl psql; do
  if [[ ! -x $pg_bin/$tool && ! -x $(command -v "$tool" 2>/dev/null || echo /none) ]]; then
    no_postgres "PostgreSQL server binaries not found ($pg_bin/$tool; Debian package postgresql-15)"
  fi
done
if ! id postgres >/dev/null 2>&1; then
  no_postgres "no unprivileged 'postgres' account to run the server as"
fi

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

dir=$(mktemp -d /tmp/hvdtune_pgc_XXXXXX)
cleanup() {
  if [[ -f $dir/data/postmaster.pid ]]; then
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$dir/data" stop -m immediate >/dev/null 2>&1 || true
  fi
  "$cluster" down >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

# 3 nodes of 1 rank: jobs on nodes 0 and 1, the server on node 2.
"$cluster" up 3 1 --link 1gbe --owner $$

# The server runs as the postgres account inside node 2's namespace and
# listens on node 2's address only: a job reaches it through the links.
chown postgres "$dir"
echo "$password" >"$dir/pw"
chown postgres "$dir/pw"
runuser -u postgres -- "$pg_bin/initdb" -D "$dir/data" -U postgres \
  --auth-local=trust --auth-host=scram-sha-256 --pwfile="$dir/pw" -N -E UTF8 \
  --locale=C >"$dir/initdb.log" 2>&1 || fail "initdb: $(cat "$dir/initdb.log")"
echo "host all all 10.211.0.0/24 scram-sha-256" >>"$dir/data/pg_hba.conf"
"$cluster" exec --node "$db_node" runuser -u postgres -- "$pg_bin/pg_ctl" \
  -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-p 5432 -k $dir -c listen_addresses=$db_host -c fsync=off" start >/dev/null ||
  fail "the server did not start: $(cat "$dir/server.log")"
sql() { psql -h "$dir" -p 5432 -U postgres -X -At -d "$1" -c "$2"; }
sql postgres "CREATE DATABASE store" >/dev/null
uri="postgresql://postgres:$password@$db_host:5432/store?connect_timeout=2"

# job N VAR=VALUE... -- TRAINER_FLAGS...: a one-rank job on node N; its
# JSON line on stdout, its stderr in $dir/jobN.err.
job() {
  local node=$1 env=()
  shift
  while [[ $1 != -- ]]; do
    env+=("$1")
    shift
  done
  shift
  "$cluster" exec --node "$node" env HOROVOD_AUTOTUNE=1 \
    HOROVOD_AUTOTUNE_WARMUP_SAMPLES=1 HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES=4 \
    "${env[@]}" mpirun --allow-run-as-root --oversubscribe --bind-to none \
    -np 1 --mca btl self,vader "$trainer" --workload many-small --scale 0.25 \
    --json "$@" 2>"$dir/job$node.err"
}
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])["autotune"][sys.argv[1]])' "$1"; }

test_warm() {
  # What is tested is the way through the server, not the confirmation rule
  # (on a loaded machine the confirmation may score far below the stored
  # median): only a drop of more than 99% re-tunes here.
  local env=(HOROVOD_AUTOTUNE_DB="$uri" HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE=2
    HVDTUNE_AUTOTUNE_RETUNE_DROP=0.99)
  local first second
  first=$(job 0 "${env[@]}" -- --until-frozen --max-steps 200 --measure-steps 5) ||
    fail "job on node 0: $(cat "$dir/job0.err")"
  echo "node 0: $(field source <<<"$first"), $(field exploration_samples <<<"$first") exploration samples"
  [[ $(field source <<<"$first") == fresh ]] || fail "the first job did not start fresh"
  second=$(job 1 "${env[@]}" -- --until-frozen --max-steps 200 --measure-steps 5) ||
    fail "job on node 1: $(cat "$dir/job1.err")"
  echo "node 1: $(field source <<<"$second"), $(field exploration_samples <<<"$second") exploration samples"
  [[ $(field source <<<"$second") == store ]] ||
    fail "the job on node 1 did not start from the store: $(cat "$dir/job1.err")"
  [[ $(field exploration_samples <<<"$second") == 0 ]] ||
    fail "the job on node 1 explored"
  [[ $(field fingerprint <<<"$second") == $(field fingerprint <<<"$first") ]] ||
    fail "the two jobs have different fingerprints"
  local runs
  runs=$(sql store "SELECT string_agg(source || ':' || status, ' ' ORDER BY id) FROM runs")
  [[ $runs == "fresh:completed store:completed" ]] || fail "runs stored: $runs"
  if grep -q WARNING "$dir/job0.err" "$dir/job1.err"; then
    fail "a job warned: $(grep -h WARNING "$dir/job0.err" "$dir/job1.err")"
  fi
}

test_partition() {
  # A sample every 5 steps of about 15 ms (frozen samples too), 600 steps:
  # the job writes for about 9 s. A write that gets no acknowledgement for
  # 1 s (tcp_user_timeout) ends the connection, so the partition is noticed
  # while it lasts.
  local log=$dir/samples.csv out
  job 1 HOROVOD_AUTOTUNE_DB="$uri&tcp_user_timeout=1000" \
    HOROVOD_AUTOTUNE_LOG="$log" HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE=5 \
    HVDTUNE_AUTOTUNE_WATCH_SAMPLE_SECONDS=0 -- \
    --flops-per-param 1200 --steps 600 --warmup-steps 1 >"$dir/job1.out" &
  local pid=$!
  # Down once the job's run is stored and it has written some samples.
  local deadline=$((SECONDS + 30))
  until [[ $(sql store "SELECT COUNT(*) FROM samples" 2>/dev/null || echo 0) -ge 10 ]]; do
    ((SECONDS < deadline)) || fail "the job wrote no samples: $(cat "$dir/job1.err")"
    sleep 0.1
  done
  "$cluster" link down --node 1
  sleep 4
  "$cluster" link up --node 1
  wait "$pid" || fail "the job failed: $(cat "$dir/job1.err")"
  cat "$dir/job1.err" | grep -F "[hvdtune rank 0]" || true
  local warnings scored stored distinct
  warnings=$(grep -c WARNING "$dir/job1.err" || true)
  [[ $warnings == 1 ]] || fail "$warnings warnings, not 1"
  grep WARNING "$dir/job1.err" | grep -qF "postgresql://postgres@$db_host:5432/store" ||
    fail "the warning does not name the server"
  if grep -qF "$password" "$dir/job1.err"; then fail "the password was printed"; fi
  grep -q "is back; [0-9]* queued writes follow" "$dir/job1.err" ||
    fail "no word that the server is back"
  if grep -q "writes dropped" "$dir/job1.err"; then
    fail "writes were dropped: $(grep "writes dropped" "$dir/job1.err")"
  fi
  # Every sample the tuner scored (one line each in the autotune log) is
  # stored, once.
  scored=$(($(wc -l <"$log") - 1))
  stored=$(sql store "SELECT COUNT(*) FROM samples")
  distinct=$(sql store "SELECT COUNT(DISTINCT idx) FROM samples")
  echo "scored $scored samples, stored $stored ($distinct distinct)"
  ((scored > 30)) || fail "only $scored samples: the job was too short to be partitioned"
  [[ $stored == "$scored" && $distinct == "$scored" ]] ||
    fail "scored $scored samples, stored $stored ($distinct distinct)"
  [[ $(sql store "SELECT status FROM runs") == completed ]] || fail "the run is not completed"
}

case $case_name in
  warm) test_warm ;;
  partition) test_partition ;;
  *) echo "usage: $0 warm|partition TRAINER" >&2; exit 2 ;;
esac
echo "PASS: $case_name"
