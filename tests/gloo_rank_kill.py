#!/usr/bin/env python3
"""A rank killed on the Gloo engine: `hvd-tune run --gloo -np N` runs
gloo_launch_test with --kill-rank N-1; the rank dies (SIGKILL) while every
rank has allreduces pending. Passes when, in every run, each surviving rank
printed that its pending handle failed with an error naming the lost rank
within --within seconds (gloo_launch_test checks both and exits 0), the
launcher reported the killed rank and nothing aborted or hung (each run has a
wall-clock limit). Prints each survivor's time to failure and their median.

With --kill-after S the rank dies S seconds into steps of large tensors
(most likely in the middle of a transfer, see gloo_launch_test.cc), and with
--expect TEXT some survivor's error must contain TEXT in every run (which
wait saw the loss).

Usage: gloo_rank_kill.py HVD_TUNE GLOO_LAUNCH_TEST [--np N] [--runs K]
       [--within SECONDS] [--kill-after SECONDS] [--expect TEXT]"""
import argparse
import os
import re
import statistics
import subprocess
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("hvd_tune")
    p.add_argument("test_program")
    p.add_argument("--np", type=int, default=3)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--within", type=float, default=5.0)
    p.add_argument("--kill-after", type=float, default=None)
    p.add_argument("--expect", default=None)
    a = p.parse_args()
    killed = a.np - 1
    env = dict(os.environ)
    env.setdefault("HOROVOD_GLOO_TIMEOUT_SECONDS", "30")
    env["PATH"] = "/nonexistent"  # no mpirun: the Gloo launcher needs none
    times = []
    failures = 0
    for run in range(a.runs):
        cmd = [a.hvd_tune, "run", "--gloo", "-np", str(a.np), "--",
               a.test_program, "--kill-rank", str(killed),
               "--within", str(a.within)]
        if a.kill_after is not None:
            cmd += ["--kill-after", str(a.kill_after)]
        try:
            out = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                 timeout=120)
        except subprocess.TimeoutExpired:
            print(f"run {run + 1}: HUNG (no end within 120 s)")
            failures += 1
            continue
        text = out.stdout + out.stderr
        survivors = re.findall(r"^rank (\d+): handle failed after ([0-9.]+) s",
                               out.stdout, re.M)
        problems = []
        if out.returncode == 0:
            problems.append("the launcher reported success")
        if f"rank {killed} killed by signal 9" not in text:
            problems.append("the launcher did not name the killed rank")
        if sorted(int(r) for r, _ in survivors) != list(range(killed)):
            problems.append(f"survivors that saw the failure: {survivors}")
        if a.expect is not None and a.expect not in out.stdout:
            problems.append(f"no survivor's error says '{a.expect}'")
        for bad in ("FAIL", "terminate called", "Aborted", "core dumped"):
            if bad in text:
                problems.append(f"output contains '{bad}'")
        took = [float(t) for _, t in survivors]
        times += took
        status = "ok" if not problems else "BAD: " + "; ".join(problems)
        print(f"run {run + 1}: {status}; survivors failed after "
              f"{', '.join(f'{t:.2f}' for t in took)} s")
        if problems:
            failures += 1
            print(text)
    if times:
        print(f"{a.runs - failures} of {a.runs} runs passed; time to failure: "
              f"median {statistics.median(times):.2f} s, max {max(times):.2f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
