"""hvd-tune doctor: passes here; each broken setting fails with what to fix."""
import json
import os
import socket

from cli_helpers import ARGS, check, store, tune


def test_doctor():
    p = tune("doctor", "--db", store())
    check("all checks passed" in p.stdout, p.stdout)
    report = json.loads(tune("doctor", "--db", store(), "--json").stdout)
    names = {c["check"] for c in report["checks"]}
    check({"mpi", "cuda", "store", "metrics", "environment"} <= names, names)
    p = tune("doctor", "--db", store(), env={"HOROVOD_CYCLE_TIME": "0"}, expect=1)
    check("HOROVOD_CYCLE_TIME" in p.stdout and "fix:" in p.stdout, p.stdout)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = tune("doctor", "--db", store(), "--metrics-port", str(port), expect=1)
        check(f"127.0.0.1:{port}" in p.stdout, p.stdout)
    corrupt = os.path.join(ARGS.work, "corrupt.db")
    open(corrupt, "wb").write(b"not a database at all" * 100)
    p = tune("doctor", "--db", corrupt, expect=1)
    check("corrupt.db" in p.stdout, p.stdout)
    print("doctor: ok")
