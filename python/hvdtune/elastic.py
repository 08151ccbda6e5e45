"""Elastic training, the framework-free part (Horovod's elastic API; the
PyTorch layer is hvdtune.torch.elastic).

A job started by `hvd-tune run --host-discovery-script ...` runs in worlds:
the launcher publishes each world (its ranks and their hosts) in the
rendezvous store, and a rank joins the next one when hvdtune.init() is
called again after shutdown(). Training code wraps its loop in `run`: a
failed collective raises HorovodInternalError, the state goes back to its
last commit, the runtime restarts on the next world, the state is synced
from the new rank 0 and the loop goes on (docs/elastic.md).
"""

import atexit
import copy
import functools
import os
import socket
import struct
import sys
import threading
import time

from . import _core

HorovodInternalError = _core.HvdtuneError


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by State.commit() / check_host_updates() on every rank at once
    when the launcher found hosts added or removed: the ranks reset to a
    world with the new hosts. `skip_sync`: only hosts were removed, so
    every remaining rank already holds the committed state."""

    def __init__(self, skip_sync=False):
        super().__init__("the job's hosts changed")
        self.skip_sync = skip_sync


class ElasticJobEnded(RuntimeError):
    """The launcher ended the job while this rank waited for a next world
    (fewer than --min-np slots past HOROVOD_ELASTIC_TIMEOUT, the reset
    limit, ...); the message says why."""


# -- the rendezvous store (tools/hvd_tune/elastic_launcher.h names the keys;
#    the wire format is runtime/src/core/engine/gloo/rendezvous_wire.h) ----

_OK, _TIMED_OUT = 0, 1


class _Store:
    """A client of the launcher's rendezvous store: set, get with a
    timeout, get without waiting."""

    def __init__(self, address, port, timeout_s=30.0):
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._sock = socket.create_connection((address, port),
                                                      timeout=timeout_s)
                break
            except OSError as e:
                if time.monotonic() >= deadline:
                    raise ElasticJobEnded(
                        "the elastic launcher's store at %s:%d is not "
                        "reachable: %s" % (address, port, e))
                time.sleep(0.1)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.settimeout(None)
        self._where = "%s:%d" % (address, port)

    @staticmethod
    def _string(b):
        return struct.pack("=I", len(b)) + b

    def _recv(self, n):
        out = b""
        while len(out) < n:
            chunk = self._sock.recv(n - len(out))
            if not chunk:
                raise ElasticJobEnded(
                    "the elastic launcher's store at %s closed the "
                    "connection (the launcher ended)" % self._where)
            out += chunk
        return out

    def _value(self):
        (n,) = struct.unpack("=I", self._recv(4))
        return self._recv(n)

    def set(self, key, value):
        self._sock.sendall(b"S" + self._string(key.encode()) +
                           self._string(value.encode()))
        self._recv(1)

    def get(self, key, timeout_s):
        """The value, or None when it did not come within timeout_s."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = max(0.0, deadline - time.monotonic())
            # The wire's timeout is 32-bit milliseconds: long waits in
            # chunks.
            ms = int(min(left, 3600.0) * 1000)
            self._sock.sendall(b"G" + self._string(key.encode()) +
                               struct.pack("=I", ms))
            if self._recv(1)[0] == _OK:
                return self._value().decode()
            if time.monotonic() >= deadline:
                return None

    def try_get(self, key):
        self._sock.sendall(b"T" + self._string(key.encode()))
        if self._recv(1)[0] == _OK:
            return self._value().decode()
        return None


# -- this process's place in the elastic job --------------------------------

_store = None
_version = None       # the world this process joined last
_members = []         # that world's worker ids, in rank order
_updates_seen = 0     # hosts updates known when it joined
_resets = {}          # cause -> how many resets this process went through
_last_cause = None    # why the world this process joined last was formed
_heartbeat = None     # the thread beating elastic/alive/<id>

# How often a rank tells the launcher it is alive (the launcher's timeout,
# HVDTUNE_ELASTIC_HEARTBEAT_SECONDS, is at least 1 s).
_BEAT_S = 0.5
# How often a rank waiting for the others of a new world looks again.
_POLL_S = 0.02


class _WorldLost(RuntimeError):
    """A world that cannot form: one of its ranks is lost (or the launcher
    moved on) before all of them arrived."""


def enabled():
    """True in a rank started by the elastic launcher."""
    return bool(os.environ.get("HVDTUNE_ELASTIC_ID"))


def _timeout():
    return float(os.environ.get("HOROVOD_ELASTIC_TIMEOUT", "600"))


def _client():
    global _store
    if _store is None:
        _store = _Store(os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"],
                        int(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"]))
    return _store


_beat_lock = threading.Lock()
_leaving = False


def _beat_forever(me):
    """Raises elastic/alive/<me> every _BEAT_S on a connection of its own,
    so that the launcher tells a silent host (cut off, hung) from a busy
    one. Ends quietly when the store cannot be reached: the launcher sees
    the silence."""
    try:
        store = _Store(os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"],
                       int(os.environ["HOROVOD_GLOO_RENDEZVOUS_PORT"]))
        n = 0
        while True:
            n += 1
            with _beat_lock:
                if _leaving:
                    return
                store.set("elastic/alive/%s" % me, str(n))
            time.sleep(_BEAT_S)
    except Exception:  # noqa: BLE001 - the launcher notices the silence
        pass


def _say_goodbye(me):
    """At exit: the beats stop for good, and the launcher is told so (the
    interpreter's and the runtime's teardown may take longer than the
    launcher's heartbeat timeout)."""
    global _leaving
    with _beat_lock:
        _leaving = True
        try:
            _client().set("elastic/alive/%s" % me, "exit")
        except Exception:  # noqa: BLE001 - the process ends anyway
            pass


def _start_heartbeat(me):
    global _heartbeat
    if _heartbeat is not None or os.environ.get(
            "HVDTUNE_ELASTIC_HEARTBEAT", "1") == "0":
        return
    _heartbeat = threading.Thread(target=_beat_forever, args=(me,),
                                  name="hvdtune-elastic-heartbeat",
                                  daemon=True)
    _heartbeat.start()
    atexit.register(_say_goodbye, me)


def _join_next_world():
    """Waits for the world after the one this process was in (the first:
    the world it was started for), and sets the variables the runtime
    reads for it."""
    global _version, _updates_seen, _members, _last_cause
    me = os.environ["HVDTUNE_ELASTIC_ID"]
    store = _client()
    _start_heartbeat(me)
    if _version is None:
        v = int(os.environ["HVDTUNE_ELASTIC_WORLD"])
    else:
        store.set("elastic/ready/%d/%s" % (_version, me), "1")
        v = _version + 1
    # The launcher waits up to HOROVOD_ELASTIC_TIMEOUT for enough hosts,
    # then answers "abort": a little longer here.
    text = store.get("elastic/world/%d" % v, _timeout() + 60)
    if text is None:
        raise ElasticJobEnded(
            "no world %d from the elastic launcher within "
            "HOROVOD_ELASTIC_TIMEOUT + 60 s" % v)
    if text.startswith("abort "):
        raise ElasticJobEnded("the elastic launcher ended the job: " +
                              text[len("abort "):].strip())
    lines = text.splitlines()
    header = lines[0].split()
    mine = None
    members = []
    for line in lines[1:]:
        fields = line.split()
        if fields:
            members.append(fields[0])
        if fields and fields[0] == me:
            mine = fields
    if _version is not None:
        cause = header[5] if len(header) > 5 else "rank_lost"
        _resets[cause] = _resets.get(cause, 0) + 1
        _last_cause = cause
    _version = v
    _members = members
    _updates_seen = int(header[3])
    if mine is None:
        # Not in this world (its host was removed): the launcher stops it.
        sys.stdout.flush()
        os._exit(0)
    names = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK",
             "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE")
    for name, value in zip(names, mine[1:7]):
        os.environ[name] = value
    os.environ["HOROVOD_HOSTNAME"] = mine[7]
    os.environ["HVDTUNE_GLOO_STORE_PREFIX"] = "elastic/%d/" % v
    # What the runtime exports (metrics, timeline) about the job's resets.
    os.environ["HVDTUNE_ELASTIC_WORLD"] = str(v)
    os.environ["HVDTUNE_ELASTIC_RESETS"] = ",".join(
        "%s=%d" % kv for kv in sorted(_resets.items()))
    os.environ["HVDTUNE_ELASTIC_LAST_RESET"] = _last_cause or ""


def _await_members():
    """Waits until every rank of the world just joined has reached it, so
    that the engine connects ranks that are all alive: a new worker may
    take seconds to start, and one that dies on the way would otherwise
    hold the others for HOROVOD_GLOO_TIMEOUT_SECONDS. Raises _WorldLost
    when the launcher marks a rank of this world lost or publishes a later
    world; waits at most HOROVOD_ELASTIC_TIMEOUT."""
    store = _client()
    v = _version
    store.set("elastic/arrived/%d/%s" % (v, os.environ["HVDTUNE_ELASTIC_ID"]),
              "1")
    waiting = list(_members)
    deadline = time.monotonic() + _timeout()
    while True:
        waiting = [m for m in waiting
                   if store.try_get("elastic/arrived/%d/%s" % (v, m)) is None]
        if not waiting:
            return
        for r in range(len(_members)):
            why = store.try_get("elastic/%d/hvdtune/lost/%d" % (v, r))
            if why is not None:
                raise _WorldLost("rank %d was lost before it connected (%s)" %
                                 (r, why))
        current = store.try_get("elastic/current")
        if current is not None and int(current) > v:
            raise _WorldLost("the launcher published world %s" % current)
        if time.monotonic() >= deadline:
            raise _WorldLost("worker(s) %s did not arrive within "
                             "HOROVOD_ELASTIC_TIMEOUT" % ", ".join(waiting))
        time.sleep(_POLL_S)


def _init_world(start_runtime):
    """hvdtune.init() in an elastic rank: join the next world and start the
    runtime on it; a world that cannot form (a rank died while it
    connected) is left for the one after."""
    from . import _counters
    while True:
        _join_next_world()
        # Unnamed collectives are numbered afresh in every world, so that
        # the ranks that joined it now and the survivors agree.
        _counters.clear()
        try:
            _await_members()
            start_runtime()
            return
        except _core.InvalidArgumentError:
            raise
        except (_core.HvdtuneError, _WorldLost) as e:
            sys.stderr.write("[hvdtune] elastic: world %d did not form (%s); "
                             "waiting for the next\n" % (_version, e))
            sys.stderr.flush()


def resets():
    """This process's resets so far, by cause ({"rank_lost": 2, ...})."""
    return dict(_resets)


def world_version():
    """The version of the world this rank runs in (None before init)."""
    return _version


def _hosts_updates():
    """The launcher's count of hosts updates, and their kind."""
    value = _client().try_get("elastic/hosts_updated") if enabled() else None
    if not value:
        return 0, ""
    count, kind = value.split()
    return int(count), kind


# -- state -------------------------------------------------------------------


class State:
    """What a training loop commits and gets back after a failure.
    Subclasses say how to save, restore and sync; `bcast_object(obj)`
    returns rank 0's obj on every rank, `get_rank()` this rank."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._get_rank = get_rank
        self._reset_callbacks = []
        self._updates_seen = _updates_seen

    def register_reset_callbacks(self, callbacks):
        """Functions called (no arguments) after every reset, before the
        state is synced: e.g. to scale the learning rate to the new size."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self._updates_seen = max(self._updates_seen, _updates_seen)
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (restored after a failure) and checks whether
        hosts came or went."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when the launcher
        announced a hosts change (rank 0's view, broadcast: all ranks raise
        together)."""
        local = _hosts_updates() if self._get_rank() == 0 else (0, "")
        count, kind = self._bcast_object(local)
        seen = max(self._updates_seen, _updates_seen)
        if count > seen:
            self._updates_seen = count
            raise HostsUpdatedInterrupt(skip_sync=kind == "removed")

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


class ObjectState(State):
    """Plain Python attributes (`ObjectState(bcast, get_rank, epoch=0,
    batch=0)` gives state.epoch, state.batch), saved by deep copy and
    synced from rank 0 by `bcast_object`."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object, get_rank)

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))

    def save(self):
        self._saved_state = {
            name: copy.deepcopy(getattr(self, name))
            for name in self._saved_state
        }

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self.save()
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()


def run_fn(func, reset):
    """Wraps `func(state, ...)`: sync the state from rank 0, run, and on a
    HorovodInternalError (a failed collective) restore the last commit,
    `reset()` the runtime onto the next world and go on; on a
    HostsUpdatedInterrupt reset likewise (the state is already current).
    Errors of the caller's own making (InvalidArgumentError) pass through."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except _core.InvalidArgumentError:
                raise
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            reset()
            state.on_reset()

    return wrapper
