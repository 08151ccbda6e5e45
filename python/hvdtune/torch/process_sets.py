"""Horovod's process sets: some ranks of the job, each added set with a
runtime of its own on its ranks."""

import hvdtune
from hvdtune import _core
from hvdtune.torch._common import _error

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


