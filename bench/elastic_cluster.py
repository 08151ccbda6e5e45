"""Elastic training on the emulated cluster (docs/elastic.md): RUNS runs of
python/tests/elastic_train.py on 3 nodes x 2 ranks started by
`hvd-tune run --host-discovery-script` from node0 through the cluster's rsh
agent; in each run every rank of node2 is killed (SIGKILL) mid-run, the 4
survivors continue, and node2 comes back after its blacklist cooldown
(`--blacklist-cooldown-range 3 3`), so the job ends on 6 ranks again.

A run passes when the job exits 0 on 6 ranks with identical parameters,
after a 4-rank world, every rank of every world having found the
parameters identical at the world's first step. Prints per run the seconds from the kill to the first
step of the 4-rank world, and from node2's return to the first step of the
6-rank world (including its ranks' start), then medians and maxima.

Needs a cluster of 3 x 2 up under HVDTUNE_CLUSTER (tools/cluster.sh up 3 2
--link 1gbe), run from the repository root:

    python3 bench/elastic_cluster.py --runs 10 [--build build]
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


def one_run(args, work, i):
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("node0:2\nnode1:2\nnode2:2\n")
    log = os.path.join(work, "run%d.log" % i)
    cli = os.path.join(args.build, "tools/hvd_tune/hvd-tune")
    env = dict(os.environ, HVDTUNE_RSH_AGENT=os.path.join(
        ROOT, "tools/cluster_rsh.sh"), PYTHONPATH=os.path.join(
            args.build, "python"), OMP_NUM_THREADS="1")
    cmd = [os.path.join(ROOT, "tools/cluster.sh"), "exec", "--node", "0",
           "env"] + ["%s=%s" % (k, env[k]) for k in
                     ("HVDTUNE_CLUSTER", "HVDTUNE_RSH_AGENT", "PYTHONPATH",
                      "OMP_NUM_THREADS")] + [
        cli, "run", "-np", "6", "--min-np", "4", "--max-np", "6",
        "--network-interface", "eth0", "--blacklist-cooldown-range", "3",
        "3", "--host-discovery-script", "cat " + hosts, "--",
        sys.executable, os.path.join(ROOT, "python/tests/elastic_train.py"),
        "--steps", str(args.steps), "--sleep", "0.02"]
    job = subprocess.Popen(cmd, stdout=open(log, "w"),
                           stderr=subprocess.STDOUT, cwd=work, env=env)

    def text():
        return open(log).read()

    deadline = time.time() + 120
    while not re.search(r"STEP 20 ", text()):
        if job.poll() is not None or time.time() > deadline:
            return False, "no step 20:\n" + text()[-3000:], None, None
        time.sleep(0.1)
    ns = "hvdtune-%s-node2" % os.environ["HVDTUNE_CLUSTER"]
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                          text=True).stdout.split()
    killed_at = time.time()
    for p in pids:
        os.kill(int(p), signal.SIGKILL)
    try:
        rc = job.wait(timeout=300)
    except subprocess.TimeoutExpired:
        job.kill()
        return False, "did not end:\n" + text()[-3000:], None, None
    out = text()
    done = re.findall(r"DONE rank=(\d+) size=(\d+) identical=(\w+) "
                      r"checksum=([-+0-9.eE]+)", out)
    # Every rank of every world compared the parameters at its first step.
    checks = re.findall(
        r"WORLD_CHECK world=\d+ size=(\d+) identical=(True|False)", out)
    ok = (rc == 0 and len(pids) == 2 and len(done) == 6 and
          checks and all(same == "True" for _, same in checks) and
          {"4", "6"} <= {n for n, _ in checks} and
          all(n == "6" and same == "True" for _, n, same, _ in done) and
          len({c for *_, c in done}) == 1 and
          re.search(r"world \d+: 4 ranks on node0:2,node1:2", out))
    steps = [(float(t), int(n)) for t, n in
             re.findall(r"FIRST_STEP t=([0-9.]+) size=(\d+)", out)]
    four = [t for t, n in steps if n == 4 and t >= killed_at]
    six = [t for t, n in steps if n == 6 and t >= killed_at]
    back = killed_at + 3.0  # the cooldown
    reset = max(four) - killed_at if four else None
    rejoin = max(six) - back if six else None
    return bool(ok), ("" if ok else out[-3000:]), reset, rejoin


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    if not os.environ.get("HVDTUNE_CLUSTER"):
        sys.exit("HVDTUNE_CLUSTER is not set (tools/cluster.sh up 3 2 ...)")
    resets, rejoins, passed = [], [], 0
    with tempfile.TemporaryDirectory() as work:
        for i in range(args.runs):
            ok, why, reset, rejoin = one_run(args, work, i)
            passed += ok
            print("run %d: %s, kill to 4-rank step %s s, node2 back to "
                  "6-rank step %s s" % (
                      i + 1, "pass" if ok else "FAIL",
                      "%.2f" % reset if reset is not None else "-",
                      "%.2f" % rejoin if rejoin is not None else "-"),
                  flush=True)
            if not ok:
                print(why)
            if reset is not None:
                resets.append(reset)
            if rejoin is not None:
                rejoins.append(rejoin)
    print("passed %d of %d" % (passed, args.runs))
    for name, xs in (("kill to the first 4-rank step", resets),
                     ("node2 back to the first 6-rank step", rejoins)):
        if xs:
            print("%s: median %.2f s, max %.2f s (%d runs)" %
                  (name, statistics.median(xs), max(xs), len(xs)))
    sys.exit(0 if passed == args.runs else 1)


if __name__ == "__main__":
    main()
