#!/usr/bin/env python3
"""Training throughput on the emulated cluster against its physical limit.

For each workload, interleaved rounds of: the same ranks on one node (plain
mpirun, shared memory only) and every configuration given with --config on
the emulated cluster (tools/cluster.sh run; the cluster must be up). Prints
the medians in samples/s, the link bound (every node sends and receives the
whole gradient once per step at the link's TCP goodput) and the best
configuration's share of min(link bound, one node).

A configuration with HOROVOD_AUTOTUNE=1 is the tuned job: each of its runs
tunes from scratch (HVDTUNE_AUTOTUNE_STORE=off unless the configuration
sets it) until the tuner freezes, then measures --steps minus the 10 warm-up
steps; the frozen knobs are printed with its result.

  HVDTUNE_CLUSTER=perf tools/cluster.sh up 2 2 --link 1gbe
  HVDTUNE_CLUSTER=perf bench/physical_limit.py --rounds 3 \\
      --workloads resnet50:0.25,bert-base:0.1 \\
      --config "sequential=HVDTUNE_ALLREDUCE_ALGORITHM=hierarchical,HVDTUNE_HIERARCHICAL_CHUNK_BYTES=0" \\
      --config "pipelined=HVDTUNE_ALLREDUCE_ALGORITHM=hierarchical" \\
      --config "autotuned=HOROVOD_AUTOTUNE=1"
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_config(text):
    name, sep, rest = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"--config '{text}': expected NAME=ENV1=V1,ENV2=V2")
    env = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(
                f"--config '{text}': '{item}' is not ENV=VALUE")
        env[key] = value
    return name, env


def run(cmd, env_extra, timeout):
    env = dict(os.environ)
    env.update(env_extra)
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True,
                             timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        print(f"  timed out: {' '.join(cmd)}", file=sys.stderr, flush=True)
        return None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    print(f"  failed (rc {out.returncode}): {' '.join(cmd)}\n"
          f"{out.stderr[-2000:]}", file=sys.stderr, flush=True)
    return None


WARMUP_STEPS = 10


def autotuned(env):
    return env.get("HOROVOD_AUTOTUNE", "0").lower() in ("1", "true")


def trainer_args(base, steps, env):
    """synthetic_train's step options: fixed steps, or tune then measure."""
    if autotuned(env):
        env.setdefault("HVDTUNE_AUTOTUNE_STORE", "off")
        return base + ["--until-frozen", "--measure-steps",
                       str(max(1, steps - WARMUP_STEPS))]
    return base + ["--steps", str(steps)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--workloads", default="resnet50:0.25,bert-base:0.1",
                    help="WORKLOAD:SCALE,...")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20,
                    help="synthetic_train --steps (its first 10 are warm-up)")
    ap.add_argument("--ranks", type=int, default=4,
                    help="ranks of the one-node run (the cluster's total)")
    ap.add_argument("--goodput-gbs", type=float, default=0.119,
                    help="the link's TCP goodput in GB/s (1gbe: 0.119)")
    ap.add_argument("--config", type=parse_config, action="append",
                    default=[], help="NAME=ENV1=V1,ENV2=V2 (repeatable)")
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    if not args.config:
        ap.error("give at least one --config")
    train = os.path.join(args.build, "bench", "synthetic_train")
    results = {}
    for spec in args.workloads.split(","):
        workload, _, scale = spec.partition(":")
        base = [train, "--workload", workload, "--json"]
        if scale:
            base += ["--scale", scale]
        runs = [("one node", [os.path.join(ROOT, "tools", "mpirun.sh"), "-np",
                              str(args.ranks)] +
                 trainer_args(base, args.steps, {}), {})]
        runs += [(name, [os.path.join(ROOT, "tools", "cluster.sh"), "run"] +
                  trainer_args(base, args.steps, env), env)
                 for name, env in args.config]
        for r in range(args.rounds):
            for name, cmd, env in runs:
                res = run(cmd, env, args.timeout)
                key = (spec, name)
                entry = results.setdefault(key, {"sps": [], "bytes": 0})
                if res:
                    entry["sps"].append(res["samples_per_sec"])
                    entry["bytes"] = res["bytes_per_step"]
                    entry["batch"] = res["batch_size"] * res["ranks"]
                frozen = ""
                if res and autotuned(env):
                    frozen = "  frozen: " + " ".join(
                        f"{k}={v}" for k, v in res["config"].items())
                print(f"round {r + 1} {spec} {name}: "
                      f"{res['samples_per_sec'] if res else 'failed'}{frozen}",
                      flush=True)
    names = [n for n, _, _ in runs]
    print()
    print("| workload | gradient | link bound | " +
          " | ".join(names) + " | best / min(bound, one node) |")
    print("|---" * (len(names) + 4) + "|")
    for spec in args.workloads.split(","):
        cells, med = [], {}
        grad = 0
        batch = 128
        for n in names:
            e = results.get((spec, n), {"sps": []})
            grad = grad or e.get("bytes", 0)
            batch = e.get("batch", batch)
            if e["sps"]:
                med[n] = statistics.median(e["sps"])
                cells.append(f"{med[n]:.0f} ({', '.join(f'{x:.0f}' for x in e['sps'])})")
            else:
                cells.append("-")
        bound = batch / (grad / (args.goodput_gbs * 1e9)) if grad else 0
        cluster = [med[n] for n in names[1:] if n in med]
        limit = min(bound, med.get("one node", bound))
        share = f"{max(cluster) / limit:.0%}" if cluster and limit else "-"
        print(f"| {spec.replace(':', ' ×')} | {grad / 2**20:.1f} MiB | "
              f"{bound:.0f} | " + " | ".join(cells) + f" | {share} |")


if __name__ == "__main__":
    main()
