#!/usr/bin/env python3
"""A torch.distributed DDP script on hvdtune: the usual DDP code, with
backend="hvdtune" and `import hvdtune.torch`. Started by torchrun (the
ranks and the store are torchrun's; the runtime runs on the Gloo engine)
or by mpirun (the ranks come from MPI):

    /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 \
        examples/pytorch_ddp.py
    tools/mpirun.sh -np 2 /usr/bin/python3 examples/pytorch_ddp.py \
        --init-method file://$PWD/ddp.store

HOROVOD_AUTOTUNE=1 and every other hvdtune variable apply as to a Horovod
job: DDP's gradient buckets are the runtime's tensors.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import hvdtune
import hvdtune.torch  # noqa: F401  registers the "hvdtune" backend


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--init-method", default="env://",
                        help="where torch.distributed's store is")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--bucket-cap-mb", type=float, default=25,
                        help="DDP's bucket size")
    parser.add_argument("--hidden", type=int, default=64,
                        help="the hidden layer's width")
    args = parser.parse_args()
    if "OMPI_COMM_WORLD_RANK" in os.environ:  # mpirun: MPI's ranks
        dist.init_process_group(
            "hvdtune", init_method=args.init_method,
            rank=int(os.environ["OMPI_COMM_WORLD_RANK"]),
            world_size=int(os.environ["OMPI_COMM_WORLD_SIZE"]))
    else:  # torchrun: its RANK, WORLD_SIZE and store (env://)
        dist.init_process_group("hvdtune", init_method=args.init_method)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, args.hidden), nn.ReLU(),
                              nn.Linear(args.hidden, 4)),
                bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(rank)
    for step in range(args.steps):
        x = torch.randn(32, 32, generator=data)
        y = x[:, :4].sum(1, keepdim=True).repeat(1, 4)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # DDP's buckets go to the hvdtune runtime here
        opt.step()
    # Every rank holds the same parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(g, flat) for g in gathered)
    if rank == 0:
        print("rank 0: loss %.4f after %d steps on %d ranks; parameters "
              "agree" % (loss.item(), args.steps, dist.get_world_size()))
        status = hvdtune.autotune_status()
        print("autotune: phase %s, %d samples, source %s" %
              (status["phase"], status["samples"], status["source"]))
        # The store knows this model by these sizes (its fingerprint).
        print("DDP buckets (bytes): %s" %
              model._get_ddp_logging_data().get("bucket_sizes", "?"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
