"""DDP (and DDP + ZeroRedundancyOptimizer) trains to the same parameters on
the "hvdtune" backend as on gloo: the same script, seeds and data, only the
backend changed. Each backend trains in turn in the same processes (a fresh
process group each); rank 0 checks the largest relative difference of every
parameter after the steps.

    mpirun -np N python3 c10d_ddp_train.py [--zero] [--steps 30]
    python3 torchrun.py -n N -- c10d_ddp_train.py [--zero] [--steps 30]
"""

import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from c10d_launch import init_process_group


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)  # buffers: DDP broadcasts them
        self.fc1 = nn.Linear(8 * 6 * 6, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def train(backend, args):
    init_process_group(backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    net = Net()
    initial = [p.detach().clone() for p in net.parameters()]
    model = DDP(net, bucket_cap_mb=args.bucket_mb)
    if args.zero:
        opt = ZeroRedundancyOptimizer(model.parameters(),
                                      optimizer_class=torch.optim.SGD,
                                      lr=0.05, momentum=0.9)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(args.steps):
        x = torch.randn(16, 3, 8, 8, generator=data)
        y = torch.randint(0, 10, (16,), generator=data)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    params = [p.detach().clone() for p in model.module.parameters()]
    dist.barrier()
    dist.destroy_process_group()
    return initial, params, rank, size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zero", action="store_true")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--bucket-mb", type=float, default=0.01,
                        help="small buckets: several per step")
    args = parser.parse_args()
    torch.set_num_threads(1)
    # hvdtune first: under torchrun, the first group is made exactly as a
    # script's only one is (c10d_launch).
    initial, tuned, rank, size = train("hvdtune", args)
    _, reference, _, _ = train("gloo", args)
    worst = 0.0
    for a, b in zip(reference, tuned):
        diff = ((a - b).abs().max() / a.abs().max().clamp(min=1e-12)).item()
        worst = max(worst, diff)
    # Training moved the parameters (the comparison means something).
    moved = max((p - q).abs().max().item()
                for p, q in zip(tuned, initial)) > 1e-3
    if rank == 0:
        print("%s on %d ranks, %d steps: max relative difference %.3g" %
              ("DDP + ZeroRedundancyOptimizer" if args.zero else "DDP", size,
               args.steps, worst))
    if not moved or worst > 1e-4:
        print("rank %d: FAILED (max relative difference %.3g > 1e-4)" %
              (rank, worst))
        sys.exit(1)


if __name__ == "__main__":
    main()
