"""The Gloo engine's meeting point for a job whose launcher serves none
(torchrun, or any launcher that only hands torch.distributed a store).

One rank starts this module as a process of its own (serve()). It serves
the rendezvous store (hvdtune/rendezvous.h) the ranks meet through, and it
watches one connection from every rank (Watch): a rank whose connection
closes without saying goodbye is marked lost in the store, so that the
survivors' errors name it, as under `hvd-tune run --gloo`. Being its own
process, it outlives the rank that started it (which may be the one that
dies); it ends once every rank has closed its connection, or when no rank
is connected for `--timeout` seconds.

    python3 -m hvdtune._rendezvous --address A --size N --timeout S

prints "PORT WATCH_PORT" on one line once it listens.
"""

import argparse
import atexit
import fcntl
import os
import selectors
import socket
import struct
import subprocess
import sys
import time

# How a rank is described when its connection closed without a goodbye.
_ENDED = "its process ended without shutting hvdtune down"
# How long the rendezvous process waits with no rank connected before it
# ends: rank 0 connects before it tells the others where to meet, so the
# store is without a connected rank only when the job is over or rank 0
# died before the others came.
_QUIET_SECONDS = 60


def route_to(address):
    """This host's IPv4 address on the route to `address` (no packet is
    sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((socket.gethostbyname(address), 9))
        return s.getsockname()[0]


def interface_of(ip):
    """The name of the network interface holding IPv4 address `ip`, or None."""
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                request = struct.pack("256s", name.encode()[:15])
                reply = fcntl.ioctl(s.fileno(), siocgifaddr, request)
            except OSError:
                continue  # no IPv4 address
            if socket.inet_ntoa(reply[20:24]) == ip:
                return name
    return None


def address_of(interface):
    """The IPv4 address of network interface `interface`."""
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            request = struct.pack("256s", interface.encode()[:15])
            reply = fcntl.ioctl(s.fileno(), siocgifaddr, request)
        except OSError as e:
            raise RuntimeError("network interface %r has no IPv4 address: %s"
                               % (interface, e)) from e
    return socket.inet_ntoa(reply[20:24])


def serve(address, size):
    """Starts the rendezvous process on `address` for `size` ranks and
    returns (port, watch_port, process). Raises RuntimeError when it does
    not start (its own message is on this process's stderr, which it
    shares)."""
    env = dict(os.environ)
    # The package as this process found it (a build tree, a test's path).
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hvdtune._rendezvous", "--address", address,
         "--size", str(size), "--timeout", str(_QUIET_SECONDS)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env,
        # Not in the launcher's process group: a signal meant for the ranks
        # (Ctrl-C) must not take the store from the ranks still reading it.
        start_new_session=True)
    line = proc.stdout.readline().decode()
    proc.stdout.close()
    parts = line.split()
    if len(parts) != 2:
        proc.wait()
        raise RuntimeError(
            "the rendezvous process (python3 -m hvdtune._rendezvous) did not "
            "start on %s: exit status %s (its message is above)" %
            (address, proc.returncode))
    return int(parts[0]), int(parts[1]), proc


class Watch:
    """A rank's connection to the rendezvous process: its closing without
    goodbye() marks the rank lost. goodbye() is called at exit; an uncaught
    exception other than a failure hvdtune reports marks the rank lost with
    the exception, so that the survivors' errors say why."""

    def __init__(self, address, port, rank, timeout):
        self._sock = socket.create_connection((address, port),
                                              timeout=timeout)
        self._sock.settimeout(None)
        self._sock.sendall(b"rank %d\n" % rank)
        self._closed = False
        atexit.register(self.goodbye)
        previous = sys.excepthook

        def hook(kind, value, tb):
            message = "%s: %s" % (kind.__name__, value)
            # A survivor's failure caused by the lost rank names that rank
            # already; it is not lost itself.
            if "hvdtune" not in message:
                self.lost("raised " + message.splitlines()[0][:300]
                          if message else "raised")
            previous(kind, value, tb)

        sys.excepthook = hook

    def _send_and_close(self, line):
        if self._closed:
            return
        self._closed = True
        try:
            self._sock.sendall(line.encode() + b"\n")
        except OSError:
            pass  # the rendezvous process is gone: nothing to tell
        self._sock.close()

    def goodbye(self):
        self._send_and_close("bye")

    def lost(self, why):
        self._send_and_close("lost " + why.replace("\n", " "))


class _Rank:

    def __init__(self):
        self.rank = None
        self.buffer = b""
        self.done = False


def _serve_forever(args):
    from hvdtune import _core
    server = _core.RendezvousServer(args.address, 0)
    listener = socket.create_server((args.address, 0), backlog=1024)
    print(server.port, listener.getsockname()[1], flush=True)
    # The reader closes the pipe after that line.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    ranks = {}
    seen = set()
    quiet_since = time.monotonic()

    def mark(conn, why):
        if conn.rank is not None and not conn.done:
            server.set(_core.RendezvousServer.lost_rank_key(conn.rank), why)
        conn.done = True

    while True:
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj is listener:
                sock, _ = listener.accept()
                ranks[sock] = _Rank()
                selector.register(sock, selectors.EVENT_READ)
                continue
            sock, conn = key.fileobj, ranks[key.fileobj]
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            conn.buffer += data
            while b"\n" in conn.buffer:
                line, conn.buffer = conn.buffer.split(b"\n", 1)
                word, _, rest = line.decode(errors="replace").partition(" ")
                if word == "rank" and rest.isdigit():
                    conn.rank = int(rest)
                    seen.add(conn.rank)
                elif word == "bye":
                    conn.done = True
                elif word == "lost":
                    mark(conn, rest)
            if not data:
                mark(conn, _ENDED)
                selector.unregister(sock)
                sock.close()
                del ranks[sock]
        if ranks:
            quiet_since = time.monotonic()
        elif (len(seen) >= args.size or
              time.monotonic() - quiet_since > args.timeout):
            return


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m hvdtune._rendezvous",
        description="Serves the Gloo engine's rendezvous store and marks "
        "ranks lost whose watch connection closes without goodbye.")
    parser.add_argument("--address", required=True,
                        help="the IPv4 address to listen on")
    parser.add_argument("--size", type=int, required=True,
                        help="the number of ranks")
    parser.add_argument("--timeout", type=float, required=True,
                        help="seconds without any rank connected before it "
                        "ends")
    _serve_forever(parser.parse_args(argv))


if __name__ == "__main__":
    main()
