#!/usr/bin/python3
"""Training steps on the emulated cluster, for the simulator's calibration.

For each link preset, brings up a cluster (tools/cluster.sh) and runs
`synthetic_train` at the default knobs with only the allreduce algorithm
pinned, for every workload and algorithm, in interleaved rounds (the order
reversed every other round). Prints, per preset x workload x algorithm, the
median step time and the median compute time of the same runs (rank 0's
`compute_ms_median`), as a Markdown table and as the rows of
bench/sim/calibration.cc's cluster table (`--cxx`).

  bench/cluster_calibration.py --presets 1gbe,10gbe \\
      --workloads resnet50:0.25,bert-base:0.1,many-small:1 --rounds 3

Needs root (network namespaces); says why and exits 3 elsewhere.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "tools", "cluster.sh")
ALGORITHMS = ["native", "ring", "hierarchical"]


def cluster(cluster_id, *args, env=None, capture=True, timeout=None):
    cmd = [CLUSTER, "--id", cluster_id] + list(args)
    run_env = dict(os.environ)
    if env:
        run_env.update(env)
    res = subprocess.run(cmd, env=run_env, text=True, timeout=timeout,
                         stdout=subprocess.PIPE if capture else None,
                         stderr=subprocess.PIPE if capture else None)
    if res.returncode != 0:
        tail = (res.stderr or "")[-2000:] if capture else ""
        raise RuntimeError("%s failed (%d)\n%s" % (" ".join(cmd), res.returncode, tail))
    return res.stdout


def train(cluster_id, build, workload, scale, algorithm, steps, timeout):
    out = cluster(cluster_id, "run", os.path.join(build, "bench/synthetic_train"),
                  "--workload", workload, "--scale", scale,
                  "--warmup-steps", "5", "--measure-steps", str(steps), "--json",
                  env={"HVDTUNE_ALLREDUCE_ALGORITHM": algorithm}, timeout=timeout)
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    row = json.loads(line)
    return row["step_time_ms_median"], row["compute_ms_median"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--presets", default="1gbe,10gbe")
    ap.add_argument("--workloads", default="resnet50:0.25,bert-base:0.1,many-small:1",
                    help="WORKLOAD:SCALE,...")
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20,
                    help="measured steps per synthetic_train run")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds one synthetic_train run may take")
    ap.add_argument("--cxx", action="store_true",
                    help="also print the rows as C++ initialisers")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 1:
        ap.error("--rounds and --steps must be at least 1")

    why = subprocess.run([CLUSTER, "check"], capture_output=True, text=True)
    if why.returncode != 0:
        print(why.stdout.strip() or why.stderr.strip(), file=sys.stderr)
        return 3
    algorithms = args.algorithms.split(",")
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        ap.error("--algorithms: unknown %s (known: %s)" %
                 (", ".join(unknown), ", ".join(ALGORITHMS)))
    workloads = [(w.partition(":")[0], w.partition(":")[2] or "1")
                 for w in args.workloads.split(",")]
    cluster_id = ("cal%d" % os.getpid())[:16]
    samples = {}
    for preset in args.presets.split(","):
        cluster(cluster_id, "up", str(args.nodes), str(args.ranks_per_node),
                "--link", preset, "--owner", str(os.getpid()), capture=False)
        try:
            runs = [(w, s, a) for w, s in workloads for a in algorithms]
            for r in range(args.rounds):
                for w, s, a in (runs if r % 2 == 0 else list(reversed(runs))):
                    step, compute = train(cluster_id, args.build, w, s, a, args.steps,
                                          args.timeout)
                    samples.setdefault((preset, w, s, a), []).append((step, compute))
                    print("# %s round %d %s x%s %s: step %.1f ms, compute %.1f ms" %
                          (preset, r + 1, w, s, a, step, compute),
                          file=sys.stderr, flush=True)
        finally:
            cluster(cluster_id, "down", capture=False)

    print("| link | workload | algorithm | step ms (rounds) | compute ms |")
    print("|---|---|---|---|---|")
    medians = []
    for (preset, w, s, a), v in samples.items():
        step = statistics.median(x for x, _ in v)
        compute = statistics.median(c for _, c in v)
        medians.append((preset, w, s, a, step, compute))
        print("| %s | %s x%s | %s | %.1f (%s) | %.1f |" %
              (preset, w, s, a, step, ", ".join("%.1f" % x for x, _ in v), compute))
    if args.cxx:
        for preset, w, s, a, step, compute in medians:
            print('    {"%s", "%s", %s, "%s", %.1f, %.1f},' %
                  (preset, w, s, a, step, compute))
    return 0


if __name__ == "__main__":
    sys.exit(main())
