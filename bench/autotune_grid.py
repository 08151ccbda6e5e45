#!/usr/bin/python3
"""Exhaustive grid over the knobs the online autotuner tunes, then autotuned
runs, on one synthetic_train workload.

Every grid point is one synthetic_train run under mpirun with the knobs pinned
through their environment variables (HOROVOD_AUTOTUNE off); its throughput is
the median of its measured windows, and the point's value is the median over
--repeats runs. Repeats are interleaved (every point once, in a shuffled order,
then again) so that the machine's noise lands on all points alike. The
default configuration (no variable set) is measured the same way. Then
--tune-runs runs with HOROVOD_AUTOTUNE=1 --until-frozen report the frozen
configuration's throughput, as a percentage of the grid's best and of the
default.

Standard library only. Example:
  /usr/bin/python3 bench/autotune_grid.py --build build --workload many-small
"""

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def parse_list(flag, text, convert):
    try:
        values = [convert(v) for v in text.split(",")]
    except ValueError:
        sys.exit(f"autotune_grid: {flag}: invalid list '{text}'")
    if not values:
        sys.exit(f"autotune_grid: {flag}: empty list")
    return values


# Knob (synthetic_train's JSON "config") -> the variable that pins it.
KNOB_ENV = {
    "fusion_threshold": "HOROVOD_FUSION_THRESHOLD",
    "cycle_time": "HOROVOD_CYCLE_TIME",
    "cache_capacity": "HOROVOD_CACHE_CAPACITY",
    "allreduce_algorithm": "HVDTUNE_ALLREDUCE_ALGORITHM",
    "ring_segment_bytes": "HVDTUNE_RING_SEGMENT_BYTES",
    "hierarchical_allgather": "HOROVOD_HIERARCHICAL_ALLGATHER",
    "num_groups": "HVDTUNE_NUM_GROUPS",
    "pipeline_chunk_bytes": "HVDTUNE_PIPELINE_CHUNK_BYTES",
    "hierarchical_chunk_bytes": "HVDTUNE_HIERARCHICAL_CHUNK_BYTES",
    "cycle_thread_boost": "HVDTUNE_CYCLE_THREAD_BOOST",
}


def pinned_env(config):
    """Environment that pins every knob of a JSON config, autotune off."""
    env = {"HOROVOD_AUTOTUNE": "0"}
    for knob, value in config.items():
        if knob not in KNOB_ENV:
            sys.exit(f"autotune_grid: unknown knob '{knob}' in a config")
        if isinstance(value, bool):
            value = "1" if value else "0"
        env[KNOB_ENV[knob]] = f"{value:.17g}" if isinstance(value, float) \
            else str(value)
    return env


def run_trainer(args, env_vars, extra):
    """One synthetic_train run; returns its JSON row."""
    if args.fake_nodes > 1:
        cmd = [os.path.join(ROOT, "tools", "fake_nodes.sh"),
               str(args.fake_nodes), str(args.np // args.fake_nodes)]
    else:
        cmd = [os.path.join(ROOT, "tools", "mpirun.sh"), "-np", str(args.np)]
    env = dict(os.environ)
    for key, value in env_vars.items():
        env[key] = value
        cmd += ["-x", key]
    cmd += [args.trainer, "--workload", args.workload, "--scale",
            str(args.scale), "--json"] + extra + args.trainer_args
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          check=False)
    rows = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not rows:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(f"autotune_grid: run failed (exit {proc.returncode}): "
                 + " ".join(f"{k}={v}" for k, v in env_vars.items()))
    return json.loads(rows[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="build directory holding bench/synthetic_train")
    p.add_argument("--workload", default="many-small")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--fake-nodes", type=int, default=1,
                   help="emulated nodes (tools/fake_nodes.sh: shared memory "
                        "inside a node, TCP across); --np ranks split evenly")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tune-runs", type=int, default=3)
    p.add_argument("--fusion-mib", default="1,4,16,64,128",
                   help="fusion thresholds in MiB (comma-separated)")
    p.add_argument("--cycle-ms", default="0.5,1,2,5,10",
                   help="cycle times in ms (comma-separated)")
    p.add_argument("--algorithms", default="",
                   help="allreduce algorithms (default: all in this build)")
    p.add_argument("--cache", default="on,off",
                   help="response cache settings: on (1024 entries), off")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--measure-steps", type=int, default=20)
    p.add_argument("--json-out", default="",
                   help="also write every run's JSON row to this file")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--confirm", type=int, default=5,
                   help="rounds re-measuring the grid best, every frozen "
                        "configuration and the default side by side "
                        "(0: skip)")
    p.add_argument("trainer_args", nargs="*",
                   help="after --: extra synthetic_train flags")
    args = p.parse_args()
    args.trainer = os.path.join(args.build, "bench", "synthetic_train")
    if not os.access(args.trainer, os.X_OK):
        sys.exit(f"autotune_grid: --build: no {args.trainer} "
                 "(build it first: tools/build.sh)")
    if args.repeats < 1 or args.tune_runs < 0:
        sys.exit("autotune_grid: --repeats must be >= 1, --tune-runs >= 0")
    if args.fake_nodes < 1 or args.np % args.fake_nodes:
        sys.exit(f"autotune_grid: --fake-nodes {args.fake_nodes} must be >= 1 "
                 f"and divide --np {args.np}")

    fusion = parse_list("--fusion-mib", args.fusion_mib, float)
    cycle = parse_list("--cycle-ms", args.cycle_ms, float)
    known = subprocess.run([args.trainer, "--list-algorithms"],
                           capture_output=True, text=True,
                           check=True).stdout.split()
    algorithms = (parse_list("--algorithms", args.algorithms, str)
                  if args.algorithms else known)
    for a in algorithms:
        if a not in known:
            sys.exit(f"autotune_grid: --algorithms: unknown '{a}' "
                     f"(this build has: {' '.join(known)})")
    caches = parse_list("--cache", args.cache, str)
    for c in caches:
        if c not in ("on", "off"):
            sys.exit(f"autotune_grid: --cache: invalid '{c}' (on, off)")

    points = list(itertools.product(fusion, cycle, algorithms, caches))
    fixed = ["--warmup-steps", str(args.warmup_steps), "--measure-steps",
             str(args.measure_steps)]
    where = (f"{args.fake_nodes} emulated nodes x "
             f"{args.np // args.fake_nodes} ranks" if args.fake_nodes > 1
             else f"{args.np} ranks")
    print(f"# {args.workload} x{args.scale} on {where}: "
          f"{len(points)} grid points + default, {args.repeats} repeats, "
          f"then {args.tune_runs} autotuned runs", flush=True)
    log = open(args.json_out, "w") if args.json_out else None
    rng = random.Random(args.seed)
    results = {pt: [] for pt in points}
    default = []
    start = time.time()
    for rep in range(args.repeats):
        order = points + ["default"]
        rng.shuffle(order)
        for pt in order:
            if pt == "default":
                env = {"HOROVOD_AUTOTUNE": "0"}
            else:
                f, c, a, cache = pt
                env = {"HOROVOD_AUTOTUNE": "0",
                       "HOROVOD_FUSION_THRESHOLD": str(int(f * MIB)),
                       "HOROVOD_CYCLE_TIME": f"{c:g}",
                       "HVDTUNE_ALLREDUCE_ALGORITHM": a,
                       "HOROVOD_CACHE_CAPACITY":
                           "1024" if cache == "on" else "0"}
            row = run_trainer(args, env, fixed)
            if log:
                log.write(json.dumps({"point": str(pt), "row": row}) + "\n")
            (default if pt == "default" else results[pt]).append(
                row["samples_per_sec"])
        print(f"# repeat {rep + 1}/{args.repeats} done after "
              f"{time.time() - start:.0f} s", flush=True)

    median = {pt: statistics.median(v) for pt, v in results.items()}
    best = max(points, key=lambda pt: median[pt])
    default_med = statistics.median(default)
    print(f"\n{'fusion_MiB':>10} {'cycle_ms':>8} {'algorithm':>10} "
          f"{'cache':>5} {'samples/s':>10}  runs")
    for pt in sorted(points):
        f, c, a, cache = pt
        mark = "  <- best" if pt == best else ""
        runs = " ".join(f"{v:.0f}" for v in results[pt])
        print(f"{f:>10g} {c:>8g} {a:>10} {cache:>5} {median[pt]:>10.1f}  "
              f"{runs}{mark}")
    print(f"\ndefault (no variable set): {default_med:.1f} samples/s "
          f"(runs {' '.join(f'{v:.0f}' for v in default)})")
    print(f"grid best: fusion {best[0]:g} MiB, cycle {best[1]:g} ms, "
          f"{best[2]}, cache {best[3]}: {median[best]:.1f} samples/s",
          flush=True)

    tuned = []
    frozen_configs = []
    for i in range(args.tune_runs):
        # Each tuning run from scratch: the config store would start the
        # second run from the first one's result.
        row = run_trainer(args, {"HOROVOD_AUTOTUNE": "1",
                                 "HVDTUNE_AUTOTUNE_STORE": "off"},
                          ["--until-frozen", "--measure-steps",
                           str(max(args.measure_steps, 30))])
        if log:
            log.write(json.dumps({"point": "autotune", "row": row}) + "\n")
        tuned.append(row["samples_per_sec"])
        frozen_configs.append(row["config"])
        at, cfg = row["autotune"], row["config"]
        print(f"autotune run {i + 1}: {at['phase']} after {at['samples']} "
              f"samples, {row['steps']} steps: "
              f"{row['samples_per_sec']:.1f} samples/s with fusion "
              f"{cfg['fusion_threshold'] / MIB:.2f} MiB, cycle "
              f"{cfg['cycle_time']:.3g} ms, {cfg['allreduce_algorithm']}, "
              f"cache {cfg['cache_capacity']}, ring segment "
              f"{cfg['ring_segment_bytes']}", flush=True)
    if tuned:
        t = statistics.median(tuned)
        print(f"\nautotuned (median of {len(tuned)}): {t:.1f} samples/s = "
              f"{100 * t / median[best]:.1f}% of the grid best, "
              f"{100 * t / default_med:.1f}% of the default")
        print(f"targets: >= 95% of grid best: "
              f"{'PASS' if t >= 0.95 * median[best] else 'MISS'}; "
              f">= default: {'PASS' if t >= default_med else 'MISS'}")
    if args.confirm > 0 and frozen_configs:
        # The grid's best median is the maximum of many noisy medians and so
        # biased upwards; re-measure it beside the frozen configurations and
        # the default, interleaved, before comparing.
        f, c, a, cache = best
        candidates = {"grid best": {
            "HOROVOD_AUTOTUNE": "0",
            "HOROVOD_FUSION_THRESHOLD": str(int(f * MIB)),
            "HOROVOD_CYCLE_TIME": f"{c:g}",
            "HVDTUNE_ALLREDUCE_ALGORITHM": a,
            "HOROVOD_CACHE_CAPACITY": "1024" if cache == "on" else "0"},
            "default": {"HOROVOD_AUTOTUNE": "0"}}
        for i, cfg in enumerate(frozen_configs):
            candidates[f"frozen {i + 1}"] = pinned_env(cfg)
        confirm = {name: [] for name in candidates}
        for rnd in range(args.confirm):
            order = list(candidates)
            rng.shuffle(order)
            for name in order:
                row = run_trainer(args, candidates[name], fixed)
                if log:
                    log.write(json.dumps({"point": "confirm " + name,
                                          "row": row}) + "\n")
                confirm[name].append(row["samples_per_sec"])
        med = {n: statistics.median(v) for n, v in confirm.items()}
        print(f"\nconfirmation, {args.confirm} interleaved rounds (median):")
        for name, v in confirm.items():
            print(f"  {name:>10}: {med[name]:8.1f} samples/s  (runs "
                  f"{' '.join(f'{x:.0f}' for x in v)})")
        frozen = statistics.median(
            [med[n] for n in med if n.startswith("frozen")])
        print(f"frozen configurations (median): {frozen:.1f} samples/s = "
              f"{100 * frozen / med['grid best']:.1f}% of the grid best, "
              f"{100 * frozen / med['default']:.1f}% of the default")
        print(f"targets (confirmed): >= 95% of grid best: "
              f"{'PASS' if frozen >= 0.95 * med['grid best'] else 'MISS'}; "
              f">= default: {'PASS' if frozen >= med['default'] else 'MISS'}")
    print(f"# total {time.time() - start:.0f} s")
    if log:
        log.close()


if __name__ == "__main__":
    main()
