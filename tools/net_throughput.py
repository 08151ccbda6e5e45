#!/usr/bin/python3
"""One TCP stream's goodput between two hosts, measured by the receiver.

  net_throughput.py server ADDRESS PORT [WARMUP_S]
      accepts one connection, drains it, and prints the goodput in Gbit/s
      over the bytes received after the first WARMUP_S seconds (0.5), so
      the slow start and the sender's socket buffer do not count;
  net_throughput.py client ADDRESS PORT SECONDS
      connects (retrying for 5 s while the server starts) and sends for
      SECONDS.

tools/cluster.sh netperf runs the two ends in two nodes' namespaces.
"""
import socket
import sys
import time


def server(address, port, warmup):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, port))
    listener.listen(1)
    conn, _ = listener.accept()
    buf = bytearray(1 << 20)
    first = None
    start = None
    counted = 0
    while True:
        got = conn.recv_into(buf)
        if not got:
            break
        now = time.monotonic()
        if first is None:
            first = now
        if start is None:
            if now - first >= warmup:
                start = now
            continue
        counted += got
    end = time.monotonic()
    if start is None or end <= start:
        sys.exit("net_throughput: the stream ended before the warm-up was over")
    print("%.3f" % (counted * 8 / (end - start) / 1e9))


def client(address, port, seconds):
    deadline = time.monotonic() + 5
    while True:
        try:
            conn = socket.create_connection((address, port), timeout=5)
            break
        except OSError as err:
            if time.monotonic() > deadline:
                sys.exit("net_throughput: cannot connect to %s:%d: %s" %
                         (address, port, err))
            time.sleep(0.05)
    conn.settimeout(None)
    buf = bytes(1 << 20)
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        conn.sendall(buf)
    conn.close()


def main(argv):
    usage = ("usage: net_throughput.py server ADDRESS PORT [WARMUP_S] | "
             "client ADDRESS PORT SECONDS")
    try:
        if len(argv) in (4, 5) and argv[1] == "server":
            server(argv[2], int(argv[3]),
                   float(argv[4]) if len(argv) == 5 else 0.5)
        elif len(argv) == 5 and argv[1] == "client":
            client(argv[2], int(argv[3]), float(argv[4]))
        else:
            sys.exit(usage)
    except ValueError as err:
        sys.exit("net_throughput: %s (%s)" % (err, usage))


if __name__ == "__main__":
    main(sys.argv)
