#!/usr/bin/env python3
"""Compares two builds of the benches side by side, interleaved.

Runs each bench of build A and build B in alternating order (A B, B A, ...)
for --rounds rounds under mpirun, parses their --json rows and prints, per
row key, the median of each build and the ratio B/A. Interleaving matters on
a noisy machine: both builds see the same drift.

  bench/compare_builds.py --a /path/to/old/bench --b build/bench --rounds 5

Each directory holds allreduce_bench, fusion_bench, negotiation_bench (and
synthetic_train for --train).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = os.path.join(HERE, "..", "tools", "mpirun.sh")

# bench -> (arguments, key fields of a row, value field, higher is better)
BENCHES = {
    "allreduce_bench": (
        ["--algorithms", "native", "--min-bytes", "4K", "--max-bytes", "256M",
         "--step-factor", "4", "--repeats", "1", "--json"],
        ("algorithm", "bytes"), "time_us", False),
    "fusion_bench": (
        ["--workloads", "resnet50,many-small,mixed-precision", "--steps", "10",
         "--repeats", "1", "--json"],
        ("workload", "mode"), "step_time_ms", False),
    "negotiation_bench": (
        ["--tensors", "161,1000", "--steps", "20", "--repeats", "1", "--json"],
        ("tensors", "cache"), "negotiation_us_per_cycle", False),
    "synthetic_train": (
        ["--workload", "resnet50", "--scale", "0.1", "--measure-steps", "60",
         "--json"],
        ("workload",), "samples_per_sec", True),
}


def run(directory, bench, np, extra_env, extra_args):
    args, keys, value, _ = BENCHES[bench]
    args = args + extra_args.get(bench, [])
    cmd = [MPIRUN, "-np", str(np)]
    for k, v in extra_env.items():
        cmd += ["-x", f"{k}={v}"]
    cmd += [os.path.join(directory, bench)] + args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         timeout=900).stdout
    rows = {}
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if value not in row:
            continue
        rows[tuple(str(row.get(k)) for k in keys)] = float(row[value])
    if not rows:
        raise RuntimeError(f"{bench} printed no JSON rows:\n{out}")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="bench directory of build A")
    p.add_argument("--b", required=True, help="bench directory of build B")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--benches",
                   default="allreduce_bench,fusion_bench,negotiation_bench")
    p.add_argument("--env", action="append", default=[],
                   help="VAR=VALUE passed to every rank (repeatable), e.g. "
                   "HOROVOD_AUTOTUNE=1")
    p.add_argument("--args", action="append", default=[],
                   help="BENCH=ARGS: more arguments for one bench, e.g. "
                   "'synthetic_train=--until-frozen --workload many-small' "
                   "(later flags override earlier ones)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per row instead of the table")
    args = p.parse_args()
    benches = [b for b in args.benches.split(",") if b]
    for b in benches:
        if b not in BENCHES:
            sys.exit(f"--benches: unknown bench '{b}' (expected one of "
                     f"{', '.join(BENCHES)})")
    env = {}
    for item in args.env:
        if "=" not in item:
            sys.exit(f"--env: expected VAR=VALUE, got '{item}'")
        k, v = item.split("=", 1)
        env[k] = v
    extra_args = {}
    for item in args.args:
        bench, _, rest = item.partition("=")
        extra_args.setdefault(bench, []).extend(rest.split())
    results = {b: {"a": {}, "b": {}} for b in benches}
    for r in range(args.rounds):
        for bench in benches:
            order = ["a", "b"] if r % 2 == 0 else ["b", "a"]
            for side in order:
                d = args.a if side == "a" else args.b
                for key, v in run(d, bench, args.np, env, extra_args).items():
                    results[bench][side].setdefault(key, []).append(v)
        print(f"# round {r + 1}/{args.rounds} done", file=sys.stderr)
    if not args.json:
        print(f"# {args.rounds} interleaved rounds, {args.np} ranks; medians; "
              f"ratio = B / A" + (f"; env {' '.join(args.env)}" if env else ""))
        print(f"{'bench':18} {'row':34} {'metric':26} {'A':>11} {'B':>11} "
              f"{'B/A':>7}")
    for bench in benches:
        _, _, value, higher = BENCHES[bench]
        for key in results[bench]["a"]:
            a = statistics.median(results[bench]["a"][key])
            bvals = results[bench]["b"].get(key)
            if not bvals:
                continue
            b = statistics.median(bvals)
            ratio = b / a if a else float("nan")
            if args.json:
                print(json.dumps({"bench": bench, "row": list(key),
                                  "metric": value, "a": a, "b": b,
                                  "ratio": ratio,
                                  "higher_is_better": higher}))
            else:
                print(f"{bench:18} {'/'.join(key):34} {value:26} {a:11.3f} "
                      f"{b:11.3f} {ratio:7.3f}")


if __name__ == "__main__":
    main()
