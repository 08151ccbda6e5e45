#!/usr/bin/env python3
"""binding_overhead: the Python binding's cost per training step, on the
tensor sets fusion_bench uses, to set beside fusion_bench's `fused` step
time (the C++ API on the same tensors, same default knobs):

    tools/mpirun.sh -np 2 /usr/bin/python3 bench/binding_overhead.py --workload many-small
    tools/mpirun.sh -np 2 build/bench/fusion_bench --workloads many-small --modes fused

A step enqueues every tensor (backward order, float32 allreduce, average)
and waits for all, as fusion_bench does. Three ways in: `core` (hvdtune._core
directly on numpy arrays), `numpy` (hvdtune.allreduce_async into a
preallocated output) and `torch` (hvdtune.torch.allreduce_async_ in place on
tensors). Reported: the median over repeats of the slowest rank's mean step
time, and the mean time this rank's Python spent enqueueing one tensor.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

import hvdtune
import hvdtune.torch as hvd_torch

HERE = os.path.dirname(os.path.abspath(__file__))


def tensor_set(workload, scale):
    if workload == "many-small":
        return [1024] * 1000  # fusion_bench's: 1,000 tensors of 4 KiB
    counts = []
    with open(os.path.join(HERE, "data", workload + ".txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            dims = [int(d) for d in line.split()[1:]]
            counts.append(max(int(np.prod(dims) * scale), 1))
    return list(reversed(counts))  # backward order


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="many-small",
                   help="many-small, or a bench/data/<name>.txt shape file")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--modes", default="core,numpy,torch")
    args = p.parse_args()
    counts = tensor_set(args.workload, args.scale)
    modes = args.modes.split(",")
    hvdtune.init()
    rank = hvdtune.rank()
    names = ["t%d" % i for i in range(len(counts))]
    arrays = [np.full(c, rank + 1, np.float32) for c in counts]
    outputs = [np.empty_like(a) for a in arrays]
    tensors = [torch.full((c,), float(rank + 1)) for c in counts]
    core = hvdtune._core

    def step_core():
        hs = [core.allreduce_async(n, a, o, "average")
              for n, a, o in zip(names, arrays, outputs)]
        t = time.perf_counter()
        for h in hs:
            h.wait()
        return t

    def step_numpy():
        hs = [hvdtune.allreduce_async(a, hvdtune.Average, n, output=o)
              for n, a, o in zip(names, arrays, outputs)]
        t = time.perf_counter()
        for h in hs:
            hvdtune.synchronize(h)
        return t

    def step_torch():
        hs = [hvd_torch.allreduce_async_(x, name=n, op=hvd_torch.Average)
              for n, x in zip(names, tensors)]
        t = time.perf_counter()
        for h in hs:
            hvd_torch.synchronize(h)
        return t

    fns = {"core": step_core, "numpy": step_numpy, "torch": step_torch}
    step_s = {m: [] for m in modes}
    enqueue_s = {m: [] for m in modes}
    for r in range(args.repeats):
        for k in range(len(modes)):
            mode = modes[(k + r) % len(modes)]
            for _ in range(args.warmup):
                fns[mode]()
            hvdtune.allreduce(np.zeros(1, np.float32), name="barrier")
            start = time.perf_counter()
            enq = 0.0
            for _ in range(args.steps):
                s = time.perf_counter()
                enq += fns[mode]() - s
            seconds = (time.perf_counter() - start) / args.steps
            slowest = hvdtune.allreduce(np.array([seconds]), op=hvdtune.Max,
                                        name="slowest")[0]
            step_s[mode].append(float(slowest))
            enqueue_s[mode].append(enq / args.steps / len(counts))
    if rank == 0:
        for mode in modes:
            print(json.dumps({
                "workload": args.workload, "mode": "python_" + mode,
                "tensors": len(counts), "bytes": 4 * sum(counts),
                "ranks": hvdtune.size(),
                "step_ms": float("%.6g" % (1e3 * statistics.median(
                    step_s[mode]))),
                "enqueue_us_per_tensor": float("%.6g" % (1e6 * statistics.median(
                    enqueue_s[mode])))
            }), flush=True)
    hvdtune.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
