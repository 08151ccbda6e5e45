"""tools/horovod_torch_suite.py end to end, on a small suite of its own in
Horovod's layout (a unittest class importing horovod.torch): the shim
resolves the import to hvdtune.torch, and each outcome (pass, a failure on
one rank, a skip, a hang) is reported as such, per test and for the whole
file in one mpirun."""

import json
import os
import subprocess
import sys
import textwrap

SOURCE = os.environ.get(
    "HVDTUNE_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
HARNESS = os.path.join(SOURCE, "tools", "horovod_torch_suite.py")

SUITE = textwrap.dedent("""
    import time
    import unittest

    import torch

    import horovod.torch as hvd


    class SmallTests(unittest.TestCase):

        def test_a_fails_on_one_rank(self):
            hvd.init()
            assert hvd.rank() == 0, "rank %d is not rank zero" % hvd.rank()

        def test_b_hangs(self):
            hvd.init()
            if hvd.rank() == 1:
                hvd.allreduce(torch.ones(1), name="never.joined")
            else:
                time.sleep(600)  # busy, never joining it

        def test_c_passes(self):
            hvd.init()
            assert hvd.__name__ == "hvdtune.torch"
            total = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="c")
            assert total.item() == hvd.size()

        def test_d_skips(self):
            self.skipTest("nothing to do here")
""")


def run_harness(tmp_path, *args):
    (tmp_path / "test_small.py").write_text(SUITE)
    (tmp_path / "common.py").write_text("")
    out = tmp_path / "result.json"
    build = os.environ["PYTHONPATH"].split(os.pathsep)[0]
    job = subprocess.run(
        [sys.executable, HARNESS, str(tmp_path / "test_small.py"),
         "--build-python", build, "--python", sys.executable, "--json",
         str(out)] + list(args),
        capture_output=True, text=True, timeout=240)
    with open(out) as f:
        return job, json.load(f)


def outcomes(run):
    return {row["test"]: (row["outcome"], row["reason"])
            for row in run["rows"]}


def test_each_test_in_its_own_mpirun(tmp_path):
    job, report = run_harness(tmp_path, "--np", "2", "--timeout", "20")
    assert job.returncode == 1, job.stdout + job.stderr
    (run,) = report["runs"]
    got = outcomes(run)
    assert got["test_c_passes"] == ("PASS", "")
    outcome, reason = got["test_a_fails_on_one_rank"]
    assert outcome == "FAIL" and "rank 1" in reason, reason
    assert "is not rank zero" in reason, reason
    assert got["test_d_skips"][0] == "SKIP"
    assert "nothing to do here" in got["test_d_skips"][1]
    assert got["test_b_hangs"][0] == "HANG"
    assert run["counts"] == {"PASS": 1, "FAIL": 1, "SKIP": 1, "HANG": 1}
    assert "np=2 each : 1 pass, 1 fail, 1 skip, 1 hang of 4" in job.stdout


def test_whole_file_in_one_mpirun_reports_where_it_hung(tmp_path):
    job, report = run_harness(tmp_path, "--np", "2", "--whole-only",
                              "--whole-timeout", "30")
    assert job.returncode == 1, job.stdout + job.stderr
    (run,) = report["runs"]
    got = outcomes(run)
    assert got["test_a_fails_on_one_rank"][0] == "FAIL"
    # Both ranks are in test_b when the run times out; test_c never ran.
    assert got["test_b_hangs"][0] == "HANG", got
    assert "ranks [0, 1]" in got["test_b_hangs"][1]
    assert got["test_c_passes"][0] == "FAIL"
    assert "never ran" in got["test_c_passes"][1]
    assert run["exit"] is None  # timed out
