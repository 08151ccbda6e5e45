#!/usr/bin/python3
"""Does the autotuner re-tune when the cluster changes, and only then?

Three series of autotuned synthetic_train runs (HOROVOD_AUTOTUNE=1), each
run's samples read from its autotune log (HOROVOD_AUTOTUNE_LOG) as they are
written:

  steady  nothing changes: --runs runs of --steps steps, on one node
          (tools/mpirun.sh, --where node) or the emulated cluster
          (tools/cluster.sh, --where cluster). Counts the re-tunes (a
          frozen sample followed by a re-tuning one); the goal is none.
  drift   on the cluster: once tuning froze and --frozen-before frozen
          samples are in (the detector's reference), the links change
          (--change FROM:TO, e.g. 10gbe:1gbe; FROM:TO@N changes node N's link
          alone). Counts the samples from the change to the re-tune: the
          first of them straddles the change. With --refreeze the run goes on
          until tuning froze again and prints the configuration it froze on;
          with --grid-rounds those configurations are then re-measured side
          by side with the new link's grid best.
  warm    one run fills a fresh config store, then --runs runs start from
          it; counts each later run's exploration samples (the goal is none).
  conditions  on the cluster, one run fills a fresh store across a link
          change (--change FROM:TO once tuning froze; stopped once it froze
          again), then --runs runs of --steps steps start from it on FROM
          and TO in turn: which stored condition each confirmed, and its
          exploration samples (the goal is none).

  bench/drift_series.py steady --where node --runs 10 --steps 1000 \\
      --workload many-small
  bench/drift_series.py drift --change 10gbe:1gbe --runs 10 \\
      --workload resnet50 --scale 0.1

Needs root for the cluster (network namespaces); says why and exits 3
elsewhere. Prints one line per run, then a summary. A run that crashed
(non-zero exit, a job that ended by itself during a drift run, no autotune
sample logged, or a steady run that never froze) is reported as FAILED,
left out of the counts, named in the summary, and makes the exit status 1.
"""
import argparse
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "tools", "cluster.sh")
MPIRUN = os.path.join(ROOT, "tools", "mpirun.sh")


def read_log(path):
    """The autotune log's rows so far (a partly written last line dropped)."""
    try:
        with open(path, newline="") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    return list(csv.DictReader(text.splitlines()))


def run_failure(rc, rows, need_frozen=False):
    """Why a finished run counts as FAILED, or None when it ran: a non-zero
    exit (a crash, an abort), an autotune log with no sample (the job never
    got to tune), or, with need_frozen, no frozen sample (nothing to count
    re-tunes against). A failed run is never counted as one with 0 re-tunes
    or 0 exploration samples."""
    if rc is None:
        return "did not finish"
    if rc != 0:
        return "exit %d" % rc
    if not rows:
        return "no autotune samples logged"
    if need_frozen and not any(r["phase"] == "frozen" for r in rows):
        return "never froze (%d samples)" % len(rows)
    return None


def failed_note(failures):
    """The summary's words for the failed runs ("" when none)."""
    if not failures:
        return ""
    return "; %d run%s FAILED (%s), not counted" % (
        len(failures), "" if len(failures) == 1 else "s",
        ", ".join("run %d: %s" % f for f in failures))


def retunes(rows):
    """Indexes of the rows that start a re-tune (frozen, then re-tuning)."""
    return [i for i in range(1, len(rows))
            if rows[i]["phase"] == "retuning" and rows[i - 1]["phase"] == "frozen"]


class Cluster:
    def __init__(self, cid):
        self.cid = cid

    def __call__(self, *args, check=True):
        res = subprocess.run([CLUSTER, "--id", self.cid] + list(args),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
        if check and res.returncode != 0:
            raise RuntimeError("cluster.sh %s: %s" % (" ".join(args), res.stderr.strip()))


def job_env(args, log, extra=None):
    env = dict(os.environ)
    env.update({"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": log,
                "HVDTUNE_AUTOTUNE_STORE": "off"})
    if args.budget:
        env["HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"] = str(args.budget)
    env.update(extra or {})
    return env


def launch(args, where, cid, steps, env, out):
    train = [os.path.join(args.build, "bench/synthetic_train"),
             "--workload", args.workload, "--scale", str(args.scale),
             "--steps", str(steps), "--window-steps", "1000000"]
    if where == "node":
        cmd = [MPIRUN, "-np", str(args.ranks)] + train
    else:
        cmd = [CLUSTER, "--id", cid, "run"] + train
    return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def steady(args, cluster, work):
    total = 0
    runs_with = 0
    failures = []
    for run in range(args.runs):
        log = os.path.join(work, "steady%d.csv" % run)
        with open(os.path.join(work, "steady%d.out" % run), "w") as out:
            t0 = time.time()
            proc = launch(args, args.where, cluster.cid if cluster else None,
                          args.steps, job_env(args, log), out)
            rc = proc.wait()
        rows = read_log(log)
        why = run_failure(rc, rows, need_frozen=True)
        if why:
            failures.append((run + 1, why))
            print("run %d: FAILED (%s), %.0f s, %d samples; its output: %s" % (
                run + 1, why, time.time() - t0, len(rows), out.name), flush=True)
            continue
        r = retunes(rows)
        total += len(r)
        runs_with += bool(r)
        frozen_at = next((i for i, row in enumerate(rows) if row["phase"] == "frozen"), None)
        frozen = sum(row["phase"] == "frozen" for row in rows)
        print("run %d: exit %d, %.0f s, %d samples, froze at sample %s, %d frozen "
              "samples, re-tunes %d%s" % (
                  run + 1, rc, time.time() - t0, len(rows),
                  "-" if frozen_at is None else frozen_at + 1, frozen, len(r),
                  "" if not r else " (at samples %s)" % ", ".join(str(i + 1) for i in r)),
              flush=True)
    print("steady, %s, %s x%s, %d runs of %d steps: %d re-tunes, in %d of %d "
          "completed runs%s" % (args.where, args.workload, args.scale, args.runs,
                                args.steps, total, runs_with,
                                args.runs - len(failures), failed_note(failures)))
    return failures


def parse_change(text):
    link, _, node = text.partition("@")
    old, _, new = link.partition(":")
    if not old or not new:
        raise SystemExit("--change FROM:TO[@NODE], e.g. 10gbe:1gbe or 10gbe:1gbe@1")
    return old, new, node


def drift(args, cluster, work):
    old, new, node = parse_change(args.change)
    where = ["--node", node] if node else []
    detected = []
    refrozen_configs = []
    failures = []
    for run in range(args.runs):
        cluster("set", "--link", old)
        log = os.path.join(work, "drift%d.csv" % run)
        out = open(os.path.join(work, "drift%d.out" % run), "w")
        proc = launch(args, "cluster", cluster.cid, 1000000, job_env(args, log), out)
        t0 = time.time()
        changed_at = None  # rows in the log when the link changed
        result = "not detected"
        after = None
        refrozen = None
        try:
            while proc.poll() is None and time.time() - t0 < args.timeout:
                time.sleep(0.2)
                rows = read_log(log)
                if changed_at is None:
                    if sum(r["phase"] == "frozen" for r in rows) >= args.frozen_before:
                        cluster("set", "--link", new, *where)
                        changed_at = len(rows)
                    elif any(r["phase"] == "retuning" for r in rows):
                        result = "re-tuned before the change"
                        break
                    continue
                r = [i for i in retunes(rows) if i >= changed_at]
                if r and after is None:
                    # Samples that began after the change, up to the one
                    # that fired (row r[0] - 1); row changed_at straddles.
                    after = r[0] - changed_at - 1
                    result = "detected"
                    if not args.refreeze:
                        break
                if after is not None:
                    later = rows[r[0]:]
                    f = [x for x in later if x["phase"] == "frozen"]
                    if f:
                        refrozen = f[0]
                        break
                elif len(rows) - changed_at > args.max_after:
                    break
        finally:
            # A job that ended by itself (we stop it otherwise) crashed.
            ended = proc.poll()
            stop(proc)
            out.close()
        if ended is not None and result != "detected":
            why = run_failure(ended, read_log(log)) or "exit %d" % ended
            failures.append((run + 1, why))
            print("run %d: FAILED (%s) before %s; its output: %s" % (
                run + 1, why, "the change" if changed_at is None else
                "a re-tune", out.name), flush=True)
            continue
        if result == "detected":
            detected.append(after)
        line = "run %d: %s" % (run + 1, result)
        if changed_at is not None:
            line += " (link %s -> %s%s after sample %d" % (
                old, new, " on node " + node if node else "", changed_at)
            line += ")" if after is None else (
                "; re-tune after %d samples that began after the change, "
                "and the one in progress at it)" % after)
        if refrozen:
            knobs = ("allreduce_algorithm", "fusion_threshold", "cycle_time")
            line += "; froze again on %s" % ", ".join(
                "%s=%s" % (k, refrozen.get(k)) for k in knobs if k in refrozen)
            refrozen_configs.append(refrozen)
        print(line, flush=True)
    n = len(detected)
    within = sum(a <= 3 for a in detected)
    print("drift %s: detected in %d of %d completed runs, within 3 samples in "
          "%d; samples that began after the change until the re-tune %s "
          "(median %s)%s" % (
              args.change, n, args.runs - len(failures), within, sorted(detected),
              statistics.median(detected) if detected else "-",
              failed_note(failures)))
    if args.grid_rounds and refrozen_configs:
        if node:
            print("# against the grid best: only for a change of every link")
        else:
            cluster("down", check=False)
            against_grid(args, new, refrozen_configs)
    return failures


def against_grid(args, preset, refrozen_rows):
    """The configurations tuning froze on again, against the grid best of
    the new condition, re-measured side by side in interleaved rounds."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cluster_sweep as cs
    table = cs.knob_table(args.build)
    configs = {}
    for row in refrozen_rows:
        knobs = {}
        for name in table:
            if name not in row:
                continue
            value = row[name]
            if table[name]["type"] == "bool":
                value = value == "true"
            elif table[name]["type"] in ("integer", "float"):
                value = float(value)
            knobs[name] = value
        env = cs.env_of(knobs, table)
        configs.setdefault(tuple(sorted(env.items())), []).append(len(configs))
    cid = ("grid%d" % os.getpid())[:16]
    cs.cluster(cid, "up", "2", "2", "--link", preset, "--owner", str(os.getpid()),
               capture=False)
    try:
        sweep_cmd = [os.path.join(args.build, "tools/hvd_tune/hvd-tune"), "sweep",
                     "--strategy", "grid", "--workload", args.workload,
                     "--scale", str(args.scale), "--no-store", "--json"]
        for g in cs.GRID:
            sweep_cmd += ["--grid", g]
        best = json.loads(cs.cluster(cid, "run", *sweep_cmd))["best"]["knobs"]
        runs = {"grid best": cs.env_of(best, table)}
        names = ["grid best"]
        for i, (key, members) in enumerate(configs.items()):
            name = "refrozen %d (%d run%s)" % (i + 1, len(members),
                                               "s" if len(members) > 1 else "")
            runs[name] = dict(key)
            names.append(name)
        got = {n: [] for n in names}
        for r in range(args.grid_rounds):
            for n in names if r % 2 == 0 else list(reversed(names)):
                got[n].append(cs.train(cid, args.build, args.workload, args.scale,
                                       runs[n], args.grid_steps))
        med = {n: statistics.median(v) for n, v in got.items()}
        print("grid best at %s: %s, %.1f samples/s (median of %d rounds)" % (
            preset, " ".join("%s=%s" % kv for kv in sorted(best.items())),
            med["grid best"], args.grid_rounds))
        weighted = []
        for n in names[1:]:
            share = med[n] / med["grid best"]
            weighted += [share] * int(n.split("(")[1].split()[0])
            print("%s: %s, %.1f samples/s, %.0f%% of the grid best" % (
                n, " ".join("%s=%s" % kv for kv in runs[n].items()), med[n],
                100 * share))
        print("refrozen at %s: %d of %d runs at >= 90%% of the grid best "
              "(median %.0f%%)" % (preset, sum(w >= 0.9 for w in weighted),
                                   len(weighted), 100 * statistics.median(weighted)))
    finally:
        cs.cluster(cid, "down", capture=False)


def warm(args, cluster, work):
    db = args.db or os.path.join(work, "store.db")
    extra = {"HOROVOD_AUTOTUNE_DB": db, "HVDTUNE_AUTOTUNE_STORE": "auto"}
    explored = []
    failures = []
    for run in range(args.runs + 1):
        log = os.path.join(work, "warm%d.csv" % run)
        with open(os.path.join(work, "warm%d.out" % run), "w") as out:
            steps = args.first_steps if run == 0 and args.first_steps \
                else args.steps
            proc = launch(args, args.where, cluster.cid if cluster else None,
                          steps, job_env(args, log, extra), out)
            rc = proc.wait()
        rows = read_log(log)
        what = "fills the store" if run == 0 else "from the store"
        why = run_failure(rc, rows, need_frozen=run == 0)
        if why:
            failures.append((run, why))
            print("run %d (%s): FAILED (%s); its output: %s" % (
                run, what, why, out.name), flush=True)
            continue
        n = sum(r["phase"] == "exploring" for r in rows)
        r = retunes(rows)
        print("run %d (%s): exit %d, %d samples, %d exploring, re-tunes %d"
              % (run, what, rc, len(rows), n, len(r)), flush=True)
        if run > 0:
            explored.append(n)
    print("warm start, %s: exploration samples of the %d completed runs from the "
          "store: %s; %d of %d explored none%s" % (
              args.where, len(explored), explored, explored.count(0), args.runs,
              failed_note(failures)))
    return failures


def conditions(args, cluster, work):
    """One run fills a store across a link change (FROM, then TO once it
    froze; it is stopped once it froze again), then runs from the store
    alternate the links; each says which stored condition it confirmed."""
    old, new, node = parse_change(args.change)
    if node:
        raise SystemExit("conditions: --change FROM:TO of every link")
    db = os.path.join(work, "store.db")
    extra = {"HOROVOD_AUTOTUNE_DB": db, "HVDTUNE_AUTOTUNE_STORE": "auto"}
    cluster("set", "--link", old)
    log = os.path.join(work, "fill.csv")
    with open(os.path.join(work, "fill.out"), "w") as out:
        proc = launch(args, "cluster", cluster.cid, 1000000,
                      job_env(args, log, extra), out)
        t0 = time.time()
        changed_at = None
        try:
            while proc.poll() is None and time.time() - t0 < args.timeout:
                time.sleep(0.2)
                rows = read_log(log)
                frozen = [i for i, r in enumerate(rows) if r["phase"] == "frozen"]
                if changed_at is None:
                    if len(frozen) >= args.frozen_before:
                        cluster("set", "--link", new)
                        changed_at = len(rows)
                    continue
                r = [i for i in retunes(rows) if i >= changed_at]
                if r and sum(i > r[0] for i in frozen) >= args.frozen_before:
                    time.sleep(1)  # the store's writer catches up
                    break
        finally:
            stop(proc)
    rows = read_log(log)
    froze = [r for r in rows if r["phase"] == "frozen"]
    print("fill: %s, then %s: froze on %s, then on %s (%d samples)" % (
        old, new, froze[0]["allreduce_algorithm"] if froze else "-",
        froze[-1]["allreduce_algorithm"] if froze else "-", len(rows)), flush=True)
    explored = []
    failures = []
    if not froze:
        failures.append((0, "the run that fills the store never froze"))
    for run in range(args.runs):
        link = (old, new)[run % 2]
        cluster("set", "--link", link)
        log = os.path.join(work, "run%d.csv" % run)
        name = os.path.join(work, "run%d.out" % run)
        with open(name, "w") as out:
            rc = launch(args, "cluster", cluster.cid, args.steps,
                        job_env(args, log, extra), out).wait()
        rows = read_log(log)
        why = run_failure(rc, rows)
        if why:
            failures.append((run + 1, why))
            print("run %d at %s: FAILED (%s); its output: %s" % (
                run + 1, link, why, name), flush=True)
            continue
        n = sum(r["phase"] == "exploring" for r in rows)
        explored.append(n)
        with open(name) as f:
            said = [l.split("autotune: ", 1)[1].split(" (")[0] for l in f
                    if "confirmed the stored best" in l]
        froze = [r for r in rows if r["phase"] == "frozen"]
        print("run %d at %s: exit %d, %d exploring samples, %s, froze on %s" % (
            run + 1, link, rc, n, said[0] if said else "no stored best confirmed",
            froze[0]["allreduce_algorithm"] if froze else "-"), flush=True)
    print("conditions %s: exploration samples of the %d completed runs from "
          "the store: %s; %d of %d explored none%s" % (
              args.change, len(explored), explored, explored.count(0), args.runs,
              failed_note(failures)))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("series", choices=("steady", "drift", "warm", "conditions"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--where", choices=("node", "cluster"), default="cluster",
                    help="steady and warm: one node or the emulated cluster")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--steps", type=int, default=1000,
                    help="steady and warm: steps per run")
    ap.add_argument("--workload", default="resnet50")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--ranks", type=int, default=4, help="--where node: ranks")
    ap.add_argument("--link", default="1gbe", help="steady and warm on the cluster: preset")
    ap.add_argument("--change", default="10gbe:1gbe",
                    help="drift: FROM:TO links, @N for node N alone")
    ap.add_argument("--frozen-before", type=int, default=7,
                    help="drift: frozen samples before the change")
    ap.add_argument("--max-after", type=int, default=15,
                    help="drift: samples after the change to wait for a re-tune")
    ap.add_argument("--refreeze", action="store_true",
                    help="drift: go on until tuning froze again")
    ap.add_argument("--grid-rounds", type=int, default=0,
                    help="drift with --refreeze and every link changed: re-measure "
                         "the configurations frozen on again against the new "
                         "link's grid best (bench/cluster_sweep.py's grid), this "
                         "many interleaved rounds")
    ap.add_argument("--grid-steps", type=int, default=30,
                    help="--grid-rounds: measured steps per run")
    ap.add_argument("--budget", type=int, default=0,
                    help="HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES (0: the default)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run")
    ap.add_argument("--first-steps", type=int, default=0,
                    help="warm: steps of the run that fills the store "
                    "(default: --steps)")
    ap.add_argument("--db", help="warm: the store (a file or a postgresql:// "
                    "URL of an empty database; default: a new SQLite file)")
    ap.add_argument("--keep", help="directory for the logs (default: a temporary one)")
    args = ap.parse_args()

    on_cluster = args.series in ("drift", "conditions") or args.where == "cluster"
    cluster = None
    if on_cluster:
        why = subprocess.run([CLUSTER, "check"], capture_output=True, text=True)
        if why.returncode != 0:
            print(why.stdout.strip() or why.stderr.strip(), file=sys.stderr)
            return 3
        cluster = Cluster(("drift%d" % os.getpid())[:16])
        first = (parse_change(args.change)[0] if args.series in ("drift", "conditions")
                 else args.link)
        cluster("up", "2", "2", "--link", first, "--owner", str(os.getpid()))
    work = args.keep or tempfile.mkdtemp(prefix="hvdtune_drift_")
    os.makedirs(work, exist_ok=True)
    print("# %s series; logs in %s" % (args.series, work), flush=True)
    try:
        failures = {"steady": steady, "drift": drift, "warm": warm,
                    "conditions": conditions}[args.series](args, cluster, work)
    finally:
        if cluster:
            cluster("down", check=False)
    # A series with a failed run is not a result: say so in the exit status.
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
