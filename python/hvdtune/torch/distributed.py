"""torch.distributed's "hvdtune" backend: `dist.init_process_group("hvdtune")`
runs a torch.distributed script (DDP, ZeroRedundancyOptimizer, the
collectives of torch.distributed) on the hvdtune runtime, so its
collectives are negotiated, fused and autotuned like a Horovod job's, with
the same configuration store, metrics and timeline.

`import hvdtune.torch` registers the backend (register() does it again, and
does nothing when it is registered). Launchers:
- mpirun or `hvd-tune run`: the runtime takes its ranks from MPI, and the
  rank and world size torch.distributed is given must be the same;
- `hvd-tune run --gloo`: the ranks of its Gloo launch;
- torchrun (or any launcher that gives torch.distributed a store): the
  runtime runs on the Gloo engine, with the ranks torch.distributed gives
  it, meeting at a rendezvous that rank 0 starts (hvdtune._rendezvous) and
  announces through torch's store.
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


def _group_prefix(group_id):
    return "c10d.%s." % (group_id or "0")


def _set_id(group_id):
    try:
        number = int(group_id)
    except (TypeError, ValueError):
        number = sum(ord(c) * 31**i for i, c in enumerate(str(group_id)))
    return _SET_ID_BASE + number % (1 << 24)


def _launched_with_rendezvous():
    """hvd-tune run --gloo (or another Gloo launcher) serves the store."""
    return bool(os.environ.get("HOROVOD_GLOO_RENDEZVOUS_ADDR"))


# Runtimes this process started from a torch.distributed store: the key of
# each start's meeting point differs, the same on every rank.
_store_starts = 0


def _start_from_store(options):
    """Starts the runtime on the Gloo engine for a job whose launcher
    (torchrun, or any other that gives torch.distributed a store) has no
    runtime of its own: rank 0 starts the rendezvous process
    (hvdtune._rendezvous), tells the others where through torch's store,
    and every rank joins with the rank and size torch.distributed gave
    it."""
    global _store_starts
    from hvdtune import _rendezvous
    if not _core.gloo_built():
        raise RuntimeError(
            "hvdtune backend: a job not started by mpirun (torchrun) runs on "
            "the Gloo engine, which this build lacks (libgloo-dev, "
            "HVDTUNE_WITH_GLOO): start it with mpirun -np N instead")
    ranks = list(options.global_ranks_in_group or [])
    if ranks and len(ranks) != options.group_size:
        raise RuntimeError("hvdtune backend: a process group of %d of the "
                           "job's ranks before the job's own: create the "
                           "default group (init_process_group) with the "
                           "hvdtune backend first" % len(ranks))
    store, rank, size = options.store, options.group_rank, options.group_size
    timeout = options.timeout.total_seconds()
    key = "hvdtune/rendezvous/%d" % _store_starts
    _store_starts += 1
    iface = os.environ.get("HOROVOD_GLOO_IFACE")
    if rank == 0:
        try:
            # The address the others reach this host at: the one on the
            # route to torch's store, which every rank reaches.
            address = (_rendezvous.address_of(iface) if iface else
                       _rendezvous.route_to(
                           os.environ.get("MASTER_ADDR", "127.0.0.1")))
            port, watch_port, proc = _rendezvous.serve(
                address, size)
            _keep.append(proc)
            store.set(key, "%s %d %d" % (address, port, watch_port))
        except Exception as e:
            store.set(key, "error %s" % e)
            raise
    value = store.get(key).decode()
    if value.startswith("error "):
        raise RuntimeError("hvdtune backend: rank 0 could not start the "
                           "rendezvous: %s" % value[len("error "):])
    address, port, watch_port = value.split()
    _keep.append(_rendezvous.Watch(address, int(watch_port), rank,
                                   timeout=min(timeout, 60.0)))
    env = {
        "HOROVOD_GLOO": "1",
        "HOROVOD_RANK": str(rank),
        "HOROVOD_SIZE": str(size),
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": address,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": port,
        }
    if not iface:
        # Traffic leaves on the interface that reaches rank 0.
        iface = _rendezvous.interface_of(_rendezvous.route_to(address))
        if iface is None:
            raise RuntimeError(
                "hvdtune backend: rank %d found no network interface on the "
                "route to rank 0 (%s): set HOROVOD_GLOO_IFACE" %
                (rank, address))
    env["HOROVOD_GLOO_IFACE"] = iface
    # torchrun's node: its ranks form one node of the runtime (agents on
    # one machine are nodes of their own, as in an emulated cluster).
    node = os.environ.get("GROUP_RANK")
    if node is not None and "HOROVOD_HOSTNAME" not in os.environ:
        import socket
        env["HOROVOD_HOSTNAME"] = "%s/torchrun-node-%s" % (
            socket.gethostname(), node)
    for ours, torchs in (("HOROVOD_LOCAL_RANK", "LOCAL_RANK"),
                         ("HOROVOD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"),
                         ("HOROVOD_CROSS_RANK", "GROUP_RANK"),
                         ("HOROVOD_CROSS_SIZE", "GROUP_WORLD_SIZE")):
        if torchs in os.environ:
            env[ours] = os.environ[torchs]
    if "HOROVOD_GLOO_TIMEOUT_SECONDS" not in os.environ:
        # torch.distributed's timeout (init_process_group(timeout=...)).
        env["HOROVOD_GLOO_TIMEOUT_SECONDS"] = "%g" % timeout
    os.environ.update(env)
    hvdtune.init()


# What must live as long as the process: the rendezvous process's handle
# (rank 0) and the watch connection.
_keep = []


def _create(options, pg_options=None):
    """The creator torch.distributed calls (its extended form): a process
    group on the runtime of the whole job, or on a process set of the
    group's ranks."""
    del pg_options
    from hvdtune import _c10d  # torch.distributed is imported by now
    if (_core.is_initialized() or _launched_by_mpi() or
            _launched_with_rendezvous()):
        hvdtune.init()
    else:
        _start_from_store(options)
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
            "job's launcher started rank %d of %d: let init_process_group "
            "take rank and world_size from the launcher (e.g. "
            "OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE under mpirun)" %
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
