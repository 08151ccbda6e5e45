"""DistributedOptimizer: wraps a torch optimizer so that each parameter's
gradient is allreduced as soon as backward has produced it (communication
overlaps the rest of backward), and step() waits for them before updating.
"""

import contextlib
import warnings

import torch

from hvdtune import _core
from hvdtune.torch.compression import Compression
from hvdtune.torch._common import Adasum, Average, Sum, _error, synchronize
from hvdtune.torch.allreduce import allreduce_async_, grouped_allreduce_async_
from hvdtune.torch.functions import sparse_allreduce_async
from hvdtune.torch.process_sets import _added_process_set, global_process_set


class _DistributedOptimizer:
    """Placed in front of the user's optimizer class in the MRO, so the
    result is still an instance of it (isinstance(opt, torch.optim.SGD))."""

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step, op, gradient_predivide_factor,
                 num_groups, groups, sparse_as_dense, process_set):
        super().__init__(params)
        self._process_set = process_set
        self._compression = compression
        self._op = op
        self._predivide = float(gradient_predivide_factor)
        self._sparse_as_dense = sparse_as_dense
        self.backward_passes_per_step = backward_passes_per_step
        self._parameter_names = self._name_parameters(named_parameters)
        self._params = [
            p for group in self.param_groups for p in group["params"]
        ]
        self._allreduce_delay = {
            p: backward_passes_per_step for p in self._params
        }
        self._handles = {}  # param -> (handle, context); handle None = local pass
        self._grad_accs = []
        self._requires_update = []
        self._synchronized = False
        self._should_synchronize = True
        self._setup_groups(num_groups, groups)
        # A rank outside the set trains on its own (as in Horovod).
        self._distributed = process_set.included() and process_set.size() > 1
        if self._distributed:
            self._register_hooks()

    # -- naming and grouping ------------------------------------------------

    def _name_parameters(self, named_parameters):
        if named_parameters is None:
            return {
                p: "noname.%d.%d" % (i, j)
                for i, group in enumerate(self.param_groups)
                for j, p in enumerate(group["params"])
            }
        named = list(named_parameters)
        if any(not isinstance(x, tuple) or len(x) != 2 for x in named):
            raise ValueError(
                "named_parameters must be (name, parameter) pairs, as from "
                "model.named_parameters()")
        seen = set()
        for pname, _ in named:
            if pname in seen:
                raise ValueError(
                    "named_parameters has the name %r more than once" %
                    pname)
            seen.add(pname)
        names = {p: pname for pname, p in named}
        unnamed = [
            p for group in self.param_groups for p in group["params"]
            if p not in names
        ]
        if unnamed:
            raise ValueError(
                "named_parameters misses %d of the optimizer's parameters "
                "(shapes %s); pass model.named_parameters() of the model "
                "whose parameters the optimizer updates" %
                (len(unnamed), [tuple(p.shape) for p in unnamed[:5]]))
        return names

    def _setup_groups(self, num_groups, groups):
        """Grouped allreduce: explicit `groups` (lists of parameters),
        `num_groups` contiguous groups, or else the runtime's num_groups
        knob (HVDTUNE_NUM_GROUPS), read once here so every rank agrees."""
        self._group_of = {}
        self._groups = []
        if groups is not None:
            member_lists = [list(g) for g in groups]
        else:
            if not num_groups:
                num_groups = int(_core.knobs()["num_groups"])
            trainable = [p for p in self._params if p.requires_grad]
            member_lists = []
            if num_groups > 0:
                for begin, end in _core.split_into_groups(
                        len(trainable), num_groups):
                    member_lists.append(trainable[begin:end])
        for members in member_lists:
            if len(members) < 2:
                continue  # a group of one is a plain allreduce
            index = len(self._groups)
            self._groups.append(members)
            for p in members:
                if p in self._group_of:
                    raise ValueError("a parameter is in two groups")
                self._group_of[p] = index
        self._group_submitted = set()

    # -- hooks ------------------------------------------------------------

    def _register_hooks(self):
        for p in self._params:
            if not p.requires_grad:
                continue
            self._requires_update.append(p)
            # The gradient accumulator of a leaf runs once its gradient for
            # this backward pass is complete.
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._make_hook(p))
            self._grad_accs.append(accumulator)

    def _make_hook(self, p):

        def hook(*unused):
            if self._allreduce_delay[p] <= 0:
                raise AssertionError(
                    "the gradient of %r was computed more than "
                    "backward_passes_per_step=%d times before step() or "
                    "synchronize(); raise backward_passes_per_step to "
                    "accumulate more passes locally" %
                    (self._parameter_names[p], self.backward_passes_per_step))
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] > 0:
                self._handles[p] = (None, None)
                return
            group = self._group_of.get(p)
            if group is None:
                self._handles[p] = self._allreduce_grad_async(p)
            else:
                self._handles[p] = (None, None)
                members = self._groups[group]
                if all(self._allreduce_delay[q] == 0 for q in members):
                    self._submit_group(group)

        return hook

    # -- allreduce --------------------------------------------------------

    def _scale_factors(self):
        if self._op == Average:
            # The runtime divides by the number of ranks; a predivide
            # factor moves part of that division before the reduction.
            return 1.0 / self._predivide, self._predivide
        return 1.0, 1.0

    def _prepared_grad(self, p):
        """(tensor to reduce in place, compression context, whether the
        gradient was sparse)."""
        if p.grad is None:
            # Some other rank may have a gradient for it (a branch this rank
            # skipped); take part with zeros.
            p.grad = torch.zeros_like(p)
        was_sparse = p.grad.is_sparse
        if was_sparse:
            if not self._sparse_as_dense:
                raise _error(
                    "invalid_argument",
                    "the gradient of %r is sparse and the parameter is in a "
                    "group; pass sparse_as_dense=True, or leave it out of "
                    "the groups" % self._parameter_names[p])
            p.grad = p.grad.to_dense()
        tensor, ctx = self._compression.compress(p.grad)
        return tensor, ctx, was_sparse

    def _allreduce_grad_async(self, p):
        name = "grad." + self._parameter_names[p]
        if (p.grad is not None and p.grad.is_sparse and
                not self._sparse_as_dense):
            # Horovod's way: an allgather of the indices and the values.
            return sparse_allreduce_async(
                p.grad, name=name, op=self._op,
                process_set=self._process_set), None
        tensor, ctx, was_sparse = self._prepared_grad(p)
        pre, post = self._scale_factors()
        handle = allreduce_async_(tensor, name=name, op=self._op,
                                  prescale_factor=pre, postscale_factor=post,
                                  process_set=self._process_set)
        return handle, (tensor, ctx, was_sparse)

    def _submit_group(self, index):
        members = self._groups[index]
        prepared = [self._prepared_grad(p) for p in members]
        pre, post = self._scale_factors()
        handle = grouped_allreduce_async_(
            [t for t, _, _ in prepared],
            name="grads.group%d.%s" % (index,
                                       self._parameter_names[members[0]]),
            op=self._op, prescale_factor=pre, postscale_factor=post,
            process_set=self._process_set)
        for p, entry in zip(members, prepared):
            self._handles[p] = (handle, entry)
        self._group_submitted.add(index)

    def synchronize(self):
        """Waits for every gradient's allreduce (starting the ones backward
        did not reach, e.g. of unused parameters) and writes the results into
        the gradients."""
        if not self._distributed:
            self._synchronized = True
            return
        for p in self._requires_update:
            handle, _ = self._handles.get(p, (None, None))
            if handle is not None:
                continue
            group = self._group_of.get(p)
            if group is None:
                self._handles[p] = self._allreduce_grad_async(p)
            elif group not in self._group_submitted:
                self._submit_group(group)
        waited = {}
        for p, (handle, entry) in self._handles.items():
            if id(handle) not in waited:
                waited[id(handle)] = synchronize(handle)
            self._allreduce_delay[p] = self.backward_passes_per_step
            if entry is None:  # a sparse gradient's allgathers
                p.grad = waited[id(handle)]
                continue
            tensor, ctx, was_sparse = entry
            if tensor is not p.grad:
                p.grad.copy_(self._compression.decompress(tensor, ctx))
            if was_sparse:
                # sparse_as_dense: reduced dense, handed back sparse (what
                # e.g. SparseAdam requires).
                p.grad = p.grad.to_sparse()
        self._handles.clear()
        self._group_submitted.clear()
        self._synchronized = True
        _core.mark_step()

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For step() after an explicit synchronize() (e.g. to clip the
        reduced gradients): step() then does not wait again."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(
                    "optimizer.step() called without "
                    "optimizer.skip_synchronize() after "
                    "optimizer.synchronize(): the gradients are allreduced a "
                    "second time (step inside `with "
                    "optimizer.skip_synchronize():`)")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def _local_step(self, closure=None):
        """The wrapped optimizer's own step, without any allreduce."""
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() between loss.backward() and "
                "optimizer.step() / synchronize() would clear gradients "
                "whose allreduce is still pending")
        return super().zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Returns `optimizer` (same class, same parameter groups) with its
    gradients averaged (op=Average) or summed (op=Sum) over all ranks.

    backward_passes_per_step=N: gradients of N backward passes accumulate
    locally (summed, as torch accumulates .grad; scale the loss by 1/N for
    a mean) and are allreduced once, on the N-th pass.
    num_groups>0: parameters are split, in order, into that many groups,
    each allreduced as one unit (0: the runtime's num_groups knob).
    process_set: average over that set's ranks only; a rank outside it
    steps on its own gradients."""
    if op == Adasum:
        raise _error(
            "invalid_argument",
            "DistributedOptimizer: op=Adasum is not supported by hvdtune "
            "(use op=Average or op=Sum)")
    if op not in (Average, Sum):
        raise _error(
            "invalid_argument",
            "DistributedOptimizer: op must be Average or Sum, got %r" % (op,))
    process_set = _added_process_set(process_set, "DistributedOptimizer")
    if int(backward_passes_per_step) < 1:
        raise ValueError("backward_passes_per_step must be at least 1, got %r"
                         % (backward_passes_per_step,))
    if op != Average and gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor needs op=Average")
    cls = type(optimizer.__class__.__name__,
               (_DistributedOptimizer, optimizer.__class__), {})
    return cls(optimizer.param_groups, named_parameters, compression,
               int(backward_passes_per_step), op, gradient_predivide_factor,
               num_groups, groups, sparse_as_dense, process_set)
