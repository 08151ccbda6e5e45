#!/usr/bin/env python3
"""Metrics and timeline tests against real multi-rank jobs (tests/telemetry).

    telemetry_test.py MODE --job TELEMETRY_JOB --mpirun "MPIRUN ARGS" [--repo DIR]

MODE: promtool | port_in_use | timeline | timeline_kill. Each starts
telemetry_job under mpirun with the HOROVOD_* variables it tests and fails
(exit 1, saying why) when something is off.
"""
import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ENDPOINT = re.compile(r"\[hvdtune rank (\d+)\] metrics at (http://\S+)")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


class Job:
    """telemetry_job under mpirun; stderr goes to a file we can poll."""

    def __init__(self, args, ranks, env, job_args, work):
        self.log_path = os.path.join(work, "job.log")
        self.log = open(self.log_path, "w")
        e = dict(os.environ)
        e.update(env)
        cmd = shlex.split(args.mpirun) + ["-np", str(ranks)]
        for k in env:
            cmd += ["-x", k]
        cmd += [args.job] + job_args
        self.proc = subprocess.Popen(cmd, env=e, stdout=self.log,
                                     stderr=subprocess.STDOUT)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_for(self, pattern, count, timeout):
        end = time.time() + timeout
        while time.time() < end:
            found = re.findall(pattern, self.text())
            if len(found) >= count:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        fail("expected %d x %r in the job's output; got:\n%s" %
             (count, pattern, self.text()))

    def finish(self, timeout=120):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("job did not finish:\n" + self.text())
        if rc != 0:
            fail("job exited %d:\n%s" % (rc, self.text()))
        return self.text()


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def series(text):
    return [l for l in text.splitlines() if l and not l.startswith("#")]


def test_promtool(args, work):
    stop = os.path.join(work, "stop")
    job = Job(args, 4, {"HOROVOD_METRICS_PORT": "0"},
              ["--tensors", "40", "--unique-names", "1", "--stop-file", stop,
               "--max-seconds", "120"], work)
    endpoints = dict(job.wait_for(ENDPOINT.pattern, 4, 60))
    if sorted(endpoints) != ["0", "1", "2", "3"]:
        fail("endpoints of ranks %s" % sorted(endpoints))
    time.sleep(2)
    first = {r: scrape(u) for r, u in endpoints.items()}
    time.sleep(2)
    second = {r: scrape(u) for r, u in endpoints.items()}
    for rank, text in second.items():
        path = os.path.join(work, "rank%s.prom" % rank)
        with open(path, "w") as f:
            f.write(text)
        check = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True, text=True)
        if check.returncode != 0 or check.stdout.strip() or check.stderr.strip():
            fail("promtool check metrics on rank %s:\n%s%s" %
                 (rank, check.stdout, check.stderr))
        if 'rank="%s"' % rank not in text:
            fail("rank %s's series lack rank=\"%s\"" % (rank, rank))
        # Bounded labels: thousands of distinct tensor names went by, none
        # is a label, and the series count did not grow between scrapes.
        if "grad." in text:
            fail("a tensor name appears in rank %s's metrics" % rank)
        if len(series(text)) != len(series(first[rank])):
            fail("rank %s: %d series, then %d" %
                 (rank, len(series(first[rank])), len(series(text))))
        tensors = sum(float(l.split()[-1]) for l in series(text)
                      if l.startswith("hvdtune_tensors_total{"))
        if tensors < 1000:
            fail("rank %s counted only %d tensors" % (rank, tensors))
        for name in ["hvdtune_build_info", "hvdtune_collective_bytes_total",
                     "hvdtune_collective_latency_seconds_bucket",
                     "hvdtune_knob_value", "hvdtune_autotune_phase"]:
            if name not in text:
                fail("%s missing on rank %s" % (name, rank))
    print("promtool: 4 ranks, %d series each, %d+ tensor names, clean" %
          (len(series(second["0"])), tensors))
    open(stop, "w").close()
    out = job.finish()
    if "telemetry_job: done" not in out:
        fail("job did not report done:\n" + out)


def test_port_in_use(args, work):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    job = Job(args, 2, {"HOROVOD_METRICS_PORT": str(port)},
              ["--tensors", "10", "--steps", "30"], work)
    out = job.finish()
    warnings = re.findall(r"warning: no metrics endpoint: cannot listen on "
                          r"127\.0\.0\.1:%d\b" % port, out)
    if len(warnings) != 1:
        fail("expected one warning naming port %d:\n%s" % (port, out))
    if "telemetry_job: done" not in out:
        fail("job did not finish its steps:\n" + out)
    print("port_in_use: one warning, job finished")


def load_events(path):
    with open(path) as f:
        return json.load(f)


def check_tensors(events, tensors, min_steps, spans):
    rows = {e["pid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e["name"] == "process_name"}
    names = set(rows.values())
    for t in range(tensors):
        if "grad.%d" % t not in names:
            fail("no timeline row for grad.%d" % t)
    for span in spans:
        per_row = {}
        for e in events:
            if e.get("ph") == "X" and e["name"] == span:
                per_row[rows[e["pid"]]] = per_row.get(rows[e["pid"]], 0) + 1
        for t in range(tensors):
            if per_row.get("grad.%d" % t, 0) < min_steps:
                fail("grad.%d has %d %s spans, expected >= %d" %
                     (t, per_row.get("grad.%d" % t, 0), span, min_steps))


def test_timeline(args, work):
    path = os.path.join(work, "timeline.json")
    steps = 40
    env = {"HOROVOD_TIMELINE": path, "HOROVOD_TIMELINE_MARK_CYCLES": "1",
           "HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
           "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
           "HVDTUNE_AUTOTUNE_SAMPLE_PRECISION": "0",
           "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "4",
           "HOROVOD_AUTOTUNE_DB": os.path.join(work, "store.db")}
    job = Job(args, 2, env, ["--tensors", "20", "--steps", str(steps)], work)
    job.finish()
    events = load_events(path)
    check_tensors(events, 20, steps,
                  ["NEGOTIATE_ALLREDUCE", "ALLREDUCE", "QUEUE",
                   "MPI_ALLREDUCE"])
    names = {e["name"] for e in events}
    for n in ["MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER",
              "CYCLE_START", "AUTOTUNE_SAMPLE", "KNOBS_APPLIED",
              "STORE_LOOKUP"]:
        if n not in names:
            fail("no %s event in the timeline" % n)
    for e in events:
        if e.get("ph") in ("X", "i") and (e.get("dur", 0) < 0 or e["ts"] < 0):
            fail("negative time in %r" % e)
    # A freeze after exploring carries the model's estimates with intervals.
    for e in events:
        if e["name"] == "AUTOTUNE_FROZEN" and e["args"].get("from") == \
                "exploring":
            # With this job's 4 samples the model is not fitted yet: one
            # sample of each configuration has no interval (null bounds);
            # where there is one, it brackets the estimate.
            est = e["args"].get("estimate_bytes_per_second") or {}
            if not (est.get("mean") or 0) > 0 or (
                    est.get("low") is not None and
                    not est["low"] <= est["mean"] <= est["high"]):
                fail("AUTOTUNE_FROZEN without an estimate inside its "
                     "interval: %r" % e)
            gain = e["args"].get("gain") or {}
            if gain.get("mean") is None or "kept_initial" not in e["args"]:
                fail("AUTOTUNE_FROZEN without the estimated gain: %r" % e)
    print("timeline: %d events, every tensor's spans" % len(events))


def test_timeline_kill(args, work):
    path = os.path.join(work, "timeline.json")
    job = Job(args, 2, {"HOROVOD_TIMELINE": path},
              ["--tensors", "20", "--max-seconds", "120"], work)
    pids = job.wait_for(r"telemetry_job: rank \d+ pid (\d+)", 2, 60)
    end = time.time() + 60
    while time.time() < end and (not os.path.exists(path) or
                                 os.path.getsize(path) < 200000):
        time.sleep(0.2)
    for pid in pids:
        os.kill(int(pid), signal.SIGKILL)
    try:
        job.proc.wait(60)
    except subprocess.TimeoutExpired:
        job.proc.kill()
    with open(path) as f:
        text = f.read()
    if text.rstrip().endswith("]"):
        fail("the killed run's timeline was closed; the kill came too late")
    repaired = os.path.join(work, "repaired.json")
    tool = os.path.join(args.repo, "timeline", "repair_timeline.py")
    subprocess.run([sys.executable, tool, path, repaired], check=True)
    events = load_events(repaired)
    check_tensors(events, 20, 1, ["ALLREDUCE", "MPI_ALLREDUCE"])
    print("timeline_kill: %d bytes, %d events after repair" %
          (len(text), len(events)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["promtool", "port_in_use", "timeline",
                                    "timeline_kill"])
    p.add_argument("--job", required=True)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--repo", default=os.path.join(os.path.dirname(__file__),
                                                  "..", ".."))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        globals()["test_" + args.mode](args, work)


if __name__ == "__main__":
    main()
