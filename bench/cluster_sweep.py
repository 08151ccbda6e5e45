#!/usr/bin/python3
"""Default and autotuned against the best of a search of the whole space, on
the emulated cluster (tools/cluster.sh).

For each link preset and workload: --tuned autotuned synthetic_train runs
(from scratch, the store off) until the tuner freezes; `hvd-tune sweep`
across the cluster's nodes measures a design of configurations and
confirms its best; then the default configuration, the design's best, every
autotuned run's frozen configuration (and any --compare configuration) are
re-measured by synthetic_train in interleaved rounds, and the medians
printed as a Markdown table.

The design (--design lhs, the default) is a space-filling Latin hypercube
of --points points over the tuner's whole space, every knob the tuner
tunes on this cluster (fusion threshold from 1 MiB, cycle time, ring
segment, response cache, algorithm, hierarchical allgather, the cycle
thread's boost), each combination of the categorical knobs in turn, plus
the default. --design grid is the older 27-point grid (algorithm x fusion
threshold {4, 32, 128 MiB} x cycle time {0.5, 1, 3 ms}, --grid adds axes).

  bench/cluster_sweep.py --build build --presets 1gbe \\
      --workloads resnet50:0.1 --points 120 --tuned 3 --rounds 3

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


def autotuned(cluster_id, build, workload, scale, max_steps):
    """One autotuned run from scratch: its frozen knobs as pinning env (None
    if it did not freeze) and its JSON row."""
    env = {"HOROVOD_AUTOTUNE": "1", "HVDTUNE_AUTOTUNE_STORE": "off"}
    out = cluster(cluster_id, "run", os.path.join(build, "bench/synthetic_train"),
                  "--workload", workload, "--scale", str(scale), "--until-frozen",
                  "--max-steps", str(max_steps), "--measure-steps", "20",
                  "--json", env=env)
    row = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    return row


def knob_text(knobs, names):
    return " ".join("%s=%s" % (k, knobs[k]) for k in names if k in knobs)


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
    ap.add_argument("--design", choices=["lhs", "grid"], default="lhs",
                    help="lhs: a Latin hypercube over the tuner's whole space; "
                         "grid: the 27-point grid (and --grid axes)")
    ap.add_argument("--points", type=int, default=120,
                    help="--design lhs: points besides the default")
    ap.add_argument("--repeats", type=int, default=3,
                    help="samples of every design point")
    ap.add_argument("--seed", type=int, default=1, help="the design's seed")
    ap.add_argument("--tuned", type=int, default=3,
                    help="autotuned runs per workload whose frozen "
                         "configurations are re-measured beside the best")
    ap.add_argument("--tune-max-steps", type=int, default=800)
    ap.add_argument("--json-out", help="write every sweep's result, the "
                    "autotuned runs and the rounds here")
    ap.add_argument("--grid", action="append", default=[],
                    help="--design grid: one more grid axis KNOB=V1,V2,... "
                         "(e.g. cycle_thread_boost=0,10)")
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
    # The cluster's id: HVDTUNE_CLUSTER (as tools/cluster.sh), else one of
    # this process's own.
    cluster_id = os.environ.get("HVDTUNE_CLUSTER") or "sweep%d" % os.getpid()
    cluster_id = cluster_id[:16]
    rows = []
    tuned_failures = []
    for preset in args.presets.split(","):
        cluster(cluster_id, "up", str(args.nodes), str(args.ranks_per_node),
                "--link", preset, "--owner", str(os.getpid()), capture=False)
        try:
            for wl in args.workloads.split(","):
                workload, _, scale = wl.partition(":")
                scale = scale or "1"
                tuned = []
                for t in range(args.tuned):
                    print("# %s %s x%s: autotuned run %d" % (preset, workload, scale,
                                                            t + 1),
                          file=sys.stderr, flush=True)
                    row = autotuned(cluster_id, args.build, workload, scale,
                                    args.tune_max_steps)
                    tune = row["autotune"]
                    print("#   %s after %d samples, %.1f samples/s: %s" % (
                        tune["phase"], tune["samples"], row["samples_per_sec"],
                        knob_text(row["config"], tune["tuned_knobs"])),
                          file=sys.stderr, flush=True)
                    if tune["phase"] == "frozen":
                        tuned.append(("tuned run %d" % (t + 1),
                                      env_of(row["config"], table), row))
                    else:
                        tuned_failures.append("%s %s run %d: %s" % (
                            preset, workload, t + 1, tune["phase"]))
                sweep_cmd = [os.path.join(args.build, "tools/hvd_tune/hvd-tune"),
                             "sweep", "--workload", workload, "--scale", scale,
                             "--repeats", str(args.repeats), "--seed",
                             str(args.seed), "--no-store", "--json"]
                if args.design == "lhs":
                    sweep_cmd += ["--strategy", "lhs", "--budget", str(args.points)]
                else:
                    sweep_cmd += ["--strategy", "grid"]
                    for g in GRID + args.grid:
                        sweep_cmd += ["--grid", g]
                print("# %s %s x%s: %s sweep" % (preset, workload, scale, args.design),
                      file=sys.stderr, flush=True)
                sweep = json.loads(cluster(cluster_id, "run", *sweep_cmd))
                best = sweep["best"]["knobs"]
                varied = sweep.get("varied") or list(best)
                configs = [("default", {}), ("design best", env_of(best, table))]
                configs += [(name, env) for name, env, _ in tuned] + compare
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
                rows.append({
                    "preset": preset, "workload": "%s x%s" % (workload, scale),
                    "names": [n for n, _ in configs], "median": med,
                    "samples": samples,
                    "best": knob_text(best, varied),
                    "tuned": [(n, knob_text(row["config"],
                                            row["autotune"]["tuned_knobs"]),
                               row["autotune"]["samples"])
                              for n, _, row in tuned],
                    "points": len(sweep["points"]), "seconds": sweep["seconds"],
                    "sweep": sweep, "tuned_rows": [row for _, _, row in tuned]})
                if args.json_out:
                    with open(args.json_out, "w") as f:
                        json.dump({"args": vars(args), "rows": rows,
                                   "tuned_failures": tuned_failures}, f, indent=1)
        finally:
            cluster(cluster_id, "down", capture=False)
    for row in rows:
        names, med = row["names"], row["median"]
        best = med["design best"]
        print("\n%s, %s: %d design points, %.0f s of sweep; best: %s" % (
            row["preset"], row["workload"], row["points"], row["seconds"],
            row["best"]))
        for name, knobs, samples in row["tuned"]:
            print("%s (%d samples): %s" % (name, samples, knobs))
        print("\n| configuration | samples/s, rounds | median | / default | "
              "/ design best |")
        print("|---|---|---|---|---|")
        for n in names:
            print("| %s | %s | %.1f | %.2fx | %.2fx |" % (
                n, ", ".join("%.1f" % v for v in row["samples"][n]), med[n],
                med[n] / med["default"], med[n] / best))
    for failure in tuned_failures:
        print("FAILED to freeze: " + failure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
