"""hvdtune for PyTorch, with Horovod's interface: a Horovod script runs with
`import hvdtune.torch as hvd` in place of `import horovod.torch as hvd`.

CPU tensors; reduce ops Average, Sum, Min, Max (Adasum and Product are
refused with an error saying so); every collective spans all ranks.
"""

import hvdtune
from hvdtune import (HvdtuneError, autotune_status, cross_rank, cross_size,
                     init, is_initialized, knobs, local_rank, local_size,
                     mark_step, rank, shutdown, size, stats)
from hvdtune.torch.compression import Compression
from hvdtune.torch.functions import (
    Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async,
    allgather_object, allreduce, allreduce_, allreduce_async,
    allreduce_async_, broadcast, broadcast_, broadcast_async,
    broadcast_async_, broadcast_object, broadcast_optimizer_state,
    broadcast_parameters, grouped_allreduce, grouped_allreduce_,
    grouped_allreduce_async, grouped_allreduce_async_, poll, synchronize)
from hvdtune.torch.optimizer import DistributedOptimizer


def mpi_built():
    return True


def mpi_enabled():
    return True


def mpi_threads_supported():
    return True


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return False


def cuda_built():
    return False
