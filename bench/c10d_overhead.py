#!/usr/bin/env python3
"""c10d_overhead: the torch.distributed backend's own cost per bucket. The
same tensor is allreduced (sum, in place) through dist.all_reduce on the
"hvdtune" process group, the way DDP submits a bucket (async, then the
Work's future waited), and through hvdtune.torch.allreduce_ directly, in
interleaved rounds on the same runtime:

    tools/mpirun.sh -np 2 /usr/bin/python3 bench/c10d_overhead.py

Printed per tensor size: the median over rounds of each way's mean time per
call (the slowest rank's), and their difference, the backend's cost.
"""

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist

import hvdtune
import hvdtune.torch as hvd
from hvdtune.torch.distributed import mpi_init_method


def slowest(seconds):
    return hvdtune._core.mpi_max(seconds)


def time_calls(fn, calls):
    hvdtune._core.mpi_barrier()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return slowest((time.perf_counter() - start) / calls)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="256,262144",
                        help="float32 elements per tensor")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    dist.init_process_group("hvdtune", init_method=mpi_init_method(),
                            rank=hvd.rank(), world_size=hvd.size())
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        t = torch.ones(n)

        def backend():
            dist.all_reduce(t, async_op=True).get_future().wait()

        def direct():
            hvd.allreduce_(t, op=hvd.Sum, name="c10d_overhead.direct")

        ways = {"dist.all_reduce (hvdtune backend)": backend,
                "hvdtune.torch.allreduce_": direct}
        for fn in ways.values():  # warm-up: names cached, buffers touched
            time_calls(fn, 20)
        samples = {k: [] for k in ways}
        for r in range(args.rounds):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            for k in order:
                samples[k].append(time_calls(ways[k], args.calls))
        med = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
        b, d = med["dist.all_reduce (hvdtune backend)"], med[
            "hvdtune.torch.allreduce_"]
        rows.append({"elements": n, "backend_us": b, "direct_us": d,
                     "overhead_us": b - d, "ratio": b / d})
    if hvd.rank() == 0:
        if args.json:
            print(json.dumps(rows))
        print("| float32 elements | dist.all_reduce (hvdtune), us/call | "
              "hvdtune.torch.allreduce_, us/call | backend's cost, us | "
              "ratio |")
        print("|---|---|---|---|---|")
        for row in rows:
            print("| %d | %.1f | %.1f | %.1f | %.3f |" % (
                row["elements"], row["backend_us"], row["direct_us"],
                row["overhead_us"], row["ratio"]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
