"""bench/drift_series.py: a crashed run is a failure, never a run with 0
re-tunes or 0 exploration samples (pytest; ctest runs it as
bench_drift_series_failures)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import drift_series as ds  # noqa: E402

HEADER = "sample,phase,score,allreduce_algorithm\n"


def write(tmp_path, text):
    path = tmp_path / "autotune.csv"
    path.write_text(text)
    return str(path)


def test_a_crash_is_a_failure_whatever_the_log_says(tmp_path):
    rows = ds.read_log(write(tmp_path, HEADER + "1,frozen,1.0,native\n"))
    assert ds.run_failure(0, rows) is None
    assert ds.run_failure(1, rows) == "exit 1"
    assert ds.run_failure(-9, rows) == "exit -9"
    assert ds.run_failure(None, rows) == "did not finish"


def test_an_empty_or_missing_log_is_a_failure(tmp_path):
    assert ds.read_log(str(tmp_path / "missing.csv")) == []
    assert ds.run_failure(0, []) == "no autotune samples logged"
    # A header and a partly written first line: no sample yet.
    rows = ds.read_log(write(tmp_path, HEADER + "1,explo"))
    assert rows == []
    assert ds.run_failure(0, rows) == "no autotune samples logged"


def test_a_steady_run_must_have_frozen(tmp_path):
    rows = ds.read_log(write(tmp_path, HEADER + "1,exploring,1.0,native\n"
                             "2,exploring,2.0,ring\n"))
    assert ds.run_failure(0, rows) is None
    assert ds.run_failure(0, rows, need_frozen=True) == \
        "never froze (2 samples)"
    assert ds.retunes(rows) == []


def test_retunes_count_frozen_then_retuning(tmp_path):
    rows = ds.read_log(write(tmp_path, HEADER + "1,exploring,1,native\n"
                             "2,frozen,1,native\n3,retuning,1,native\n"
                             "4,frozen,1,ring\n"))
    assert ds.retunes(rows) == [2]


def test_failed_note_names_every_failed_run():
    assert ds.failed_note([]) == ""
    note = ds.failed_note([(2, "exit 1"), (5, "no autotune samples logged")])
    assert "2 runs FAILED" in note
    assert "run 2: exit 1" in note and "run 5: no autotune" in note


def test_a_series_of_crashing_runs_reports_failures_and_exits_1(tmp_path):
    # The real script, the real launcher: a trainer that does not exist
    # makes every run exit non-zero under mpirun.
    missing = tmp_path / "no_build"
    (missing / "bench").mkdir(parents=True)
    res = subprocess.run(
        [sys.executable, os.path.join(HERE, "drift_series.py"), "steady",
         "--where", "node", "--runs", "2", "--steps", "10", "--ranks", "2",
         "--build", str(missing), "--keep", str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "run 1: FAILED" in res.stdout
    assert "run 2: FAILED" in res.stdout
    assert "0 re-tunes, in 0 of 0 completed runs; 2 runs FAILED" in res.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
