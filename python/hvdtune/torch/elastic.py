"""Horovod's elastic API for PyTorch (`hvd.elastic.run`, `TorchState`,
`ElasticSampler`, ...) on hvdtune: a job started by
`hvd-tune run --host-discovery-script S --min-np A --max-np B ...` keeps
training when hosts fail and grows when hosts appear (docs/elastic.md).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                step()
                if state.batch % 10 == 0:
                    state.commit()
            state.batch = 0

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    train(state)
"""

import copy
import math

import torch

import hvdtune
from hvdtune.elastic import (ElasticJobEnded, HorovodInternalError,
                             HostsUpdatedInterrupt, ObjectState, State,
                             run_fn, world_version)
from hvdtune.torch.functions import (allgather_object, broadcast_object,
                                     broadcast_optimizer_state,
                                     broadcast_parameters)

__all__ = [
    "run", "State", "ObjectState", "TorchState", "ElasticSampler",
    "HorovodInternalError", "HostsUpdatedInterrupt", "ElasticJobEnded",
    "world_version"
]


def _reset():
    # The runtime restarts on the next world the launcher publishes.
    hvdtune.shutdown()
    import hvdtune.torch as hvd
    hvd.init()


def run(func):
    """Decorator for `func(state, ...)`: on a failed collective the state
    goes back to its last commit, the job continues on the ranks that are
    left (and on new ones), synced from rank 0."""
    return run_fn(func, _reset)


def _clear_pending(optimizer):
    """A DistributedOptimizer whose step failed holds the handles of the
    failed allreduces and counts of backward passes: both start afresh."""
    handles = getattr(optimizer, "_handles", None)
    if handles is None:
        return
    handles.clear()
    optimizer._group_submitted.clear()
    for p in optimizer._allreduce_delay:
        optimizer._allreduce_delay[p] = optimizer.backward_passes_per_step
    optimizer._synchronized = False


class ElasticSampler(torch.utils.data.Sampler):
    """A sampler that splits what is left of an epoch among the ranks of
    the current world. Record what each rank trained on
    (`record_batch(batch_idx, batch_size)` or `record_indices`); after a
    reset the samples all ranks recorded are not seen again this epoch,
    and the rest is split over the new world. `set_epoch(e)` starts an
    epoch (shuffled by `seed + e` when `shuffle`)."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Marks this rank's batch `batch_idx` (of `batch_size`) trained."""
        start = batch_idx * batch_size
        self.record_indices(self.indices[start:start + batch_size])

    def record_indices(self, indices):
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx, batch_size):
        start = batch_idx * batch_size
        return self.indices[start:start + batch_size]

    def state_dict(self):
        return {"epoch": self.epoch,
                "processed_indices": set(self.processed_indices)}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self):
        """Splits what is left of the epoch over the current world."""
        self.num_replicas = hvdtune.size() if hvdtune.is_initialized() else 1
        self.rank = hvdtune.rank() if hvdtune.is_initialized() else 0
        self.remaining_indices = [
            i for i in range(len(self.dataset))
            if i not in self.processed_indices
        ]
        self.num_samples = int(
            math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        self.indices = self._my_indices()

    def _my_indices(self):
        order = list(self.remaining_indices)
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = [order[i] for i in torch.randperm(len(order),
                                                       generator=g).tolist()]
        # Every rank gets num_samples: the first few repeat at the end.
        if order:
            while len(order) < self.total_size:
                order += order[:self.total_size - len(order)]
        return order[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        self.indices = self._my_indices()
        return iter(self.indices)

    def __len__(self):
        return self.num_samples


class TorchState(ObjectState):
    """The state of a PyTorch training loop: a model's parameters and
    buffers, an optimizer's state, ElasticSamplers and any other attributes
    (`TorchState(model, optimizer, epoch=0, batch=0)`). commit() keeps a
    copy in memory; after a failure restore() puts it back; sync()
    broadcasts rank 0's to every rank."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        self._samplers = {k: v for k, v in kwargs.items()
                          if isinstance(v, ElasticSampler)}
        others = {k: v for k, v in kwargs.items() if k not in self._samplers}
        for name, sampler in self._samplers.items():
            setattr(self, name, sampler)
        self._saved_model = None
        self._saved_optimizer = None
        self._saved_samplers = {}
        super().__init__(broadcast_object, hvdtune.rank, **others)
        self._save_torch()

    def _save_torch(self):
        if self.model is not None:
            self._saved_model = copy.deepcopy(self.model.state_dict())
        if self.optimizer is not None:
            self._saved_optimizer = copy.deepcopy(self.optimizer.state_dict())
        self._saved_samplers = {
            name: copy.deepcopy(s.state_dict())
            for name, s in self._samplers.items()
        }

    def save(self):
        self._save_torch()
        super().save()

    def restore(self):
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            _clear_pending(self.optimizer)
            self.optimizer.load_state_dict(self._saved_optimizer)
        for name, s in self._samplers.items():
            s.load_state_dict(self._saved_samplers[name])
        super().restore()

    def _sync_samplers(self):
        # Every rank recorded its own samples: the union is what the job
        # trained on this epoch.
        for s in self._samplers.values():
            processed = set()
            for part in allgather_object(s.processed_indices):
                processed |= part
            state = s.state_dict()
            state["processed_indices"] = processed
            s.load_state_dict(broadcast_object(state, root_rank=0))

    def sync(self):
        if self.optimizer is not None:
            _clear_pending(self.optimizer)
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank=0)
        self._sync_samplers()
        super().sync()
        self._save_torch()

    def on_reset(self):
        if self.optimizer is not None:
            _clear_pending(self.optimizer)
        super().on_reset()
        # Also after a reset that skips sync (hosts only removed): the
        # samplers' split follows the new world.
        self._sync_samplers()
