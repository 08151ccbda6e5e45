"""torch.distributed's "hvdtune" backend: `dist.init_process_group("hvdtune")`
runs a torch.distributed script (DDP, ZeroRedundancyOptimizer, the
collectives of torch.distributed) on the hvdtune runtime, so its
collectives are negotiated, fused and autotuned like a Horovod job's, with
the same configuration store, metrics and timeline.

`import hvdtune.torch` registers the backend (register() does it again, and
does nothing when it is registered). Start the job with mpirun or
`hvd-tune run`: the runtime takes its ranks from MPI, and the rank and world
size torch.distributed is given must be the same.
"""

import os

import hvdtune
from hvdtune import _core

BACKEND = "hvdtune"

# Process sets of torch.distributed groups smaller than the job: ids above
# those hvdtune.torch.add_process_set hands out.
_SET_ID_BASE = 1 << 24

_MPI_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                  "MPI_LOCALNRANKS")


def _launched_by_mpi():
    return any(v in os.environ for v in _MPI_VARIABLES)


def _launched_by_torchrun():
    return "TORCHELASTIC_RUN_ID" in os.environ and not _launched_by_mpi()


def _group_prefix(group_id):
    return "c10d.%s." % (group_id or "0")


def _set_id(group_id):
    try:
        number = int(group_id)
    except (TypeError, ValueError):
        number = sum(ord(c) * 31**i for i, c in enumerate(str(group_id)))
    return _SET_ID_BASE + number % (1 << 24)


def _create(options, pg_options=None):
    """The creator torch.distributed calls (its extended form): a process
    group on the runtime of the whole job, or on a process set of the
    group's ranks."""
    del pg_options
    if _launched_by_torchrun():
        raise RuntimeError(
            "hvdtune backend: torchrun needs the Gloo engine: this build's "
            "runtime meets its ranks through MPI, and under torchrun Open MPI "
            "makes every process a job of one rank of its own. Start the job "
            "with `mpirun -np N python script.py` (or `hvd-tune run`) instead")
    from hvdtune import _c10d  # torch.distributed is imported by now
    hvdtune.init()
    rank, size = options.group_rank, options.group_size
    ranks = list(options.global_ranks_in_group or [])
    world = hvdtune.size()
    set_id = 0
    if ranks and ranks != list(range(world)):
        set_id = _set_id(options.group_id)
        _core.add_process_set(set_id, sorted(ranks))
    elif size != world or rank != hvdtune.rank():
        raise RuntimeError(
            "hvdtune backend: torch.distributed says rank %d of %d, but the "
            "job started by MPI has rank %d of %d: let init_process_group "
            "take rank and world_size from the MPI launcher (e.g. "
            "OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE)" %
            (rank, size, hvdtune.rank(), world))
    return _c10d.ProcessGroupHvdtune(_core.runtime_ref(set_id), rank, size,
                                     _group_prefix(options.group_id))


def mpi_init_method():
    """An `init_method` for init_process_group that every rank of an MPI
    job agrees on (collective): rank 0 picks a free port of 127.0.0.1 and
    the runtime broadcasts it. For jobs on one machine (tests, benchmarks);
    across machines pass torch's usual env:// or tcp:// address."""
    import socket

    import numpy as np
    hvdtune.init()
    port = np.zeros(1, dtype=np.int64)
    if hvdtune.rank() == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port[0] = s.getsockname()[1]
    port = hvdtune.broadcast(port, root_rank=0,
                             name="hvdtune.torch.distributed.port")
    return "tcp://127.0.0.1:%d" % int(port[0])


def available():
    """Whether this build has the backend (built where libtorch-dev was
    found) and torch.distributed is there."""
    try:
        import torch.distributed as dist
        if not dist.is_available():
            return False
        from hvdtune import _c10d  # noqa: F401
    except ImportError:
        return False
    return True


def register():
    """Registers "hvdtune" with torch.distributed (idempotent). False when
    this build or this torch has no backend to register."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    if not dist.is_available():
        return False
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return True
    if available():
        creator = _create
    else:

        def creator(options, pg_options=None):
            raise RuntimeError(
                "hvdtune backend: this build of hvdtune has no "
                "torch.distributed backend (hvdtune._c10d): it is built "
                "where libtorch-dev (TorchConfig.cmake) is found "
                "(HVDTUNE_WITH_TORCH)")

    dist.Backend.register_backend(BACKEND, creator, extended_api=True)
    return True
