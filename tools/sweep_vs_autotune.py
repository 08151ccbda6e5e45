#!/usr/bin/env python3
"""The hvd-tune done-when measurement: an offline grid sweep against online
autotuning on the same workload, re-measured side by side.

1. `mpirun -np N hvd-tune sweep --workload W --strategy grid` into a fresh
   store (timed);
2. synthetic_train with HOROVOD_AUTOTUNE=1 (store off) until it freezes, to
   get the configuration online autotuning freezes on (--tune-runs of them);
3. --rounds interleaved rounds (the order alternates) of synthetic_train with
   every knob pinned to the sweep's best (`eval "$(hvd-tune best ...)"`) and
   to each frozen configuration; medians of samples/s.

Usage: tools/sweep_vs_autotune.py --build build [--ranks 4] [--workload
many-small] [--rounds 7] [--tune-runs 1]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to",
          "none", "--mca", "btl", "self,vader,tcp"]


def knob_env(config, table):
    env = {}
    for knob in table:
        v = config[knob["name"]]
        env[knob["env"]] = ("1" if v else "0") if isinstance(v, bool) else str(v)
    return env


def train(args, env, extra):
    full = dict(os.environ)
    full.update(env)
    cmd = MPIRUN + ["-np", str(args.ranks), args.trainer, "--workload",
                    args.workload, "--json", *extra]
    out = subprocess.run(cmd, env=full, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--workload", default="many-small")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tune-runs", type=int, default=1)
    args = ap.parse_args()
    hvd_tune = os.path.join(args.build, "tools/hvd_tune/hvd-tune")
    args.trainer = os.path.join(args.build, "bench/synthetic_train")
    work = tempfile.mkdtemp(prefix="hvd-tune-measure-")
    db = os.path.join(work, "store.db")
    table = json.loads(subprocess.run([hvd_tune, "knobs", "--json"],
                                      capture_output=True, text=True,
                                      check=True).stdout)

    start = time.time()
    sweep = subprocess.run(
        MPIRUN + ["-np", str(args.ranks), hvd_tune, "sweep", "--workload",
                  args.workload, "--strategy", "grid", "--db", db, "--json"],
        capture_output=True, text=True, check=True)
    sweep_seconds = time.time() - start
    result = json.loads(sweep.stdout)
    print(f"sweep: {len(result['points'])} configurations in "
          f"{sweep_seconds:.0f} s wall; best {result['best']['knobs']}")
    best_lines = subprocess.run(
        [hvd_tune, "best", "--db", db, result["fingerprint"]],
        capture_output=True, text=True, check=True).stdout
    print(best_lines, end="")
    best_env = dict(l[len("export "):].split("=", 1)
                    for l in best_lines.splitlines() if l.startswith("export "))

    frozen = []
    for i in range(args.tune_runs):
        job = train(args, {"HOROVOD_AUTOTUNE": "1",
                           "HVDTUNE_AUTOTUNE_STORE": "off",
                           "HVDTUNE_AUTOTUNE_SEED": str(i + 1)},
                    ["--until-frozen", "--measure-steps", "30"])
        print(f"autotune run {i + 1}: {job['autotune']['phase']} after "
              f"{job['autotune']['samples']} samples: {job['config']}")
        frozen.append(knob_env(job["config"], table))

    configs = {"sweep best": best_env}
    for i, env in enumerate(frozen):
        configs[f"autotune frozen {i + 1}"] = env
    rates = {name: [] for name in configs}
    names = list(configs)
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            job = train(args, configs[name],
                        ["--warmup-steps", "10", "--measure-steps", "50"])
            rates[name].append(job["samples_per_sec"])
        print(f"round {r + 1}: " + ", ".join(
            f"{n} {rates[n][-1]:.0f}" for n in names), flush=True)
    base = statistics.median(rates["sweep best"])
    for name in names:
        m = statistics.median(rates[name])
        print(f"{name}: median {m:.0f} samples/s ({m / base * 100:.1f}% of the "
              f"sweep best) over {args.rounds} rounds")
    print(json.dumps({"sweep_seconds": sweep_seconds,
                      "medians": {n: statistics.median(v) for n, v in rates.items()},
                      "rates": rates, "configs": configs}))


if __name__ == "__main__":
    main()
