#!/usr/bin/env python3
"""torch_allreduce_bench: PyTorch's own allreduce (torch.distributed, gloo
backend) beside hvdtune's and raw MPI_Allreduce, in one job on the same
ranks and the same buffers, all three called from Python:

    tools/mpirun.sh -np 2 /usr/bin/python3 bench/torch_allreduce_bench.py \\
        --min-bytes 4K --max-bytes 64M --step-factor 4 --repeats 5 --json

Methodology as allreduce_bench (bench/README.md): per size and repeat the
three implementations' timed loops alternate in a rotating order; each loop
times `iters` back-to-back synchronous calls after `warmup` untimed ones and
its time is the slowest rank's; reported times are medians over repeats;
busbw = algbw * 2(n-1)/n. The first loop of every implementation checks the
sum. hvdtune's loops each run in a fresh runtime (init/shutdown) and the
others run while none is alive: an idle runtime's cycle thread would take
CPU from them. JSON rows: allreduce_bench's, algorithm mpi_raw, the
runtime's algorithm (native, ...) and torch_gloo.
"""

import argparse
import json
import os
import re
import socket
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import hvdtune


def byte_count(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    if not m:
        raise argparse.ArgumentTypeError(
            "invalid value '%s' (expected a byte count like 4096, 4K, 16M, 1G)"
            % text)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20,
                              "G": 1 << 30}[m.group(2)]


def parse_args():
    p = argparse.ArgumentParser(
        description="torch.distributed (gloo) allreduce beside hvdtune and "
        "raw MPI, float32 sum")
    p.add_argument("--min-bytes", type=byte_count, default=4 << 10)
    p.add_argument("--max-bytes", type=byte_count, default=64 << 20)
    p.add_argument("--step-factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=0,
                   help="calls per timed loop; 0 = ~64 MiB per loop, 3..100")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", action="store_true",
                   help="one JSON object per row (allreduce_bench's format)")
    args = p.parse_args()
    if args.min_bytes < 4 or args.min_bytes > args.max_bytes:
        p.error("--min-bytes must be at least 4 and at most --max-bytes")
    if args.step_factor < 2 or args.warmup < 1 or args.repeats < 1 or \
            args.iters < 0:
        p.error("--step-factor >= 2, --warmup >= 1, --repeats >= 1, "
                "--iters >= 0")
    return args


def iters_for(args, nbytes):
    if args.iters > 0:
        return args.iters
    return min(max((64 << 20) // nbytes, 3), 100)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bench:

    def __init__(self, args, rank, size):
        self.args, self.rank, self.size = args, rank, size
        count = args.max_bytes // 4
        i = torch.arange(count, dtype=torch.int64)
        self.input = ((rank + 1) + (i % 7)).to(torch.float32)
        self.output = torch.zeros(count, dtype=torch.float32)
        # gloo reduces in place: its work buffer is zero while timing, so
        # repeated sums neither overflow nor change speed.
        self.work = torch.zeros(count, dtype=torch.float32)
        self.sizes = []
        b = args.min_bytes
        while b <= args.max_bytes:
            self.sizes.append(b - b % 4)
            b *= args.step_factor
        self.algorithm = None
        self.samples = {}

    def verify(self, out, count, who):
        i = torch.tensor([0, count // 2, count - 1])
        want = self.size * (self.size + 1) / 2 + self.size * (i % 7)
        if not torch.equal(out[i], want.to(torch.float32)):
            raise RuntimeError("%s returned a wrong sum at %d bytes" %
                               (who, count * 4))

    def time_loop(self, iters, op):
        hvdtune._core.mpi_barrier()
        start = time.perf_counter()
        for _ in range(iters):
            op()
        seconds = (time.perf_counter() - start) / iters
        return hvdtune._core.mpi_max(seconds)

    def time_raw(self, count, iters, verify):
        inp, out = self.input[:count], self.output[:count]

        def op():
            hvdtune._core.mpi_allreduce_sum(inp, out)

        if verify:
            out.zero_()
            op()
            self.verify(out, count, "mpi_raw")
        for _ in range(self.args.warmup):
            op()
        return self.time_loop(iters, op)

    def time_gloo(self, count, iters, verify):
        if verify:
            buf = self.input[:count].clone()
            dist.all_reduce(buf)
            self.verify(buf, count, "torch_gloo")
        work = self.work[:count]

        def op():
            dist.all_reduce(work)

        for _ in range(self.args.warmup):
            op()
        return self.time_loop(iters, op)

    def time_hvdtune(self, count, iters, verify):
        hvdtune.init()
        self.algorithm = hvdtune.knobs()["allreduce_algorithm"]
        inp, out = self.input[:count], self.output[:count]
        name = "torch_allreduce_bench.%d" % count

        def op():
            hvdtune.allreduce(inp, op=hvdtune.Sum, name=name, output=out)

        if verify:
            out.zero_()
            op()
            self.verify(out, count, "hvdtune")
        else:
            op()  # also fills the response cache
        for _ in range(self.args.warmup - 1):
            op()
        seconds = self.time_loop(iters, op)
        hvdtune.shutdown()
        return seconds

    def run(self):
        impls = [("mpi_raw", self.time_raw), ("hvdtune", self.time_hvdtune),
                 ("torch_gloo", self.time_gloo)]
        for nbytes in self.sizes:
            count = nbytes // 4
            iters = iters_for(self.args, nbytes)
            for r in range(self.args.repeats):
                for k in range(len(impls)):
                    name, fn = impls[(k + r) % len(impls)]
                    self.samples.setdefault((name, nbytes), []).append(
                        fn(count, iters, r == 0))

    def rows(self):
        for nbytes in self.sizes:
            for name in ("mpi_raw", "hvdtune", "torch_gloo"):
                seconds = statistics.median(self.samples[(name, nbytes)])
                algbw = nbytes / seconds / 1e9
                yield {
                    "algorithm": self.algorithm if name == "hvdtune" else name,
                    "bytes": nbytes,
                    "time_us": seconds * 1e6,
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * 2 * (self.size - 1) / self.size,
                }

    def print(self):
        rows = list(self.rows())
        if self.args.json:
            for row in rows:
                # 6 significant digits, as allreduce_bench's JsonLine.
                print(json.dumps({
                    k: float("%.6g" % v) if isinstance(v, float) else v
                    for k, v in row.items()
                }))
            return
        print("# torch_allreduce_bench: %d ranks, float32, sum, median of %d "
              "repeats; busbw in GB/s; ratio = busbw / mpi_raw busbw" %
              (self.size, self.args.repeats))
        print("%12s  %10s  %10s %6s  %10s %6s" %
              ("size(B)", "mpi_raw", self.algorithm, "ratio", "torch_gloo",
               "ratio"))
        for i in range(0, len(rows), 3):
            raw, hvd, gloo = rows[i:i + 3]
            print("%12d  %10.3f  %10.3f %6.2f  %10.3f %6.2f" %
                  (raw["bytes"], raw["busbw_gbps"], hvd["busbw_gbps"],
                   hvd["busbw_gbps"] / raw["busbw_gbps"], gloo["busbw_gbps"],
                   gloo["busbw_gbps"] / raw["busbw_gbps"]))
        sys.stdout.flush()


def main():
    args = parse_args()
    hvdtune.init()  # brings MPI up; it stays up for the raw loops
    rank, size = hvdtune.rank(), hvdtune.size()
    port = hvdtune.broadcast(np.array([free_port()], np.int64), 0,
                             name="bench.port")
    hvdtune.shutdown()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(int(port[0]))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    bench = Bench(args, rank, size)
    bench.run()
    if rank == 0:
        bench.print()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
