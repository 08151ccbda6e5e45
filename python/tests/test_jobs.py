"""Whole jobs launched with mpirun from a plain pytest process: the examples
(the digits network's accuracy, the synthetic benchmark tuned with
HOROVOD_AUTOTUNE=1) and a rank that fails mid-step, which must end the job
instead of leaving the other rank waiting."""

import csv
import os
import re
import subprocess
import sys
import textwrap

import pytest

SOURCE = os.environ.get(
    "HVDTUNE_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
MPIRUN = [
    os.environ.get("MPIEXEC", "mpirun"), "--allow-run-as-root",
    "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader,tcp"
]


def run_job(ranks, args, timeout, env=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    cmd = MPIRUN + ["-np", str(ranks), sys.executable] + args
    return subprocess.run(cmd, capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def test_digits_example_reaches_95_percent_on_2_ranks():
    job = run_job(2, [os.path.join(SOURCE, "examples", "pytorch_digits.py")],
                  timeout=180)
    assert job.returncode == 0, job.stdout + job.stderr
    match = re.search(r"test accuracy: ([0-9.]+)", job.stdout)
    assert match, job.stdout
    assert float(match.group(1)) >= 0.95, job.stdout


def test_synthetic_benchmark_autotunes_and_freezes(tmp_path):
    log = tmp_path / "autotune.csv"
    env = {
        "HOROVOD_AUTOTUNE": "1",
        "HOROVOD_AUTOTUNE_LOG": str(log),
        "HOROVOD_AUTOTUNE_DB": str(tmp_path / "store.db"),
        "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
        "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
        "HVDTUNE_AUTOTUNE_SAMPLE_PRECISION": "0",
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "4",
        # Stay frozen: two cores' noise would otherwise re-open tuning.
        "HVDTUNE_AUTOTUNE_RETUNE_DROP": "0",
    }
    # (1 warm-up + 4 exploration samples) x 2 steps, plus the step that
    # straddles each change: 30 steps leave room to freeze.
    job = run_job(2, [
        os.path.join(SOURCE, "examples", "pytorch_synthetic_benchmark.py"),
        "--model", "squeezenet1_1", "--batch-size", "4", "--image-size", "64",
        "--num-classes", "10", "--num-warmup-batches", "4",
        "--num-batches-per-iter", "4", "--num-iters", "7", "--json"
    ], timeout=240, env=env)
    assert job.returncode == 0, job.stdout + job.stderr
    assert "Total img/sec on 2 CPU(s):" in job.stdout
    assert re.search(r"autotune: frozen after \d+ samples", job.stderr), \
        job.stderr
    with open(log) as f:
        rows = list(csv.DictReader(f))
    phases = [r["phase"] for r in rows]
    assert "exploring" in phases and "frozen" in phases, phases
    assert all(float(r["score"]) > 0 for r in rows)
    assert '"autotune_phase": "frozen"' in job.stdout


FAILING_RANK = textwrap.dedent("""
    import time, numpy as np, hvdtune
    hvdtune.init()
    for step in range(100000):
        if hvdtune.rank() == 1 and step == 5:
            raise ValueError("boom at step %d" % step)
        if hvdtune.rank() == 0 and step == 8:
            time.sleep(600)  # busy elsewhere, not in a collective
        hvdtune.allreduce(np.ones(1000, np.float32), name="step.%d" % step)
""")

INTERRUPTED_RANK = textwrap.dedent("""
    import os, signal, threading, time, numpy as np, hvdtune
    hvdtune.init()
    if hvdtune.rank() == 1:
        # Ctrl-C while waiting for a collective rank 0 never joins.
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        hvdtune.allreduce(np.ones(4), name="never")
    else:
        time.sleep(600)
""")


@pytest.mark.parametrize("script,message", [
    (FAILING_RANK, "ValueError: boom at step 5"),
    (INTERRUPTED_RANK, "KeyboardInterrupt"),
], ids=["exception", "ctrl_c"])
def test_a_failing_rank_ends_the_job(tmp_path, script, message):
    path = tmp_path / "job.py"
    path.write_text(script)
    try:
        job = run_job(2, [str(path)], timeout=60)
    except subprocess.TimeoutExpired as e:
        pytest.fail("the job hung after one rank failed: %s" % e)
    assert job.returncode != 0
    assert message in job.stderr, job.stderr
    assert "aborting the job" in job.stderr, job.stderr


PEER_SHUT_DOWN = textwrap.dedent("""
    import time, torch, hvdtune.torch as hvd
    hvd.init()
    hvd.allreduce(torch.ones(2), name="before")
    if hvd.rank() == 1:
        hvd.shutdown()
        assert not hvd.is_initialized()
    else:
        time.sleep(1.0)  # rank 1 shut down (and may have exited) meanwhile
        start = time.monotonic()
        hvd.init()  # must not rebuild the runtime with the peer gone
        assert hvd.is_initialized() and hvd.rank() == 0
        assert time.monotonic() - start < 5, "init() waited for the peer"
        try:
            hvd.allreduce(torch.ones(2), name="after")
            raise SystemExit("a collective ran without the peer")
        except hvd.HorovodInternalError as e:
            assert e.code == "aborted", e.code
        print("rank 0: init after the peer's shutdown returned")
""")


def test_init_after_a_peer_shut_down_returns(tmp_path):
    path = tmp_path / "job.py"
    path.write_text(PEER_SHUT_DOWN)
    try:
        job = run_job(2, [str(path)], timeout=60)
    except subprocess.TimeoutExpired as e:
        pytest.fail("init() hung after a peer shut down: %s" % e)
    assert job.returncode == 0, job.stdout + job.stderr
    assert "init after the peer's shutdown returned" in job.stdout
