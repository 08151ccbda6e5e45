"""Collectives on torch CPU tensors, with Horovod's names and arguments.

A contiguous tensor goes to the runtime as its own memory (data_ptr): an
in-place call (`allreduce_`, `broadcast_`) reduces into the tensor itself and
the out-of-place one into a new tensor, with no staging copy. Unnamed
collectives are numbered per kind, so every rank must issue them in the same
order.

Every `*_async` call returns a handle for `poll` / `synchronize`; a second
collective under a name still in flight on this rank raises ValueError
(InvalidArgumentError) at the call. Errors of the collective itself (ranks
disagreeing on a shape or dtype, a peer gone) raise HorovodInternalError
(= HvdtuneError, a RuntimeError) at `synchronize`.
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


class ProcessSet:
    """Horovod's ProcessSet: some ranks of the job (all of them for the
    global set). A set added with add_process_set (every rank calls it) has
    a runtime of its own on its ranks, which negotiates and fuses its
    collectives apart from the job's; only its ranks call them."""

    def __init__(self, ranks_or_comm=None):
        self.ranks = None if ranks_or_comm is None else sorted(
            set(int(r) for r in ranks_or_comm))
        self.process_set_id = 0 if ranks_or_comm is None else None

    def _ranks(self):
        return (list(range(hvdtune.size()))
                if self.ranks is None else self.ranks)

    def size(self):
        return len(self._ranks())

    def rank(self):
        """This rank's place in the set (-1 outside it)."""
        ranks = self._ranks()
        return ranks.index(hvdtune.rank()) if self.included() else -1

    def included(self):
        return hvdtune.rank() in self._ranks()

    def set_rank(self, world_rank, what):
        """`world_rank`'s place in the set; raises if it is not in it."""
        ranks = self._ranks()
        if int(world_rank) not in ranks:
            raise _error(
                "invalid_argument", "%s: rank %d is not in %r" %
                (what, int(world_rank), self))
        return ranks.index(int(world_rank))

    def __repr__(self):
        return "ProcessSet(process_set_id=%r, ranks=%r)" % (
            self.process_set_id, self.ranks)


global_process_set = ProcessSet()
_next_process_set_id = [1]


def _added_process_set(process_set, what):
    """The ProcessSet (the global one for None); raises unless it was
    added."""
    if process_set is None or process_set is global_process_set:
        return global_process_set
    if not isinstance(process_set, ProcessSet):
        raise _error("invalid_argument",
                     "hvdtune.torch %s: process_set must be a ProcessSet, "
                     "got %r" % (what, process_set))
    if process_set.process_set_id == 0:
        return process_set
    if process_set.process_set_id is None:
        raise _error(
            "invalid_argument", "hvdtune.torch %s: %r was not added (call "
            "add_process_set on every rank first) or was removed" %
            (what, process_set))
    return process_set


def _check_process_set(process_set, what="collective"):
    """The ProcessSet to run on (the global one for None); raises unless
    it was added and this rank is in it."""
    process_set = _added_process_set(process_set, what)
    if not process_set.included():
        raise _error(
            "invalid_argument", "hvdtune.torch %s: rank %d is not in %r; "
            "only its ranks call its collectives" %
            (what, hvdtune.rank(), process_set))
    return process_set


def _name(kind, name, ps):
    """Unnamed collectives are numbered per kind and process set."""
    if ps.process_set_id:
        kind = "%s.set%d" % (kind, ps.process_set_id)
    return hvdtune._auto_name(kind, name)


def add_process_set(process_set):
    """Adds a process set (a ProcessSet or a list of ranks); every rank of
    the job calls it, in the same order. Its ranks build its runtime (which
    runs the job's configured knob values; the job's runtime alone is
    autotuned). A set of every rank is the global set. Sets may be added
    and removed after init() without HOROVOD_DYNAMIC_PROCESS_SETS (which
    Horovod requires for that; here it is accepted and changes nothing)."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    n = hvdtune.size()
    ranks = process_set._ranks()
    if not ranks or any(r < 0 or r >= n for r in ranks):
        raise _error(
            "invalid_argument", "add_process_set: ranks must be between 0 "
            "and %d, got %r" % (n - 1, process_set.ranks))
    if ranks == list(range(n)):
        return global_process_set
    if process_set.process_set_id is not None:
        raise _error("invalid_argument",
                     "add_process_set: %r was added already" % process_set)
    set_id = _next_process_set_id[0]
    _core.add_process_set(set_id, ranks)
    _next_process_set_id[0] += 1
    process_set.process_set_id = set_id
    return process_set


def remove_process_set(process_set):
    """Removes a set added by add_process_set (every rank calls it; its
    pending collectives fail). False for the global set, as in Horovod."""
    if (not isinstance(process_set, ProcessSet) or
            process_set is global_process_set or
            not process_set.process_set_id):
        return False
    _core.remove_process_set(process_set.process_set_id)
    process_set.process_set_id = None
    return True


def _check_tensor(tensor, what):
    if not torch.is_tensor(tensor):
        raise _error("invalid_argument",
                     "%s: expected a torch tensor, got %s" %
                     (what, type(tensor).__name__))
    if tensor.device.type != "cpu":
        raise _error(
            "invalid_argument", "%s: a tensor on device '%s'; hvdtune.torch "
            "takes CPU tensors (move it with .cpu(); the runtime's NCCL "
            "backend is reachable from C++ only)" % (what, tensor.device.type))
    if tensor.is_sparse:
        raise _error(
            "invalid_argument", "%s: a sparse tensor; use "
            "sparse_allreduce_async, or .to_dense()" % what)
    return tensor


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


# -- allreduce -------------------------------------------------------------


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts an allreduce of `tensor` into a new tensor; synchronize(handle)
    returns it."""
    op = _resolve_op(op, average)
    ps = _check_process_set(process_set, "allreduce")
    src = _scaled(_check_tensor(tensor, "allreduce").detach(),
                  prescale_factor).contiguous()
    out = torch.empty_like(src, memory_format=torch.contiguous_format)
    h = _core.allreduce_async(_name("allreduce", name, ps), src, out, op,
                              ps.process_set_id)
    return _finish(h, out, postscale_factor)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts an in-place allreduce of `tensor`."""
    op = _resolve_op(op, average)
    ps = _check_process_set(process_set, "allreduce")
    buf, copy_back = _inplace_buffer(_check_tensor(tensor, "allreduce"))
    _scale_(buf, prescale_factor)
    h = _core.allreduce_async(_name("allreduce", name, ps), buf, buf, op,
                              ps.process_set_id)
    return _finish(h, buf, postscale_factor, copy_back)


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
        if inplace:
            buf, back = _inplace_buffer(t)
            _scale_(buf, prescale_factor)
            inputs.append(buf)
            outputs.append(buf)
            copy_backs.append(back)
        else:
            src = _scaled(t.detach(), prescale_factor).contiguous()
            inputs.append(src)
            outputs.append(torch.empty_like(src))
            copy_backs.append(None)
    h = _core.grouped_allreduce_async(group, names, inputs, outputs, op,
                                      ps.process_set_id)
    return _finish(h, outputs, postscale_factor, copy_backs)


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


def sparse_allreduce_async(tensor, name=None, op=Average,
                           process_set=global_process_set):
    """Reduces a sparse COO tensor as Horovod does: allgathers its indices
    and values (so the result holds every rank's entries, duplicates
    summed when densified), divided by the number of ranks for Average.
    Returns a handle; calling it (or synchronize(handle)) returns the
    sparse result."""
    if op not in (Average, Sum):
        raise _error("invalid_argument",
                     "sparse_allreduce_async: op must be Average or Sum, "
                     "got %r" % (op,))
    ps = _check_process_set(process_set, "sparse_allreduce_async")
    if not torch.is_tensor(tensor) or not tensor.is_sparse:
        raise _error("invalid_argument",
                     "sparse_allreduce_async: expected a sparse COO tensor")
    if tensor.device.type != "cpu":
        _check_tensor(tensor.to_dense(), "sparse_allreduce_async")
    name = _name("sparse_allreduce", name, ps)
    indices = tensor._indices().t().contiguous()  # (nnz, sparse_dim)
    values = tensor._values().contiguous()  # (nnz, *dense_dims)
    return _SparseHandle(
        allgather_async(indices, name=name + ".indices", process_set=ps),
        allgather_async(values, name=name + ".values", process_set=ps), op,
        tensor.shape, ps.size())


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


# -- broadcast -------------------------------------------------------------


def _root(root_rank, ps):
    """The root's rank in the set's runtime (the job's rank for the global
    set, where the runtime checks it)."""
    if ps.process_set_id == 0:
        return int(root_rank)
    return ps.set_rank(root_rank, "broadcast root_rank")



def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    """Starts an in-place broadcast of `tensor` from `root_rank` (a rank of
    the job)."""
    ps = _check_process_set(process_set, "broadcast")
    buf, copy_back = _inplace_buffer(_check_tensor(tensor, "broadcast"))
    h = _core.broadcast_async(_name("broadcast", name, ps), buf,
                              _root(root_rank, ps), ps.process_set_id)
    return _finish(h, buf, 1.0, copy_back)


def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    """Starts a broadcast of `tensor` from `root_rank` into a new tensor."""
    ps = _check_process_set(process_set, "broadcast")
    buf = _check_tensor(tensor, "broadcast").detach().clone(
        memory_format=torch.contiguous_format)
    h = _core.broadcast_async(_name("broadcast", name, ps), buf,
                              _root(root_rank, ps), ps.process_set_id)
    return _finish(h, buf)


class _Broadcast(torch.autograd.Function):
    """Broadcast as an autograd op: the root gets the ranks' average
    gradient, the other ranks zero."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, ps):
        ctx.root_rank = root_rank
        ctx.ps = ps
        return synchronize(broadcast_async(tensor, root_rank, name, ps))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(
            allreduce_async(grad_output, op=Average, process_set=ctx.ps))
        if hvdtune.rank() != ctx.root_rank:
            grad.zero_()
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns `root_rank`'s `tensor` (a new tensor; differentiable)."""
    ps = _check_process_set(process_set, "broadcast")
    if tensor.requires_grad:
        return _Broadcast.apply(tensor, root_rank, name, ps)
    return synchronize(broadcast_async(tensor, root_rank, name, ps))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# -- allgather -------------------------------------------------------------


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating every rank's `tensor` along dimension 0 (whose
    size may differ between ranks)."""
    ps = _check_process_set(process_set, "allgather")
    src = _check_tensor(tensor, "allgather").detach().contiguous()
    h = _core.allgather_async(_name("allgather", name, ps), src,
                              ps.process_set_id)
    return _runtime_outputs(h, [src.dtype], single=True)


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


def _first_dims(dim0, ps):
    """Every rank's first dimension, in rank order."""
    return synchronize(
        allgather_async(torch.tensor([dim0], dtype=torch.int64),
                        process_set=ps)).tolist()


class _Allgather(torch.autograd.Function):
    """Allgather as an autograd op: the gradient is the ranks' average
    gradient of the result, sliced to this rank's rows."""

    @staticmethod
    def forward(ctx, tensor, name, ps):
        ctx.dim0 = tensor.shape[0]
        ctx.ps = ps
        return synchronize(allgather_async(tensor, name, ps))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(
            allreduce_async(grad_output, op=Average, process_set=ctx.ps))
        dims = _first_dims(ctx.dim0, ctx.ps)
        offset = sum(dims[:ctx.ps.rank()])
        return grad.narrow(0, offset, ctx.dim0), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Returns every rank's `tensor` concatenated along dimension 0
    (differentiable)."""
    ps = _check_process_set(process_set, "allgather")
    if tensor.requires_grad:
        return _Allgather.apply(tensor, name, ps)
    return synchronize(allgather_async(tensor, name, ps))


def grouped_allgather_async(tensors, name=None,
                            process_set=global_process_set):
    """Starts allgathers of `tensors` as one unit (negotiated and completed
    together); synchronize(handle) returns the list of results."""
    ps = _check_process_set(process_set, "grouped_allgather")
    group = _name("grouped_allgather", name, ps)
    srcs = [
        _check_tensor(t, "grouped_allgather").detach().contiguous()
        for t in tensors
    ]
    names = ["%s.%d" % (group, i) for i in range(len(srcs))]
    h = _core.grouped_allgather_async(group, names, srcs, ps.process_set_id)
    return _runtime_outputs(h, [t.dtype for t in srcs], single=False)


class _GroupedAllgather(torch.autograd.Function):

    @staticmethod
    def forward(ctx, name, ps, *tensors):
        ctx.dim0s = [t.shape[0] for t in tensors]
        ctx.ps = ps
        return tuple(
            synchronize(grouped_allgather_async(list(tensors), name, ps)))

    @staticmethod
    def backward(ctx, *grads):
        reduced = synchronize(
            grouped_allreduce_async([g.contiguous() for g in grads],
                                    op=Average, process_set=ctx.ps))
        dims = synchronize(
            grouped_allgather_async(
                [torch.tensor([d], dtype=torch.int64) for d in ctx.dim0s],
                process_set=ctx.ps))
        r = ctx.ps.rank()
        out = []
        for g, d, dim0 in zip(reduced, dims, ctx.dim0s):
            offset = int(d[:r].sum()) if r else 0
            out.append(g.narrow(0, offset, dim0))
        return (None, None) + tuple(out)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Returns the allgathers of `tensors` (differentiable)."""
    ps = _check_process_set(process_set, "grouped_allgather")
    tensors = list(tensors)
    if any(t.requires_grad for t in tensors):
        return list(_GroupedAllgather.apply(name, ps, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, ps))


# -- reducescatter --------------------------------------------------------


def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing `tensor` over the ranks and scattering the rows of
    the result: rank r gets dim0 // size rows, one more for the first
    dim0 % size ranks (Horovod's split)."""
    op = _resolve_op(op, None, "reducescatter")
    ps = _check_process_set(process_set, "reducescatter")
    src = _scaled(_check_tensor(tensor, "reducescatter").detach(),
                  prescale_factor).contiguous()
    h = _core.reducescatter_async(_name("reducescatter", name, ps), src, op,
                                  ps.process_set_id)
    h._postscale = postscale_factor
    return _runtime_outputs(h, [src.dtype], single=True)


def _reducescatter_grads(grads, op, prescale_factor, postscale_factor, ps):
    """Horovod's gradient of reducescatter: the upstream gradients, times
    size for Sum and the scale factors, allgathered back to full rows."""
    factor = prescale_factor * postscale_factor
    if op == Sum:
        factor *= ps.size()
    return [_scaled(g.contiguous(), factor) for g in grads]


class _Reducescatter(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, ps):
        ctx.args = (op, prescale_factor, postscale_factor, ps)
        return synchronize(
            reducescatter_async(tensor, name, op, ps,
                                prescale_factor=prescale_factor,
                                postscale_factor=postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad, = _reducescatter_grads([grad_output], *ctx.args)
        gathered = synchronize(allgather_async(grad, process_set=ctx.args[3]))
        return gathered, None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Returns this rank's rows of the reduction of `tensor` over the ranks
    (differentiable)."""
    ps = _check_process_set(process_set, "reducescatter")
    sent, ctx = (tensor, None) if compression is None else \
        compression.compress(tensor)
    if sent.requires_grad:
        out = _Reducescatter.apply(sent, name, op, prescale_factor,
                                   postscale_factor, ps)
    else:
        out = synchronize(
            reducescatter_async(sent, name, op, ps,
                                prescale_factor=prescale_factor,
                                postscale_factor=postscale_factor))
    return out if compression is None else compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatters `tensors` as one unit (negotiated, fused and
    completed together)."""
    op = _resolve_op(op, None, "grouped_reducescatter")
    ps = _check_process_set(process_set, "grouped_reducescatter")
    group = _name("grouped_reducescatter", name, ps)
    srcs = [
        _scaled(_check_tensor(t, "grouped_reducescatter").detach(),
                prescale_factor).contiguous() for t in tensors
    ]
    names = ["%s.%d" % (group, i) for i in range(len(srcs))]
    h = _core.grouped_reducescatter_async(group, names, srcs, op,
                                          ps.process_set_id)
    h._postscale = postscale_factor
    return _runtime_outputs(h, [t.dtype for t in srcs], single=False)


class _GroupedReducescatter(torch.autograd.Function):

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, ps,
                *tensors):
        ctx.args = (op, prescale_factor, postscale_factor, ps)
        return tuple(
            synchronize(
                grouped_reducescatter_async(list(tensors), name, op, ps,
                                            prescale_factor=prescale_factor,
                                            postscale_factor=postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        grads = _reducescatter_grads(grads, *ctx.args)
        return (None, None, None, None, None) + tuple(
            synchronize(grouped_allgather_async(grads,
                                                process_set=ctx.args[3])))


def grouped_reducescatter(tensors, name=None, compression=None, op=Average,
                          process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """Returns the reducescatters of `tensors`, done as one unit
    (differentiable)."""
    ps = _check_process_set(process_set, "grouped_reducescatter")
    tensors = list(tensors)
    pairs = [(t, None) if compression is None else compression.compress(t)
             for t in tensors]
    sent = [t for t, _ in pairs]
    if any(t.requires_grad for t in sent):
        out = list(
            _GroupedReducescatter.apply(name, op, prescale_factor,
                                        postscale_factor, ps, *sent))
    else:
        out = synchronize(
            grouped_reducescatter_async(sent, name, op, ps,
                                        prescale_factor=prescale_factor,
                                        postscale_factor=postscale_factor))
    if compression is None:
        return out
    return [compression.decompress(o, c) for o, (_, c) in zip(out, pairs)]


# -- alltoall --------------------------------------------------------------


def _alltoall_splits(tensor, splits, ps):
    n = ps.size()
    if tensor.dim() == 0:
        raise _error("invalid_argument",
                     "alltoall: a scalar; it needs at least one dimension")
    if splits is None:
        if tensor.shape[0] % n:
            raise _error(
                "invalid_argument", "alltoall: the first dimension (%d) "
                "does not divide evenly by the %d ranks; pass splits=" %
                (tensor.shape[0], n))
        return []
    if torch.is_tensor(splits):
        if splits.dtype not in (torch.int32, torch.int64):
            raise _error("invalid_argument",
                         "alltoall: splits must be int32 or int64, got %s" %
                         splits.dtype)
        splits = splits.tolist()
    splits = [int(x) for x in splits]
    if len(splits) != n or any(x < 0 for x in splits):
        raise _error(
            "invalid_argument", "alltoall: splits must be %d non-negative "
            "row counts (one per rank), got %r" % (n, splits))
    if sum(splits) != tensor.shape[0]:
        raise _error(
            "invalid_argument", "alltoall: the splits add up to %d rows, "
            "the tensor has %d" % (sum(splits), tensor.shape[0]))
    return splits


def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    """Starts sending splits[d] rows of `tensor` (in order) to rank d, or an
    equal share to each when `splits` is None; synchronize(handle) returns
    (rows received in rank order, rows received from each rank)."""
    ps = _check_process_set(process_set, "alltoall")
    src = _check_tensor(tensor, "alltoall").detach().contiguous()
    sizes = _alltoall_splits(src, splits, ps)
    h = _core.alltoall_async(_name("alltoall", name, ps), src, sizes,
                             ps.process_set_id)
    h._alltoall = True
    return _runtime_outputs(h, [src.dtype], single=True)


class _Alltoall(torch.autograd.Function):
    """Alltoall as an autograd op: the gradient goes back the way the rows
    came."""

    @staticmethod
    def forward(ctx, tensor, splits, name, ps):
        ctx.ps = ps
        out, received = synchronize(alltoall_async(tensor, splits, name, ps))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad_output, unused):
        grad, _ = synchronize(
            alltoall_async(grad_output.contiguous(), ctx.received,
                           process_set=ctx.ps))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Returns the rows every rank sent to this one, in rank order, and,
    when `splits` is given, how many came from each rank
    (differentiable)."""
    ps = _check_process_set(process_set, "alltoall")
    if tensor.requires_grad:
        out, received = _Alltoall.apply(tensor, splits, name, ps)
    else:
        out, received = synchronize(alltoall_async(tensor, splits, name, ps))
    return out if splits is None else (out, received)


# -- barrier and join ------------------------------------------------------


def barrier(process_set=global_process_set):
    """Returns once every rank called it."""
    ps = _check_process_set(process_set, "barrier")
    _core.barrier_async(ps.process_set_id).wait()


def join(device=-1):
    """This rank has no more data: until every rank joined, it takes part in
    the others' allreduces with neutral values (a broadcast, allgather,
    reducescatter or alltoall meanwhile fails). Returns the rank that joined
    last, the same on every rank. `device` is accepted for Horovod's
    signature (CPU only)."""
    h = _core.join_async()
    h.wait()
    _align_auto_names()
    return h.last_joined_rank


_joins = [0]


def _align_auto_names():
    """Ranks that joined early issued fewer unnamed collectives than the
    others, so their numbering (allgather.noname.N, ...) fell behind; every
    rank passes join() together, so there each kind's number moves to the
    highest any rank reached, and unnamed collectives match again."""
    _joins[0] += 1
    counters = allgather_object(dict(hvdtune._counters),
                                name="join.auto_names.%d" % _joins[0])
    for kind in set().union(*counters):
        hvdtune._counters[kind] = max(c.get(kind, 0) for c in counters)


# -- timeline --------------------------------------------------------------


def start_timeline(file_path, mark_cycles=False):
    """Starts writing Horovod's timeline (a Chrome trace; rank 0 writes) to
    `file_path`, closing one being written. Every rank calls it.
    HOROVOD_TIMELINE=DYNAMIC starts none at init, as in Horovod."""
    _core.start_timeline(str(file_path), bool(mark_cycles))


def stop_timeline():
    """Stops and closes the timeline being written (if any)."""
    _core.stop_timeline()


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
        if getattr(handle, "_alltoall", False):
            return out, torch.tensor(handle.received_splits,
                                     dtype=torch.int32)
        return out
    result, post, back = handle._result, handle._postscale, handle._copy_back
    if isinstance(result, list):
        for i, r in enumerate(result):
            _scale_(r, post)
            if back[i] is not None:
                back[i].copy_(r)
                result[i] = back[i]
        return result
    _scale_(result, post)
    if back is not None:
        back.copy_(result)
        return back
    return result


# -- objects and state -----------------------------------------------------


def broadcast_parameters(params, root_rank=0, process_set=global_process_set):
    """Broadcasts a model's parameters (a state_dict, or a list of
    (name, tensor) pairs as from named_parameters()) from `root_rank`, in
    place."""
    ps = _check_process_set(process_set, "broadcast_parameters")
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
                             str(pname), process_set=ps))
    for h in handles:
        synchronize(h)


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Returns `root_rank`'s `obj` on every rank (pickled; tensors
    included)."""
    ps = _check_process_set(process_set, "broadcast_object")
    name = _name("broadcast_object", name, ps)
    if hvdtune.rank() == root_rank:
        stream = io.BytesIO()
        torch.save(obj, stream)
        payload = torch.frombuffer(bytearray(stream.getvalue()),
                                   dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, name + ".length", ps)
    if hvdtune.rank() != root_rank:
        payload = torch.empty(int(length[0]), dtype=torch.uint8)
    broadcast_(payload, root_rank, name + ".data", ps)
    if hvdtune.rank() == root_rank:
        return obj
    return torch.load(io.BytesIO(payload.numpy().tobytes()))


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj`, in rank order."""
    ps = _check_process_set(process_set, "allgather_object")
    name = _name("allgather_object", name, ps)
    payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                        name + ".length", ps)
    data = allgather(payload, name + ".data", ps).numpy().tobytes()
    out, offset = [], 0
    for n in lengths.tolist():
        out.append(pickle.loads(data[offset:offset + n]))
        offset += n
    return out


def _initialize_optimizer_state(optimizer, model):
    """A new optimizer has no state yet: give every trainable parameter a
    zero gradient and take one step of the wrapped optimizer (never the
    distributed one's, which would allreduce), as Horovod does, so that the
    state exists to be broadcast."""
    sparse_params = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                sparse_params.update(id(p) for p in module.parameters())
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad:
                continue
            p.grad = torch.zeros_like(p)
            if isinstance(optimizer, torch.optim.SparseAdam) or (
                    isinstance(optimizer, torch.optim.SGD) and
                    id(p) in sparse_params):
                p.grad = p.grad.to_sparse()
    local_step = getattr(optimizer, "_local_step", None)
    if local_step is not None:
        local_step()
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer, root_rank=0, model=None,
                              process_set=global_process_set):
    """Makes every rank's optimizer state (hyperparameters, step counts,
    momentum buffers, ...) equal to `root_rank`'s. An optimizer that has not
    stepped yet gets its state first (one step on zero gradients); `model`
    names sparse embeddings, whose zero gradients are then sparse."""
    ps = _check_process_set(process_set, "broadcast_optimizer_state")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise _error("invalid_argument",
                     "broadcast_optimizer_state: torch.optim.LBFGS is not "
                     "supported (its state is not a tensor per parameter; "
                     "use broadcast_object on what you need)")
    if not optimizer.state_dict()["state"]:
        _initialize_optimizer_state(optimizer, model)
    state = broadcast_object(optimizer.state_dict(), root_rank,
                             name="broadcast_optimizer_state", process_set=ps)
    if hvdtune.rank() != root_rank:
        optimizer.load_state_dict(state)
