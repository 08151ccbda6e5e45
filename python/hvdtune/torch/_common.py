"""What the collectives of hvdtune.torch share: Horovod's reduce ops, the
checks of their arguments, the scaling of tensors, and the handles that
`poll` and `synchronize` take (functions.py, allreduce.py)."""

import numpy as np
import torch

import hvdtune
from hvdtune import _core

Average = hvdtune.Average
Sum = hvdtune.Sum
Min = hvdtune.Min
Max = hvdtune.Max
Product = hvdtune.Product
# Horovod's Adasum: accepted as a name so that scripts import, refused when
# used (hvdtune tunes the allreduce algorithms instead).
Adasum = "adasum"

HorovodInternalError = hvdtune.HvdtuneError


def _error(code, message):
    """An HvdtuneError with `code` (InvalidArgumentError, also a ValueError,
    for "invalid_argument")."""
    cls = (_core.InvalidArgumentError
           if code == "invalid_argument" else hvdtune.HvdtuneError)
    e = cls(message)
    e.code = code
    return e


def _resolve_op(op, average, what="allreduce"):
    if op is None:
        return Average if average is None or average else Sum
    if average is not None:
        raise ValueError("pass either op= or the older average=, not both")
    if op == Adasum:
        raise _error(
            "invalid_argument", "hvdtune.torch %s: op=Adasum is not supported "
            "(use op=Average or op=Sum; hvdtune tunes the allreduce "
            "algorithm itself)" % what)
    if op not in _core.reduce_ops():
        raise _error(
            "invalid_argument", "hvdtune.torch %s: reduce op %r is not "
            "supported (supported: %s)" %
            (what, op, ", ".join(_core.reduce_ops())))
    return op


def _name(kind, name, ps):
    """Unnamed collectives are numbered per kind and process set."""
    if ps.process_set_id:
        kind = "%s.set%d" % (kind, ps.process_set_id)
    return hvdtune._auto_name(kind, name)


def _check_tensor(tensor, what):
    if not torch.is_tensor(tensor):
        raise _error("invalid_argument",
                     "%s: expected a torch tensor, got %s" %
                     (what, type(tensor).__name__))
    if tensor.device.type not in ("cpu", "cuda"):
        raise _error(
            "invalid_argument", "%s: a tensor on device '%s'; hvdtune.torch "
            "takes CPU and CUDA tensors" % (what, tensor.device.type))
    if tensor.is_sparse:
        raise _error(
            "invalid_argument", "%s: a sparse tensor; use "
            "sparse_allreduce_async, or .to_dense()" % what)
    return tensor


# -- CUDA tensors ----------------------------------------------------------
#
# A CUDA tensor goes to the runtime as its device pointer when the runtime
# has its NCCL backend and NCCL has the collective (allreduce, broadcast,
# allgather) and the dtype (not int16): route "nccl". Otherwise it is staged:
# copied to host memory, reduced there by the MPI engine and copied back
# (route "staged"). CPU tensors are route "host".

# Tests set this to "staged" or "nccl" so that CPU tensors take the route a
# CUDA tensor takes without or with the NCCL backend (a host copy in and the
# result copied back; or their own memory, with the results the runtime
# owns moved to the input's device), which exercises both without a GPU.
_force_route = None


def _route(tensor, ps, nccl_ok=True):
    """"host", "nccl" or "staged" for `tensor` in process set `ps`;
    `nccl_ok` is False for collectives the NCCL backend does not run."""
    if tensor.device.type == "cpu":
        if _force_route is None:
            return "host"
        nccl = _force_route == "nccl"
    else:
        nccl = _core.has_nccl(ps.process_set_id)
    if nccl and nccl_ok and tensor.dtype != torch.int16:
        return "nccl"
    return "staged"


def _group_route(tensors, ps, nccl_ok=True):
    """One route for a group: staged for all if any member must be."""
    routes = [_route(t, ps, nccl_ok) for t in tensors]
    return "staged" if "staged" in routes else routes[0] if routes else "host"


def _stage_in(tensor, route):
    """The tensor the runtime reads: `tensor`, or a contiguous host copy of
    it when staged."""
    if route != "staged":
        return tensor
    return tensor.detach().to("cpu", copy=True).contiguous()


def _ready(tensors, route):
    """Orders the NCCL collective after the work torch queued on its current
    stream: an event recorded there, waited for before the runtime gets the
    pointer. Only that stream's work so far is waited for (no device-wide
    synchronisation); the runtime's NCCL stream is synchronised before the
    handle completes, so the result is ready for every stream."""
    if route != "nccl":
        return
    for device in {t.device for t in tensors if t.device.type == "cuda"}:
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        event.synchronize()


def _to_devices(handle, tensors, route):
    """Results of a staged collective (or a runtime-owned output) go back
    to the device of each input."""
    if route != "host":
        handle._devices = [t.device for t in tensors]
    return handle


def _moved(handle, out):
    """`out` (a tensor or list) on the devices the handle asks for."""
    devices = getattr(handle, "_devices", None)
    if devices is None:
        return out
    if isinstance(out, list):
        return [o.to(d) for o, d in zip(out, devices)]
    return out.to(devices[0])


def _scaled(tensor, factor):
    """tensor * factor in the tensor's dtype, computed as Horovod does:
    float64 for integers, float32 for 16-bit floats."""
    if factor == 1.0:
        return tensor
    if tensor.dtype in (torch.float32, torch.float64):
        return tensor * factor
    if tensor.dtype in (torch.float16, torch.bfloat16):
        return (tensor.float() * factor).to(tensor.dtype)
    return (tensor.double() * factor).to(tensor.dtype)


def _scale_(tensor, factor):
    if factor == 1.0:
        return
    if tensor.dtype in (torch.float32, torch.float64):
        tensor.mul_(factor)
    else:
        tensor.copy_(_scaled(tensor, factor))


def _inplace_buffer(tensor):
    """The tensor's own memory if contiguous, else a contiguous copy that
    synchronize() copies back."""
    data = tensor.detach()
    if data.is_contiguous():
        return data, None
    return data.contiguous(), tensor


def _finish(handle, result, postscale=1.0, copy_back=None):
    handle._result = result
    handle._postscale = postscale
    handle._copy_back = copy_back
    return handle


def _runtime_outputs(handle, dtypes, single):
    """The handle's results are the runtime's buffers, one per dtype."""
    handle._output_dtypes = dtypes
    handle._single = single
    return handle


def _output(handle, index):
    dtype = handle._output_dtypes[index]
    shape = handle.output_shape_of(index)
    if int(np.prod(shape)) == 0:
        return torch.empty(shape, dtype=dtype)
    # The runtime's result bytes, viewed without a copy; the tensor keeps
    # them alive.
    return torch.frombuffer(handle.output(index), dtype=dtype).reshape(shape)


def _outputs(handle):
    out = [_output(handle, i) for i in range(len(handle._output_dtypes))]
    return out[0] if handle._single else out


class _GroupHandle:
    """Several handles completing as one result list."""

    def __init__(self, handles):
        self._handles = handles

    def poll(self):
        return all(h.poll() for h in self._handles)

    def wait(self):
        for h in self._handles:
            h.wait()

    def result(self):
        return [synchronize(h) for h in self._handles]


class _SparseHandle(_GroupHandle):
    """The allgathers of a sparse tensor's indices and values; calling it
    returns the reduced sparse tensor."""

    def __init__(self, indices, values, op, shape, size):
        super().__init__([indices, values])
        self._op = op
        self._shape = shape
        self._size = size
        self._sparse = None

    def __call__(self):
        if self._sparse is None:
            indices, values = self.result()
            if self._op == Average:
                values = values / self._size
            self._sparse = torch.sparse_coo_tensor(indices.t(), values,
                                                   self._shape)
        return self._sparse


# -- handles ---------------------------------------------------------------


def poll(handle):
    """True once the collective behind `handle` finished."""
    return handle.poll()


def synchronize(handle):
    """Waits for `handle` (the GIL is released; Ctrl-C interrupts) and
    returns its output tensor(s). Raises HvdtuneError carrying the runtime's
    message when the collective failed."""
    if isinstance(handle, _SparseHandle):
        return handle()
    handle.wait()
    if isinstance(handle, _GroupHandle):
        return handle.result()
    if getattr(handle, "_output_dtypes", None) is not None:
        out = _outputs(handle)
        post = getattr(handle, "_postscale", 1.0)
        for t in (out if isinstance(out, list) else [out]):
            _scale_(t, post)
        out = _moved(handle, out)
        if getattr(handle, "_alltoall", False):
            return out, torch.tensor(handle.received_splits,
                                     dtype=torch.int32)
        return out
    result, post, back = handle._result, handle._postscale, handle._copy_back
    if isinstance(result, list):
        result = list(result)
        for r in result:
            _scale_(r, post)
        moved = _moved(handle, result)
        for i, r in enumerate(result):
            if back[i] is not None:
                back[i].copy_(r)
                result[i] = back[i]
            else:
                result[i] = moved[i]
        return result
    _scale_(result, post)
    if back is not None:
        back.copy_(result)
        return back
    return _moved(handle, result)


