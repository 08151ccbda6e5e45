"""hvdtune for PyTorch, with Horovod's interface: a Horovod script runs with
`import hvdtune.torch as hvd` in place of `import horovod.torch as hvd`.

CPU and CUDA tensors (CUDA on the runtime's NCCL backend, or staged through
host memory where it has none; docs/python.md). A collective spans all
ranks, or the ranks of a process set added with add_process_set (each such
set has a runtime of its own). Refused with an error that says so and names
the alternative: Adasum. Elastic training: hvd.elastic (docs/elastic.md).
"""

import os

import hvdtune
from hvdtune import (HvdtuneError, autotune_status, cross_rank, cross_size,
                     is_initialized, knobs, local_rank, local_size,
                     mark_step, rank, shutdown, size, stats)
from hvdtune import _core
from hvdtune.torch.compression import Compression
from hvdtune.torch._common import (Adasum, Average, HorovodInternalError,
                                   Max, Min, Product, Sum, poll, synchronize)
from hvdtune.torch.allreduce import (allreduce, allreduce_, allreduce_async,
                                     allreduce_async_, grouped_allreduce,
                                     grouped_allreduce_,
                                     grouped_allreduce_async,
                                     grouped_allreduce_async_)
from hvdtune.torch.functions import (
    allgather, allgather_async, allgather_object, alltoall, alltoall_async,
    barrier, broadcast, broadcast_, broadcast_async, broadcast_async_,
    broadcast_object, broadcast_optimizer_state, broadcast_parameters,
    grouped_allgather, grouped_allgather_async, grouped_reducescatter,
    grouped_reducescatter_async, join, reducescatter, reducescatter_async,
    sparse_allreduce_async, start_timeline, stop_timeline)
from hvdtune.torch.process_sets import (ProcessSet, add_process_set,
                                        global_process_set,
                                        remove_process_set)
from hvdtune.torch.optimizer import DistributedOptimizer
from hvdtune.torch.sync_batch_norm import SyncBatchNorm
from hvdtune.torch import distributed as _distributed
from hvdtune.torch import elastic  # noqa: E402  (hvd.elastic.run, ...)

# torch.distributed's "hvdtune" backend: dist.init_process_group("hvdtune").
_distributed.register()

InvalidArgumentError = _core.InvalidArgumentError


def init(comm=None, process_sets=None, tune_num_groups=False):
    """Starts the runtime on this rank (every rank calls it). Horovod's
    arguments are accepted where they describe what hvdtune does: `comm`
    None, or the ranks (or a communicator) of the whole job; `process_sets`
    None, "dynamic" (accepted; sets can always be added and removed after
    init), or sets (ProcessSets or lists of ranks) to add as
    add_process_set does."""
    hvdtune.init(tune_num_groups)
    n = hvdtune.size()
    if comm is not None:
        if hasattr(comm, "Get_size"):
            ranks = comm.Get_size()
            whole = ranks == n
        else:
            ranks = sorted(int(r) for r in comm)
            whole = ranks == list(range(n))
        if not whole:
            raise InvalidArgumentError(
                "init(comm=...): hvdtune runs on all %d ranks of the job "
                "(MPI_COMM_WORLD), got %r; start a job of just those ranks "
                "instead" % (n, ranks))
    if process_sets is not None and process_sets != "dynamic":
        for ps in process_sets:
            _check = ps if isinstance(ps, ProcessSet) else ProcessSet(ps)
            add_process_set(_check)


# Horovod's build introspection, answered for this build of hvdtune.torch.
def _engine():
    """The running runtime's engine; before init(), the one the environment
    asks for (the runtime checks the variables strictly at init)."""
    if is_initialized():
        return _core.engine()
    env = os.environ
    if (env.get("HOROVOD_GLOO", "").lower() in ("1", "true")
            or env.get("HOROVOD_CONTROLLER", "").lower() == "gloo"
            or env.get("HOROVOD_CPU_OPERATIONS", "").lower() == "gloo"):
        return "gloo"
    return "mpi"


def mpi_built():
    """The MPI engine is always built."""
    return True


def mpi_enabled():
    """The job runs on the MPI engine (mpirun), not Gloo."""
    return _engine() == "mpi"


def mpi_threads_supported():
    """Whether MPI runs with MPI_THREAD_MULTIPLE (init() first)."""
    return _core.mpi_threads_supported()


def gloo_built():
    """This build has the Gloo engine (hvd-tune run --gloo)."""
    return bool(_core.gloo_built())


def gloo_enabled():
    """The job runs on the Gloo engine (HOROVOD_GLOO=1)."""
    return _engine() == "gloo"


def nccl_built():
    """The loaded NCCL's version code (e.g. 22803 for 2.28.3, true) when
    hvdtune was built with its NCCL backend, else 0. Whether a job's CUDA
    tensors actually run on NCCL is has_nccl()."""
    return _core.nccl_version() if _core.nccl_built() else 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    """True when hvdtune was built with CUDA (and so its NCCL backend).
    CUDA tensors are accepted either way: without it (or without a GPU per
    rank) they are staged through host memory."""
    return bool(_core.nccl_built())


def has_nccl(process_set=None):
    """True when this job's runtime (of `process_set`, the whole job by
    default) runs CUDA tensors on NCCL; False when they are staged through
    host memory (nccl_unavailable() says why)."""
    return _core.has_nccl(_set_id(process_set))


def nccl_unavailable(process_set=None):
    """Why has_nccl() is False ("" when it is True)."""
    return _core.nccl_unavailable(_set_id(process_set))


def _set_id(process_set):
    return 0 if process_set is None else process_set.process_set_id


def rocm_built():
    return False
