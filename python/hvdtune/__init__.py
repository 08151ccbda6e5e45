"""hvdtune: autotuned collectives (allreduce, broadcast, allgather) for
data-parallel training, on numpy arrays and anything with the buffer
protocol. `hvdtune.torch` is the PyTorch layer (Horovod's interface).

Every rank of the MPI job calls init(); the runtime reads the same
HOROVOD_* / HVDTUNE_* variables as a C++ application (HOROVOD_AUTOTUNE=1,
HOROVOD_AUTOTUNE_LOG, HOROVOD_AUTOTUNE_DB, HOROVOD_METRICS_PORT,
HOROVOD_TIMELINE, ...). Collectives are matched across ranks by name.
"""

import ctypes
import ctypes.util
import os


def _load_libmpi_globally():
    """Open MPI loads its components with dlopen and expects libmpi's
    symbols to be global, while Python loads extension modules with
    RTLD_LOCAL. Only libmpi is made global: the extension itself must stay
    local, or the C++ library instances it carries would take the place of
    those of libraries loaded after it (cuDNN crashed in its own logging that
    way under torch 2.11)."""
    names = ["libmpi.so.40", "libmpi.so.12"]
    found = ctypes.util.find_library("mpi")
    if found:
        names.append(found)
    for name in names:
        try:
            ctypes.CDLL(name, mode=os.RTLD_GLOBAL)
            return
        except OSError:
            continue


_load_libmpi_globally()
from . import _core  # noqa: E402

import numpy as np

from . import _exit

HvdtuneError = _core.HvdtuneError
Handle = _core.Handle

# Reduce operations, as the runtime names them.
Sum = "sum"
Average = "average"
Min = "min"
Max = "max"
Product = "product"

__all__ = [
    "HvdtuneError", "Handle", "Sum", "Average", "Min", "Max", "Product",
    "init",
    "shutdown", "is_initialized", "size", "rank", "local_rank", "local_size",
    "cross_rank", "cross_size", "allreduce", "allreduce_async", "synchronize",
    "poll", "grouped_allreduce", "grouped_allreduce_async", "broadcast",
    "broadcast_async", "allgather", "allgather_async", "mark_step",
    "autotune_status", "knobs", "stats"
]

size = _core.size
rank = _core.rank
local_rank = _core.local_rank
local_size = _core.local_size
cross_rank = _core.cross_rank
cross_size = _core.cross_size
is_initialized = _core.is_initialized
mark_step = _core.mark_step
autotune_status = _core.autotune_status
knobs = _core.knobs
stats = _core.stats

_counters = {}


def _auto_name(kind, name):
    """Unnamed collectives are numbered per kind: every rank must issue them
    in the same order (as in Horovod)."""
    if name is not None:
        return str(name)
    number = _counters.get(kind, 0)
    _counters[kind] = number + 1
    return "%s.noname.%d" % (kind, number)


def init(tune_num_groups=False):
    """Starts the runtime on this rank (every rank must call it). Reads the
    configuration from the environment; a bad value raises HvdtuneError
    with code "config" naming the variable. Calling it again while running
    does nothing. `tune_num_groups`: the application splits its gradients
    into knobs()["num_groups"] groups, so the autotuner may tune it."""
    if os.environ.get("HVDTUNE_ELASTIC_ID") and not _core.is_initialized():
        # A rank of an elastic job: its world comes from the launcher.
        from . import elastic
        elastic._init_world(lambda: _core.init(tune_num_groups))
    else:
        _core.init(tune_num_groups)
    _exit.install(_core)


def shutdown():
    """Stops the runtime on every rank (pending collectives fail with code
    "aborted"). Idempotent; also done at exit."""
    _core.shutdown()


def _finish(handle, result):
    handle._result = result
    return handle


def _as_array(x):
    # Keeps the caller's array when it already is one (no copy).
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def allreduce_async(array, op=Average, name=None, output=None):
    """Starts an allreduce of `array` into `output` (a new array by default;
    pass the input itself for in place). Returns a Handle for synchronize()."""
    array = _as_array(array)
    if output is None:
        output = np.empty_like(array, order="C")
    h = _core.allreduce_async(_auto_name("allreduce", name), array, output, op)
    return _finish(h, output)


def allreduce(array, op=Average, name=None, output=None):
    return synchronize(allreduce_async(array, op, name, output))


def grouped_allreduce_async(arrays, op=Average, name=None):
    """Allreduces `arrays` as one unit: they fuse and complete together."""
    arrays = [_as_array(a) for a in arrays]
    outputs = [np.empty_like(a, order="C") for a in arrays]
    group = _auto_name("grouped_allreduce", name)
    names = ["%s.%d" % (group, i) for i in range(len(arrays))]
    h = _core.grouped_allreduce_async(group, names, arrays, outputs, op)
    return _finish(h, outputs)


def grouped_allreduce(arrays, op=Average, name=None):
    return synchronize(grouped_allreduce_async(arrays, op, name))


def broadcast_async(array, root_rank, name=None, inplace=False):
    """Broadcasts `array` from `root_rank`: into a copy, or into `array`
    itself with inplace=True (which then must be writable)."""
    target = array if inplace else np.array(array, order="C", copy=True)
    h = _core.broadcast_async(_auto_name("broadcast", name), target,
                              int(root_rank))
    return _finish(h, target)


def broadcast(array, root_rank, name=None, inplace=False):
    return synchronize(broadcast_async(array, root_rank, name, inplace))


def allgather_async(array, name=None):
    """Concatenates every rank's `array` along the first dimension (which
    may differ between ranks)."""
    h = _core.allgather_async(_auto_name("allgather", name), _as_array(array))
    h._gather = True
    return h


def allgather(array, name=None):
    return synchronize(allgather_async(array, name))


def poll(handle):
    """True once the collective behind `handle` finished."""
    return handle.poll()


def synchronize(handle):
    """Waits for `handle` (other Python threads run meanwhile; Ctrl-C
    interrupts) and returns its result. Raises HvdtuneError with the
    runtime's message if the collective failed."""
    handle.wait()
    if getattr(handle, "_gather", False):
        # A view of the runtime's result bytes (no copy), kept alive by it.
        out = np.asarray(handle.output())
        return out.reshape(handle.output_shape)
    return handle._result
