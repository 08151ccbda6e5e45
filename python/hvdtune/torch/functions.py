"""Collectives on torch CPU tensors, with Horovod's names and arguments.

A contiguous tensor goes to the runtime as its own memory (data_ptr): an
in-place call (`allreduce_`, `broadcast_`) reduces into the tensor itself and
the out-of-place one into a new tensor, with no staging copy. Unnamed
collectives are numbered per kind, so every rank must issue them in the same
order.
"""

import io
import pickle

import numpy as np
import torch

import hvdtune
from hvdtune import _core

Average = hvdtune.Average
Sum = hvdtune.Sum
Min = hvdtune.Min
Max = hvdtune.Max
# Horovod's other ops: accepted as names so scripts import, refused when used.
Adasum = "adasum"
Product = "product"
_SUPPORTED_OPS = (Average, Sum, Min, Max)


def _error(code, message):
    e = hvdtune.HvdtuneError(message)
    e.code = code
    return e


def _resolve_op(op, average):
    if op is None:
        return Average if average is None or average else Sum
    if average is not None:
        raise ValueError("pass either op= or the older average=, not both")
    if op not in _SUPPORTED_OPS:
        raise _error(
            "invalid_argument", "hvdtune.torch: reduce op %r is not supported "
            "(supported: Average, Sum, Min, Max)" % (op,))
    return op


def _check_process_set(process_set):
    if process_set is not None:
        raise _error("invalid_argument",
                     "hvdtune.torch: process sets are not supported; every "
                     "collective spans all ranks")


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


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=None):
    """Starts an allreduce of `tensor` into a new tensor; synchronize(handle)
    returns it."""
    op = _resolve_op(op, average)
    _check_process_set(process_set)
    src = tensor.detach()
    if prescale_factor != 1.0:
        src = src * prescale_factor
    src = src.contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    h = _core.allreduce_async(hvdtune._auto_name("allreduce", name), src,
                              out, op)
    return _finish(h, out, postscale_factor)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=None):
    """Starts an in-place allreduce of `tensor`."""
    op = _resolve_op(op, average)
    _check_process_set(process_set)
    buf, copy_back = _inplace_buffer(tensor)
    if prescale_factor != 1.0:
        buf.mul_(prescale_factor)
    h = _core.allreduce_async(hvdtune._auto_name("allreduce", name), buf, buf,
                              op)
    return _finish(h, buf, postscale_factor, copy_back)


class _Allreduce(torch.autograd.Function):
    """Allreduce as an autograd op: the gradient is allreduced the same way."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor):
        ctx.op = op
        ctx.scale = (prescale_factor, postscale_factor)
        return synchronize(
            allreduce_async(tensor, name=name, op=op,
                            prescale_factor=prescale_factor,
                            postscale_factor=postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(
            allreduce_async(grad_output, op=ctx.op,
                            prescale_factor=ctx.scale[0],
                            postscale_factor=ctx.scale[1]))
        return grad, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Returns the allreduce of `tensor` (differentiable for Sum and
    Average); `compression` (e.g. Compression.fp16) is applied on the wire."""
    op = _resolve_op(op, average)
    _check_process_set(process_set)
    if compression is not None:
        sent, ctx = compression.compress(tensor)
    else:
        sent, ctx = tensor, None
    if sent.requires_grad and op in (Average, Sum):
        out = _Allreduce.apply(sent, name, op, prescale_factor,
                               postscale_factor)
    else:
        out = synchronize(
            allreduce_async(sent, name=name, op=op,
                            prescale_factor=prescale_factor,
                            postscale_factor=postscale_factor))
    return compression.decompress(out, ctx) if compression is not None else out


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    return synchronize(
        allreduce_async_(tensor, average, name, op, prescale_factor,
                         postscale_factor, process_set))


def _grouped(tensors, average, name, op, prescale_factor, postscale_factor,
             inplace):
    op = _resolve_op(op, average)
    group = hvdtune._auto_name("grouped_allreduce", name)
    names = ["%s.%d" % (group, i) for i in range(len(tensors))]
    inputs, outputs, copy_backs = [], [], []
    for t in tensors:
        if inplace:
            buf, back = _inplace_buffer(t)
            if prescale_factor != 1.0:
                buf.mul_(prescale_factor)
            inputs.append(buf)
            outputs.append(buf)
            copy_backs.append(back)
        else:
            src = t.detach()
            if prescale_factor != 1.0:
                src = src * prescale_factor
            src = src.contiguous()
            inputs.append(src)
            outputs.append(torch.empty_like(src))
            copy_backs.append(None)
    h = _core.grouped_allreduce_async(group, names, inputs, outputs, op)
    return _finish(h, outputs, postscale_factor, copy_backs)


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=None):
    """Allreduces `tensors` as one unit (negotiated, fused and completed
    together) into new tensors."""
    _check_process_set(process_set)
    return _grouped(tensors, average, name, op, prescale_factor,
                    postscale_factor, False)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=None):
    _check_process_set(process_set)
    return _grouped(tensors, average, name, op, prescale_factor,
                    postscale_factor, True)


def grouped_allreduce(tensors, average=None, name=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=None):
    return synchronize(
        grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                postscale_factor, process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=None):
    return synchronize(
        grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                 postscale_factor, process_set))


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """Starts an in-place broadcast of `tensor` from `root_rank`."""
    _check_process_set(process_set)
    buf, copy_back = _inplace_buffer(tensor)
    h = _core.broadcast_async(hvdtune._auto_name("broadcast", name), buf,
                              int(root_rank))
    return _finish(h, buf, 1.0, copy_back)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Starts a broadcast of `tensor` from `root_rank` into a new tensor."""
    _check_process_set(process_set)
    buf = tensor.detach().clone(memory_format=torch.contiguous_format)
    h = _core.broadcast_async(hvdtune._auto_name("broadcast", name), buf,
                              int(root_rank))
    return _finish(h, buf)


def broadcast(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's `tensor` along dimension 0 (whose
    size may differ between ranks)."""
    _check_process_set(process_set)
    src = tensor.detach().contiguous()
    h = _core.allgather_async(hvdtune._auto_name("allgather", name), src)
    h._gather_dtype = src.dtype
    return h


def allgather(tensor, name=None, process_set=None):
    return synchronize(allgather_async(tensor, name, process_set))


def poll(handle):
    """True once the collective behind `handle` finished."""
    return handle.poll()


def synchronize(handle):
    """Waits for `handle` (the GIL is released; Ctrl-C interrupts) and
    returns its output tensor(s). Raises HvdtuneError carrying the runtime's
    message when the collective failed."""
    handle.wait()
    dtype = getattr(handle, "_gather_dtype", None)
    if dtype is not None:
        shape = handle.output_shape
        if int(np.prod(shape)) == 0:
            return torch.empty(shape, dtype=dtype)
        # The runtime's result bytes, viewed without a copy; the tensor
        # keeps them alive.
        return torch.frombuffer(handle.output(), dtype=dtype).reshape(shape)
    result, post, back = handle._result, handle._postscale, handle._copy_back
    if isinstance(result, list):
        for i, r in enumerate(result):
            if post != 1.0:
                r.mul_(post)
            if back[i] is not None:
                back[i].copy_(r)
                result[i] = back[i]
        return result
    if post != 1.0:
        result.mul_(post)
    if back is not None:
        back.copy_(result)
        return back
    return result


def broadcast_parameters(params, root_rank=0):
    """Broadcasts a model's parameters (a state_dict, or a list of
    (name, tensor) pairs as from named_parameters()) from `root_rank`, in
    place."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = []
        for i, p in enumerate(params):
            items.append(p if isinstance(p, tuple) else (str(i), p))
    handles = []
    for pname, p in items:
        if p is None:
            continue
        handles.append(
            broadcast_async_(p, root_rank, name="broadcast_parameters." +
                             str(pname)))
    for h in handles:
        synchronize(h)


def broadcast_object(obj, root_rank=0, name=None):
    """Returns `root_rank`'s `obj` on every rank (pickled; tensors
    included)."""
    name = hvdtune._auto_name("broadcast_object", name)
    if hvdtune.rank() == root_rank:
        stream = io.BytesIO()
        torch.save(obj, stream)
        payload = np.frombuffer(stream.getvalue(), dtype=np.uint8).copy()
        length = np.array([payload.size], dtype=np.int64)
    else:
        length = np.zeros(1, dtype=np.int64)
    hvdtune.broadcast(length, root_rank, name + ".length", inplace=True)
    if hvdtune.rank() != root_rank:
        payload = np.empty(int(length[0]), dtype=np.uint8)
    hvdtune.broadcast(payload, root_rank, name + ".data", inplace=True)
    if hvdtune.rank() == root_rank:
        return obj
    return torch.load(io.BytesIO(payload.tobytes()))


def allgather_object(obj, name=None):
    """Returns the list of every rank's `obj`, in rank order."""
    name = hvdtune._auto_name("allgather_object", name)
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    lengths = hvdtune.allgather(np.array([payload.size], dtype=np.int64),
                                name + ".length")
    data = hvdtune.allgather(payload, name + ".data").tobytes()
    out, offset = [], 0
    for n in lengths:
        out.append(pickle.loads(data[offset:offset + int(n)]))
        offset += int(n)
    return out


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Makes every rank's optimizer state (hyperparameters, step counts,
    momentum buffers, ...) equal to `root_rank`'s."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise _error("invalid_argument",
                     "broadcast_optimizer_state: torch.optim.LBFGS is not "
                     "supported")
    state = broadcast_object(optimizer.state_dict(), root_rank,
                             name="broadcast_optimizer_state")
    if hvdtune.rank() != root_rank:
        optimizer.load_state_dict(state)
