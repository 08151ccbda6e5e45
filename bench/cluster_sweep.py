#!/usr/bin/python3
"""Default against the grid best on the emulated cluster (tools/cluster.sh).

For each link preset and workload: `hvd-tune sweep --strategy grid` across
the cluster's nodes finds the best configuration of a grid, then the default
configuration and the grid best (and any --compare configuration, e.g. what
the autotuner picked) are re-measured by synthetic_train in interleaved
rounds, and the medians printed as a Markdown table.

  bench/cluster_sweep.py --build build --presets 1gbe,10gbe \\
      --workloads resnet50:0.1,bert-base:0.05,many-small:1 --rounds 3

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
# Every knob's value in the grid that differs from the default somewhere the
# tuner looks; the defaults (128 MiB, 1 ms, native) are points of it.
GRID = [
    "allreduce_algorithm=native,ring,hierarchical",
    "fusion_threshold=4M,32M,128M",
    "cycle_time=0.5,1,3",
]


def knob_table(build):
    out = subprocess.run([os.path.join(build, "tools/hvd_tune/hvd-tune"),
                          "knobs", "--json"], check=True, capture_output=True,
                         text=True).stdout
    return {k["name"]: k for k in json.loads(out)}


def env_of(knobs, table):
    """HOROVOD_*/HVDTUNE_* settings that pin a {knob: value} configuration."""
    env = {}
    for name, value in knobs.items():
        spec = table[name]
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif spec["type"] == "integer":
            text = str(int(round(value)))
        else:
            text = str(value)
        env[spec["env"]] = text
    return env


def cluster(cluster_id, *args, env=None, capture=True):
    cmd = [CLUSTER, "--id", cluster_id] + list(args)
    run_env = dict(os.environ)
    if env:
        run_env.update(env)
    res = subprocess.run(cmd, env=run_env, text=True,
                         stdout=subprocess.PIPE if capture else None,
                         stderr=subprocess.DEVNULL if capture else None)
    if res.returncode != 0:
        raise RuntimeError("%s failed (%d)" % (" ".join(cmd), res.returncode))
    return res.stdout


def train(cluster_id, build, workload, scale, env, steps):
    out = cluster(cluster_id, "run", os.path.join(build, "bench/synthetic_train"),
                  "--workload", workload, "--scale", str(scale),
                  "--warmup-steps", "5", "--measure-steps", str(steps),
                  "--json", env=env)
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["samples_per_sec"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--presets", default="1gbe,10gbe")
    ap.add_argument("--workloads", default="resnet50:0.1,bert-base:0.05,many-small:1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30,
                    help="measured steps per synthetic_train run")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--compare", action="append", default=[],
                    help="NAME=ENV1=V1,ENV2=V2: one more configuration to re-measure")
    ap.add_argument("--grid", action="append", default=[],
                    help="one more grid axis KNOB=V1,V2,... (e.g. "
                         "cycle_thread_boost=0,10)")
    args = ap.parse_args()

    why = subprocess.run([CLUSTER, "check"], capture_output=True, text=True)
    if why.returncode != 0:
        print(why.stdout.strip(), file=sys.stderr)
        return 3
    table = knob_table(args.build)
    compare = []
    for c in args.compare:
        name, _, rest = c.partition("=")
        compare.append((name, dict(kv.split("=", 1) for kv in rest.split(",") if kv)))
    cluster_id = "sweep%d" % os.getpid()
    cluster_id = cluster_id[:16]
    rows = []
    for preset in args.presets.split(","):
        cluster(cluster_id, "up", str(args.nodes), str(args.ranks_per_node),
                "--link", preset, "--owner", str(os.getpid()), capture=False)
        try:
            for wl in args.workloads.split(","):
                workload, _, scale = wl.partition(":")
                scale = scale or "1"
                sweep_cmd = [os.path.join(args.build, "tools/hvd_tune/hvd-tune"),
                             "sweep", "--strategy", "grid", "--workload", workload,
                             "--scale", scale, "--no-store", "--json"]
                for g in GRID + args.grid:
                    sweep_cmd += ["--grid", g]
                print("# %s %s x%s: grid sweep" % (preset, workload, scale),
                      file=sys.stderr, flush=True)
                sweep = json.loads(cluster(cluster_id, "run", *sweep_cmd))
                best = sweep["best"]["knobs"]
                configs = [("default", {}), ("grid best", env_of(best, table))]
                configs += compare
                samples = {name: [] for name, _ in configs}
                for r in range(args.rounds):
                    order = configs if r % 2 == 0 else list(reversed(configs))
                    for name, env in order:
                        samples[name].append(train(cluster_id, args.build, workload,
                                                   scale, env, args.steps))
                    print("# round %d: %s" % (r + 1, ", ".join(
                        "%s %.1f" % (n, samples[n][-1]) for n, _ in configs)),
                          file=sys.stderr, flush=True)
                med = {n: statistics.median(v) for n, v in samples.items()}
                axes = [g.partition("=")[0] for g in GRID + args.grid]
                best_text = " ".join("%s=%s" % (k, v) for k, v in best.items()
                                     if k in axes)
                rows.append((preset, "%s x%s" % (workload, scale), med, best_text,
                             len(sweep["points"]), sweep["seconds"]))
        finally:
            cluster(cluster_id, "down", capture=False)
    names = ["default", "grid best"] + [n for n, _ in compare]
    print("| link | workload | " + " | ".join(names) +
          " | grid best / default | grid best knobs | grid points (s) |")
    print("|---" * (len(names) + 5) + "|")
    for preset, wl, med, best_text, points, seconds in rows:
        print("| %s | %s | %s | **%.2fx** | %s | %d (%.0f s) |" % (
            preset, wl, " | ".join("%.1f" % med[n] for n in names),
            med["grid best"] / med["default"], best_text, points, seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
