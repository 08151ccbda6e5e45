"""Allreduce of torch CPU and CUDA tensors, one or a group at a time, in
place or into new tensors, with gradients (autograd) as Horovod's. CUDA
tensors run on the runtime's NCCL backend, or are staged through host memory
where it has none (_common.py)."""

import torch

from hvdtune import _core
from hvdtune.torch._common import (Average, Sum, _check_tensor, _finish,
                                   _group_route, _inplace_buffer, _name,
                                   _ready, _resolve_op, _route, _scale_,
                                   _scaled, _stage_in, _to_devices,
                                   synchronize)
from hvdtune.torch.process_sets import _check_process_set, global_process_set

# -- allreduce -------------------------------------------------------------


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts an allreduce of `tensor` into a new tensor; synchronize(handle)
    returns it."""
    op = _resolve_op(op, average)
    ps = _check_process_set(process_set, "allreduce")
    tensor = _check_tensor(tensor, "allreduce")
    route = _route(tensor, ps)
    src = _scaled(_stage_in(tensor.detach(), route),
                  prescale_factor).contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    _ready([src], route)
    h = _core.allreduce_async(_name("allreduce", name, ps), src, out, op,
                              ps.process_set_id)
    return _to_devices(_finish(h, out, postscale_factor), [tensor], route)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts an in-place allreduce of `tensor`."""
    op = _resolve_op(op, average)
    ps = _check_process_set(process_set, "allreduce")
    buf, copy_back, route = _inplace(_check_tensor(tensor, "allreduce"), ps)
    _scale_(buf, prescale_factor)
    _ready([buf], route)
    h = _core.allreduce_async(_name("allreduce", name, ps), buf, buf, op,
                              ps.process_set_id)
    return _finish(h, buf, postscale_factor, copy_back)


def _inplace(tensor, ps, route=None):
    """The buffer an in-place collective works on, the tensor to copy the
    result back into (None when it is the buffer) and the route."""
    route = route or _route(tensor, ps)
    if route == "staged":
        return _stage_in(tensor, route), tensor, route
    buf, copy_back = _inplace_buffer(tensor)
    return buf, copy_back, route


class _Allreduce(torch.autograd.Function):
    """Allreduce as an autograd op: the gradient is allreduced the same way."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, ps):
        ctx.op = op
        ctx.scale = (prescale_factor, postscale_factor)
        ctx.ps = ps
        return synchronize(
            allreduce_async(tensor, name=name, op=op,
                            prescale_factor=prescale_factor,
                            postscale_factor=postscale_factor,
                            process_set=ps))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(
            allreduce_async(grad_output, op=ctx.op,
                            prescale_factor=ctx.scale[0],
                            postscale_factor=ctx.scale[1],
                            process_set=ctx.ps))
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Returns the allreduce of `tensor` (differentiable for Sum and
    Average); `compression` (e.g. Compression.fp16) is applied on the wire."""
    op = _resolve_op(op, average)
    ps = _check_process_set(process_set, "allreduce")
    if compression is not None:
        sent, ctx = compression.compress(tensor)
    else:
        sent, ctx = tensor, None
    if sent.requires_grad and op in (Average, Sum):
        out = _Allreduce.apply(sent, name, op, prescale_factor,
                               postscale_factor, ps)
    else:
        out = synchronize(
            allreduce_async(sent, name=name, op=op,
                            prescale_factor=prescale_factor,
                            postscale_factor=postscale_factor,
                            process_set=ps))
    return compression.decompress(out, ctx) if compression is not None else out


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(
        allreduce_async_(tensor, average, name, op, prescale_factor,
                         postscale_factor, process_set))


def _grouped(tensors, average, name, op, prescale_factor, postscale_factor,
             inplace, ps):
    op = _resolve_op(op, average, "grouped_allreduce")
    group = _name("grouped_allreduce", name, ps)
    names = ["%s.%d" % (group, i) for i in range(len(tensors))]
    inputs, outputs, copy_backs = [], [], []
    for t in tensors:
        _check_tensor(t, "grouped_allreduce")
    route = _group_route(tensors, ps)
    for t in tensors:
        # CUDA members share the group's route; CPU members keep their own.
        r = route if t.is_cuda else _route(t, ps)
        if inplace:
            buf, back, _ = _inplace(t, ps, r)
            _scale_(buf, prescale_factor)
            inputs.append(buf)
            outputs.append(buf)
            copy_backs.append(back)
        else:
            src = _scaled(_stage_in(t.detach(), r),
                          prescale_factor).contiguous()
            inputs.append(src)
            outputs.append(torch.empty_like(src))
            copy_backs.append(None)
    _ready(inputs, route)
    h = _core.grouped_allreduce_async(group, names, inputs, outputs, op,
                                      ps.process_set_id)
    h = _finish(h, outputs, postscale_factor, copy_backs)
    return h if inplace else _to_devices(h, tensors, route)


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    """Allreduces `tensors` as one unit (negotiated, fused and completed
    together) into new tensors."""
    ps = _check_process_set(process_set, "grouped_allreduce")
    return _grouped(tensors, average, name, op, prescale_factor,
                    postscale_factor, False, ps)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    ps = _check_process_set(process_set, "grouped_allreduce")
    return _grouped(tensors, average, name, op, prescale_factor,
                    postscale_factor, True, ps)


class _GroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce as an autograd op: the gradients are allreduced
    the same way, as one group."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, ps,
                *tensors):
        ctx.op = op
        ctx.scale = (prescale_factor, postscale_factor)
        ctx.ps = ps
        return tuple(
            synchronize(
                grouped_allreduce_async(list(tensors), name=name, op=op,
                                        prescale_factor=prescale_factor,
                                        postscale_factor=postscale_factor,
                                        process_set=ps)))

    @staticmethod
    def backward(ctx, *grads):
        reduced = synchronize(
            grouped_allreduce_async([g.contiguous() for g in grads],
                                    op=ctx.op, prescale_factor=ctx.scale[0],
                                    postscale_factor=ctx.scale[1],
                                    process_set=ctx.ps))
        return (None, None, None, None, None) + tuple(reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=None,
                      op=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Returns the allreduces of `tensors`, done as one unit; differentiable
    for Sum and Average; `compression` is applied to each on the wire."""
    op = _resolve_op(op, average, "grouped_allreduce")
    ps = _check_process_set(process_set, "grouped_allreduce")
    tensors = list(tensors)
    if compression is not None:
        pairs = [compression.compress(t) for t in tensors]
    else:
        pairs = [(t, None) for t in tensors]
    sent = [t for t, _ in pairs]
    if any(t.requires_grad for t in sent) and op in (Average, Sum):
        out = list(
            _GroupedAllreduce.apply(name, op, prescale_factor,
                                    postscale_factor, ps, *sent))
    else:
        out = synchronize(
            grouped_allreduce_async(sent, name=name, op=op,
                                    prescale_factor=prescale_factor,
                                    postscale_factor=postscale_factor,
                                    process_set=ps))
    if compression is None:
        return out
    return [compression.decompress(o, c) for o, (_, c) in zip(out, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return synchronize(
        grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                 postscale_factor, process_set))


