"""Elastic training on the emulated cluster (docs/elastic.md): RUNS runs of
python/tests/elastic_train.py on 3 nodes x 2 ranks started by
`hvd-tune run --host-discovery-script` from node0 through the cluster's rsh
agent. In each run, at step 20, node2 fails in one of two ways:

  kill  every rank of node2 is killed (SIGKILL): the survivors' connections
        close at once;
  cut   node2's link is cut (`tools/cluster.sh link down --node 2`): no
        connection closes, node2's ranks live on behind the cut. The
        survivors' collectives fail at HOROVOD_GLOO_TIMEOUT_SECONDS, the
        launcher finds node2's heartbeats silent past
        HVDTUNE_ELASTIC_HEARTBEAT_SECONDS, blacklists it and stops its
        ranks; the link comes back --cut-seconds after the cut.

The 4 survivors continue; node2 comes back after its blacklist cooldown and
the job ends on 6 ranks again.

A run passes when the job exits 0 on 6 ranks with identical parameters,
after a 4-rank world, every rank of every world having found the
parameters identical at the world's first step (WORLD_CHECK), no reset
having lost more steps than the ranks had run since their last commit, and
(cut) none of node2's old ranks alive when its new ranks joined. Prints per
run the seconds from the failure to the first step of the 4-rank world,
from node2's return (its cooldown's end) to the first step of the 6-rank
world, the steps each reset lost, and (cut) when the launcher declared
node2 unreachable; then medians and maxima.

Needs a cluster of 3 x 2 up under HVDTUNE_CLUSTER (tools/cluster.sh up 3 2
--link 1gbe), run from the repository root:

    python3 bench/elastic_cluster.py --runs 10 --scenario kill|cut \
        [--build build]
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "tools/cluster.sh")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (the launcher has not reaped it yet) is dead too.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def lost_steps(out):
    """Per reset (world with RESET lines): (world, lost, since_commit, ok).
    lost: the most steps a survivor had finished minus the step the world
    resumed from; since_commit: that minus the latest commit of a survivor;
    ok: 0 <= lost <= steps since the oldest of the survivors' last commits
    (rank 0's commit is what the world resumes from)."""
    resets = {}
    for w, last, commit, _ in re.findall(
            r"RESET t=[0-9.]+ size=\d+ world=(\d+) last_step=(\d+) "
            r"last_commit=(\d+) restored=(\d+)", out):
        resets.setdefault(int(w), []).append((int(last), int(commit)))
    starts = {}
    for w, s in re.findall(r"FIRST_STEP t=[0-9.]+ size=\d+ world=(\d+) "
                           r"from_step=(\d+)", out):
        starts.setdefault(int(w), set()).add(int(s))
    rows = []
    for w in sorted(resets):
        last = max(x for x, _ in resets[w])
        oldest = min(c for _, c in resets[w])
        newest = max(c for _, c in resets[w])
        froms = starts.get(w, set())
        if len(froms) != 1:
            rows.append((w, None, last - newest, False))
            continue
        lost = last - froms.pop()
        rows.append((w, lost, last - newest, 0 <= lost <= last - oldest))
    return rows


def one_run(args, work, i):
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("node0:2\nnode1:2\nnode2:2\n")
    log = os.path.join(work, "run%d.log" % i)
    cli = os.path.join(args.build, "tools/hvd_tune/hvd-tune")
    env = dict(os.environ, HVDTUNE_RSH_AGENT=os.path.join(
        ROOT, "tools/cluster_rsh.sh"), PYTHONPATH=os.path.join(
            args.build, "python"), OMP_NUM_THREADS="1",
        HOROVOD_GLOO_TIMEOUT_SECONDS=str(args.gloo_timeout),
        HVDTUNE_ELASTIC_HEARTBEAT_SECONDS=str(args.heartbeat))
    cooldown = args.cooldown
    cmd = [CLUSTER, "exec", "--node", "0", "env"] + [
        "%s=%s" % (k, env[k]) for k in
        ("HVDTUNE_CLUSTER", "HVDTUNE_RSH_AGENT", "PYTHONPATH",
         "OMP_NUM_THREADS", "HOROVOD_GLOO_TIMEOUT_SECONDS",
         "HVDTUNE_ELASTIC_HEARTBEAT_SECONDS")] + [
        cli, "run", "-np", "6", "--min-np", "4", "--max-np", "6",
        "--network-interface", "eth0", "--blacklist-cooldown-range",
        str(cooldown), str(cooldown), "--host-discovery-script",
        "cat " + hosts, "--", sys.executable,
        os.path.join(ROOT, "python/tests/elastic_train.py"),
        "--steps", str(args.steps), "--sleep", "0.02"]
    job = subprocess.Popen(cmd, stdout=open(log, "w"),
                           stderr=subprocess.STDOUT, cwd=work, env=env)
    res = {"ok": False, "why": "", "reset": None, "rejoin": None,
           "detect": None, "lost": [], "stale": None}

    def text():
        return open(log).read()

    deadline = time.time() + 120
    while not re.search(r"STEP 20 ", text()):
        if job.poll() is not None or time.time() > deadline:
            job.kill()
            res["why"] = "no step 20:\n" + text()[-3000:]
            return res
        time.sleep(0.1)
    ns = "hvdtune-%s-node2" % os.environ["HVDTUNE_CLUSTER"]
    pids = [int(p) for p in subprocess.run(
        ["ip", "netns", "pids", ns], capture_output=True,
        text=True).stdout.split()]
    failed_at = time.time()
    if args.scenario == "kill":
        for p in pids:
            os.kill(p, signal.SIGKILL)
    else:
        subprocess.run([CLUSTER, "link", "down", "--node", "2"], check=True)
    blacklisted_at = None  # seen in the launcher's log (polled)
    restored = args.scenario == "kill"
    stale_dead_at = failed_at if args.scenario == "kill" else None
    end = time.time() + 300
    while job.poll() is None and time.time() < end:
        now = time.time()
        if blacklisted_at is None and "host node2 blacklisted" in text():
            blacklisted_at = now
        if not restored and now >= failed_at + args.cut_seconds:
            subprocess.run([CLUSTER, "link", "up", "--node", "2"], check=True)
            restored = True
        if stale_dead_at is None and not any(alive(p) for p in pids):
            stale_dead_at = now
        time.sleep(0.05)
    if not restored:
        subprocess.run([CLUSTER, "link", "up", "--node", "2"], check=True)
    if job.poll() is None:
        job.kill()
        res["why"] = "did not end:\n" + text()[-3000:]
        return res
    rc = job.returncode
    out = text()
    done = re.findall(r"DONE rank=(\d+) size=(\d+) identical=(\w+) "
                      r"checksum=([-+0-9.eE]+)", out)
    # Every rank of every world compared the parameters at its first step.
    checks = re.findall(
        r"WORLD_CHECK world=\d+ size=(\d+) identical=(True|False)", out)
    steps = [(float(t), int(n)) for t, n in
             re.findall(r"FIRST_STEP t=([0-9.]+) size=(\d+)", out)]
    four = [t for t, n in steps if n == 4 and t >= failed_at]
    six = [t for t, n in steps if n == 6 and t >= failed_at]
    if four:
        res["reset"] = max(four) - failed_at
    if blacklisted_at is not None:
        res["detect"] = blacklisted_at - failed_at
        if six:
            res["rejoin"] = max(six) - (blacklisted_at + cooldown)
    res["lost"] = lost_steps(out)
    # Node2's old ranks were gone before its new ranks stepped.
    res["stale"] = (stale_dead_at is not None and six and
                    stale_dead_at <= min(six))
    why = []
    if rc != 0:
        why.append("exit %d" % rc)
    if len(pids) != 2:
        why.append("%d processes on node2" % len(pids))
    if len(done) != 6 or not all(n == "6" and same == "True"
                                 for _, n, same, _ in done):
        why.append("not 6 identical DONE lines")
    if len({c for *_, c in done}) != 1:
        why.append("checksums differ")
    if not checks or not all(same == "True" for _, same in checks):
        why.append("a WORLD_CHECK failed")
    if not {"4", "6"} <= {n for n, _ in checks}:
        why.append("no 4-rank and 6-rank worlds")
    if not re.search(r"world \d+: 4 ranks on node0:2,node1:2", out):
        why.append("no 4-rank world on node0 and node1")
    if not res["lost"] or not all(ok for *_, ok in res["lost"]):
        why.append("steps lost: %s" % res["lost"])
    if not res["stale"]:
        why.append("an old rank of node2 outlived the rejoin")
    res["ok"] = not why
    res["why"] = "; ".join(why) + ("\n" + out[-3000:] if why else "")
    return res


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--scenario", choices=("kill", "cut"),
                        default="kill")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--gloo-timeout", type=float, default=5,
                        help="HOROVOD_GLOO_TIMEOUT_SECONDS")
    parser.add_argument("--heartbeat", type=float, default=3,
                        help="HVDTUNE_ELASTIC_HEARTBEAT_SECONDS")
    parser.add_argument("--cut-seconds", type=float, default=8,
                        help="how long node2's link stays cut")
    parser.add_argument("--cooldown", type=float, default=None,
                        help="--blacklist-cooldown-range (both ends); "
                        "default 3 (kill), 10 (cut: past the restored link)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    if args.cooldown is None:
        args.cooldown = 3 if args.scenario == "kill" else 10
    if not os.environ.get("HVDTUNE_CLUSTER"):
        sys.exit("HVDTUNE_CLUSTER is not set (tools/cluster.sh up 3 2 ...)")
    print("scenario %s: HOROVOD_GLOO_TIMEOUT_SECONDS=%g "
          "HVDTUNE_ELASTIC_HEARTBEAT_SECONDS=%g, cooldown %g s%s" % (
              args.scenario, args.gloo_timeout, args.heartbeat,
              args.cooldown, ", link cut for %g s" % args.cut_seconds
              if args.scenario == "cut" else ""), flush=True)
    resets, rejoins, detects, passed, losses = [], [], [], 0, []
    with tempfile.TemporaryDirectory() as work:
        for i in range(args.runs):
            r = one_run(args, work, i)
            passed += r["ok"]
            fmt = lambda x: "%.2f" % x if x is not None else "-"  # noqa
            print("run %d: %s, failure to 4-rank step %s s, node2 "
                  "unusable after %s s, node2 back to 6-rank step %s s, "
                  "lost steps per reset (world: lost/since last commit) "
                  "%s" % (
                      i + 1, "pass" if r["ok"] else "FAIL", fmt(r["reset"]),
                      fmt(r["detect"]), fmt(r["rejoin"]),
                      " ".join("%d:%s/%d" % (w, lost, since)
                               for w, lost, since, _ in r["lost"])),
                  flush=True)
            if not r["ok"]:
                print(r["why"])
            for key, xs in (("reset", resets), ("rejoin", rejoins),
                            ("detect", detects)):
                if r[key] is not None:
                    xs.append(r[key])
            losses += [lost for _, lost, _, _ in r["lost"]
                       if lost is not None]
    print("passed %d of %d" % (passed, args.runs))
    for name, xs in (("failure to the first 4-rank step", resets),
                     ("failure to node2 blacklisted", detects),
                     ("node2 back to the first 6-rank step", rejoins)):
        if xs:
            print("%s: median %.2f s, max %.2f s (%d runs)" %
                  (name, statistics.median(xs), max(xs), len(xs)))
    if losses:
        print("steps lost per reset: %s (max %d)" % (
            " ".join(map(str, losses)), max(losses)))
    sys.exit(0 if passed == args.runs else 1)


if __name__ == "__main__":
    main()
