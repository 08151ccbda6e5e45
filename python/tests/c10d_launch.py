"""How the torch.distributed tests join their job, whichever launcher
started it: under torchrun, torch's env:// (the ranks and store torchrun
gives); under mpirun, a tcp:// address rank 0 picks, with MPI's ranks.

    python3 torchrun.py -n N -- SCRIPT ARGS...    (torchrun on a free port)
"""

import os

import torch.distributed as dist

import hvdtune
import hvdtune.torch  # noqa: F401  registers the backend

from hvdtune.torch.distributed import mpi_init_method


def under_torchrun():
    return "TORCHELASTIC_RUN_ID" in os.environ


_groups = 0


def init_process_group(backend, **kwargs):
    global _groups
    _groups += 1
    if under_torchrun() and _groups == 1:
        dist.init_process_group(backend, **kwargs)
    elif under_torchrun():
        # torch 1.13 cannot make a second default group on torchrun's store
        # (its store-based barrier waits for a count of exactly the world
        # size, and the first group's arrivals are counted already): a later
        # group gets keys of its own.
        store = dist.PrefixStore(
            "c10d_launch/%d" % _groups,
            dist.TCPStore(os.environ["MASTER_ADDR"],
                          int(os.environ["MASTER_PORT"]),
                          int(os.environ["WORLD_SIZE"]), False))
        dist.init_process_group(backend, store=store,
                                rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]),
                                **kwargs)
    else:
        dist.init_process_group(backend, init_method=mpi_init_method(),
                                rank=hvdtune.rank(),
                                world_size=hvdtune.size(), **kwargs)
