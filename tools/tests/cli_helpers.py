"""What the hvd-tune end-to-end tests (test_cli_*.py) share: running
hvd-tune and the trainer, and reading the store the sweep made.

ARGS holds the command line's --hvd-tune, --trainer, --work and --source
(conftest.py's cli_args fixture fills it in before each test).
"""
import argparse
import hashlib
import json
import os
import shlex
import sqlite3
import subprocess

import pytest

ARGS = argparse.Namespace()
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to",
          "none", "--mca", "btl", "self,vader,tcp"]
WORKLOAD = ["--workload", "many-small", "--scale", "0.25"]


def fail(msg):
    pytest.fail(msg, pytrace=False)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(cmd, env=None, expect=0, timeout=240):
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=full_env,
                       timeout=timeout)
    if expect is not None and p.returncode != expect:
        fail(f"{shlex.join(cmd)} exited {p.returncode}, expected {expect}\n"
             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def tune(*args, **kw):
    return run([ARGS.hvd_tune, *args], **kw)


def store():
    return os.path.join(ARGS.work, "store.db")


def sweep_result():
    with open(os.path.join(ARGS.work, "sweep.json")) as f:
        return json.load(f)


def dump(path):
    """Every row of every table: what 'changes nothing' compares."""
    con = sqlite3.connect(path)
    rows = []
    for (name,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
        rows.append((name, sorted(map(repr, con.execute(f"SELECT * FROM {name}")))))
    con.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def trainer(env, *extra):
    p = run(MPIRUN + ["-np", "2", ARGS.trainer, *WORKLOAD,
                      "--warmup-steps", "2", "--measure-steps", "4", "--json",
                      *extra], env=env)
    return json.loads(p.stdout.strip().splitlines()[-1])
