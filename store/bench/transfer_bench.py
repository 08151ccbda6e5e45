#!/usr/bin/python3
"""Transfer from the config store: how many exploration samples a job with a
similar but new fingerprint needs to reach 95% of its grid best, with the
samples of a similar job as priors (transfer) and without (store off).

A source job (--source-np ranks) tunes once into a seed store. Then --runs
pairs of runs of the target job (--target-np ranks, same workload: the same
model at another world size), interleaved: one on a fresh copy of the seed
store (source "transfer"), one with HVDTUNE_AUTOTUNE_STORE=off (source
"fresh"). Each run's HOROVOD_AUTOTUNE_LOG gives its samples' scores; the
count is the number of samples scored (warm-up included) until one reaches
0.95 x the grid best (--grid-best, samples/s, measured with
bench/autotune_grid.py on the target job), or "not reached".

Standard library only. Example:
  /usr/bin/python3 store/bench/transfer_bench.py --build build \\
      --workload many-small --source-np 4 --target-np 2 --grid-best 9000
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def run(args, np_, env_vars, log):
    cmd = [os.path.join(ROOT, "tools", "mpirun.sh"), "-np", str(np_)]
    env = dict(os.environ)
    env_vars = dict(env_vars, HOROVOD_AUTOTUNE="1", HOROVOD_AUTOTUNE_LOG=log)
    for k, v in env_vars.items():
        env[k] = v
        cmd += ["-x", k]
    cmd += [os.path.join(args.build, "bench", "synthetic_train"),
            "--workload", args.workload, "--scale", str(args.scale),
            "--json", "--until-frozen", "--measure-steps", "20"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          check=False)
    rows = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not rows:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(f"transfer_bench: run failed (exit {proc.returncode})")
    return json.loads(rows[-1])


def samples_to_reach(log, target_bytes_per_sec):
    with open(log, newline="") as f:
        for n, row in enumerate(csv.DictReader(f), start=1):
            if row["phase"] == "frozen":
                break
            if float(row["score"]) >= target_bytes_per_sec:
                return n
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--workload", default="many-small")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--source-np", type=int, default=4)
    p.add_argument("--target-np", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--grid-best", type=float, required=True,
                   help="the target job's grid best, samples/s")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="hvdtune_transfer_")
    try:
        seed = os.path.join(work, "seed.db")
        src = run(args, args.source_np, {"HOROVOD_AUTOTUNE_DB": seed},
                  os.path.join(work, "seed.csv"))
        print(f"seed: {args.workload} on {args.source_np} ranks, "
              f"{src['autotune']['exploration_samples']} samples, "
              f"fingerprint {src['autotune']['fingerprint']}", flush=True)
        counts = {"transfer": [], "fresh": []}
        for i in range(args.runs):
            for mode in ("transfer", "fresh"):
                db = os.path.join(work, f"{mode}{i}.db")
                env = {"HOROVOD_AUTOTUNE_DB": db}
                if mode == "transfer":
                    shutil.copy(seed, db)
                else:
                    env["HVDTUNE_AUTOTUNE_STORE"] = "off"
                log = os.path.join(work, f"{mode}{i}.csv")
                row = run(args, args.target_np, env, log)
                per_sample = row["bytes_per_step"] / (
                    row["batch_size"] * row["ranks"])
                n = samples_to_reach(log, 0.95 * args.grid_best * per_sample)
                counts[mode].append(n)
                print(f"run {i + 1} {mode:8} source={row['autotune']['source']}"
                      f" reached 95% of grid best after "
                      f"{n if n else 'not reached in'} samples "
                      f"(frozen at {row['samples_per_sec']:.0f} samples/s)",
                      flush=True)
        for mode, c in counts.items():
            # A run that never reached the target counts as one past the end.
            vals = [x if x else 1000 for x in c]
            print(f"{mode}: median {statistics.median(vals)} samples to 95% "
                  f"of grid best; runs {c}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
