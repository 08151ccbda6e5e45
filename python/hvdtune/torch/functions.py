"""Collectives on torch CPU and CUDA tensors, with Horovod's names and
arguments.

A contiguous tensor goes to the runtime as its own memory (data_ptr): an
in-place call (`allreduce_`, `broadcast_`) reduces into the tensor itself and
the out-of-place one into a new tensor, with no staging copy. A CUDA tensor
does so on the runtime's NCCL backend (allreduce, broadcast, allgather);
reducescatter and alltoall, and every collective where the runtime has no
NCCL backend, copy it to host memory and the result back (_common.py). Unnamed
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

import torch

import hvdtune
from hvdtune import _core
from hvdtune.torch._common import (Average, Sum, _error, _SparseHandle,
                                   _check_tensor, _finish, _group_route,
                                   _name, _ready, _resolve_op, _route,
                                   _runtime_outputs, _scaled, _stage_in,
                                   _to_devices, synchronize)
from hvdtune.torch.allreduce import (_inplace, allreduce_async,
                                     grouped_allreduce_async)
from hvdtune.torch.process_sets import _check_process_set, global_process_set

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
    buf, copy_back, route = _inplace(_check_tensor(tensor, "broadcast"), ps)
    _ready([buf], route)
    h = _core.broadcast_async(_name("broadcast", name, ps), buf,
                              _root(root_rank, ps), ps.process_set_id)
    return _finish(h, buf, 1.0, copy_back)


def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    """Starts a broadcast of `tensor` from `root_rank` into a new tensor."""
    ps = _check_process_set(process_set, "broadcast")
    tensor = _check_tensor(tensor, "broadcast")
    route = _route(tensor, ps)
    buf = _stage_in(tensor.detach(), route)  # a copy when staged
    if route != "staged":
        buf = buf.clone(memory_format=torch.contiguous_format)
    _ready([buf], route)
    h = _core.broadcast_async(_name("broadcast", name, ps), buf,
                              _root(root_rank, ps), ps.process_set_id)
    return _to_devices(_finish(h, buf), [tensor], route)


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
    tensor = _check_tensor(tensor, "allgather")
    route = _route(tensor, ps)
    src = _stage_in(tensor.detach(), route).contiguous()
    _ready([src], route)
    h = _core.allgather_async(_name("allgather", name, ps), src,
                              ps.process_set_id)
    # The result is the runtime's host buffer, moved to the input's device.
    return _to_devices(_runtime_outputs(h, [src.dtype], single=True),
                       [tensor], route)


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
    tensors = [_check_tensor(t, "grouped_allgather") for t in tensors]
    route = _group_route(tensors, ps)
    srcs = [
        _stage_in(t.detach(), route if t.is_cuda else _route(t, ps))
        .contiguous() for t in tensors
    ]
    names = ["%s.%d" % (group, i) for i in range(len(srcs))]
    _ready(srcs, route)
    h = _core.grouped_allgather_async(group, names, srcs, ps.process_set_id)
    return _to_devices(
        _runtime_outputs(h, [t.dtype for t in srcs], single=False), tensors,
        route)


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
    tensor = _check_tensor(tensor, "reducescatter")
    # The NCCL backend has no reducescatter: CUDA tensors are staged.
    route = _route(tensor, ps, nccl_ok=False)
    src = _scaled(_stage_in(tensor.detach(), route),
                  prescale_factor).contiguous()
    h = _core.reducescatter_async(_name("reducescatter", name, ps), src, op,
                                  ps.process_set_id)
    h._postscale = postscale_factor
    return _to_devices(_runtime_outputs(h, [src.dtype], single=True),
                       [tensor], route)


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
    tensors = [_check_tensor(t, "grouped_reducescatter") for t in tensors]
    route = _group_route(tensors, ps, nccl_ok=False)
    srcs = [
        _scaled(_stage_in(t.detach(), _route(t, ps, nccl_ok=False)),
                prescale_factor).contiguous() for t in tensors
    ]
    names = ["%s.%d" % (group, i) for i in range(len(srcs))]
    h = _core.grouped_reducescatter_async(group, names, srcs, op,
                                          ps.process_set_id)
    h._postscale = postscale_factor
    return _to_devices(
        _runtime_outputs(h, [t.dtype for t in srcs], single=False), tensors,
        route)


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
    tensor = _check_tensor(tensor, "alltoall")
    # The NCCL backend has no alltoall: CUDA tensors are staged.
    route = _route(tensor, ps, nccl_ok=False)
    src = _stage_in(tensor.detach(), route).contiguous()
    sizes = _alltoall_splits(src, splits, ps)
    h = _core.alltoall_async(_name("alltoall", name, ps), src, sizes,
                             ps.process_set_id)
    h._alltoall = True
    return _to_devices(_runtime_outputs(h, [src.dtype], single=True),
                       [tensor], route)


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
    signature (the runtime picks its own device)."""
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


# -- sparse allreduce (over allgather) ------------------------------------


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
    name = _name("sparse_allreduce", name, ps)
    indices = tensor._indices().t().contiguous()  # (nnz, sparse_dim)
    values = tensor._values().contiguous()  # (nnz, *dense_dims)
    return _SparseHandle(
        allgather_async(indices, name=name + ".indices", process_set=ps),
        allgather_async(values, name=name + ".values", process_set=ps), op,
        tensor.shape, ps.size())


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
