"""Runs a script under torchrun on this machine, on a free port:

    python3 torchrun.py -n N -- SCRIPT ARGS...

torch 1.13 on Python 3.11 (Debian 12) cannot parse torchrun's default
--redirects/--tee of 0 (its Std flag 0 is not iterated), so stderr is
redirected and tee'd (2), which every torch parses. Exits with torchrun's
status."""

import argparse
import os
import socket
import subprocess
import sys


def command(nproc, argv, port=None):
    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc_per_node=%d" % nproc, "--master_addr=127.0.0.1",
        "--master_port=%d" % port, "--redirects", "2", "--tee", "2"
    ] + list(argv)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, required=True, help="ranks")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(subprocess.call(command(args.n, argv), env=env))


if __name__ == "__main__":
    main()
