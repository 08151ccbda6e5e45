#!/usr/bin/env python3
"""Runs Horovod's PyTorch test suite (test/parallel/test_torch.py of
github:horovod/horovod, fetched separately: it is not part of this project)
against hvdtune.torch, as a measurement of the drop-in promise.

A temporary shim package makes `import horovod.torch as hvd` resolve to
`hvdtune.torch`. Each test runs in its own `mpirun -np N` (one N or several),
and with --whole also the whole file in one mpirun, each with a timeout;
every rank records the outcome of every test as it happens, so a hang
(a run past its timeout) still reports which test it was in.

    tools/horovod_torch_suite.py /tmp/hvd_ref/test_torch.py --np 2 3 --whole

With --gloo build/tools/hvd_tune/hvd-tune every run is launched by
`hvd-tune run --gloo` instead (the Gloo engine, no mpirun).

Prints PASS/FAIL/SKIP/HANG per test with the first line of each failure's
reason, then the counts; --json FILE writes the same as JSON. A test passes
when it passed on every rank, is skipped when no rank failed and one
skipped, and fails otherwise (a rank that never reported it included).
"""

import argparse
import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)

# The shim: `horovod.torch` is hvdtune.torch itself (the same module object,
# so module-level state and isinstance checks are shared).
SHIM_FILES = {
    "horovod/__init__.py": "",
    "horovod/torch/__init__.py":
        "import sys\nimport hvdtune.torch\n"
        "sys.modules[__name__] = hvdtune.torch\n",
    # Horovod's test helpers import this one function.
    "horovod/runner/__init__.py": "",
    "horovod/runner/util/__init__.py": "",
    "horovod/runner/util/threads.py": '''\
import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Runs target(*args) on a new thread and returns the thread."""
    def run():
        try:
            target(*args)
        except BaseException:
            if not silent:
                raise
    thread = threading.Thread(target=run, name=name, daemon=daemon)
    thread.start()
    return thread
''',
}

# Stand-ins for two third-party modules the helpers import, used only when
# the interpreter lacks them (the suite's torch tests use neither).
FALLBACK_MODULES = {
    "mock": "from unittest.mock import *  # noqa\n",
    "cloudpickle": "from pickle import *  # noqa\n",
}

# Runs on every rank: pytest on the given node ids, recording each test's
# start and outcome in rank<R>.jsonl as it happens.
RUNNER = '''\
import json
import os
import sys

import pytest

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK",
                          os.environ.get("PMI_RANK",
                                         os.environ.get("HOROVOD_RANK", "0"))))
log = open(os.path.join(sys.argv[1], "rank%d.jsonl" % rank), "a",
           buffering=1)


def first_line(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        text = crash.message
    elif isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        text = str(report.longrepr[2])
    else:
        text = str(report.longrepr or "")
        for line in text.splitlines():
            if line.startswith("E "):
                text = line[1:]
                break
    text = text.strip()
    return text.splitlines()[0] if text else ""


class Recorder:
    def pytest_runtest_logstart(self, nodeid, location):
        log.write(json.dumps({"test": nodeid.split("::")[-1],
                              "event": "start"}) + "\\n")

    def pytest_runtest_logreport(self, report):
        name = report.nodeid.split("::")[-1]
        if report.when == "call" or report.outcome != "passed":
            outcome = report.outcome
            if getattr(report, "wasxfail", None) is not None:
                outcome = "skipped"
            log.write(json.dumps({"test": name, "event": outcome,
                                  "when": report.when,
                                  "reason": first_line(report)}) + "\\n")


code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                    "-o", "addopts="] + sys.argv[2:], plugins=[Recorder()])
log.write(json.dumps({"event": "exit", "code": int(code)}) + "\\n")
log.close()
sys.exit(int(code))
'''


def test_names(path):
    """The test methods of the suite's test classes, in file order."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if (isinstance(item, ast.FunctionDef) and
                        item.name.startswith("test_")):
                    names.append((node.name, item.name))
    return names


def make_shim(root, python):
    for rel, text in SHIM_FILES.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    for module, text in FALLBACK_MODULES.items():
        probe = subprocess.run([python, "-c", "import " + module],
                               capture_output=True)
        if probe.returncode != 0:
            with open(os.path.join(root, module + ".py"), "w") as f:
                f.write(text)
    with open(os.path.join(root, "suite_runner.py"), "w") as f:
        f.write(RUNNER)


def read_logs(outdir, ranks):
    """{test: [per-rank (outcome, reason)]}, and the test each rank was in
    when its log ends without an outcome."""
    results, running = {}, {}
    for r in range(ranks):
        path = os.path.join(outdir, "rank%d.jsonl" % r)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a kill
                test = rec.get("test")
                if rec["event"] == "start":
                    running[r] = test
                elif rec["event"] == "exit":
                    running.pop(r, None)
                elif test is not None:
                    per = results.setdefault(test, {})
                    # A failing teardown after a passing call counts.
                    if per.get(r, ("passed", ""))[0] in ("passed", "skipped"):
                        per[r] = (rec["event"], rec.get("reason", ""))
                    if running.get(r) == test:
                        running.pop(r, None)
    return results, running


def combine(per_rank, ranks):
    """One outcome for a test from its per-rank outcomes."""
    outcomes = [per_rank.get(r) for r in range(ranks)]
    failed = [(r, o) for r, o in enumerate(outcomes)
              if o is None or o[0] not in ("passed", "skipped")]
    if failed:
        r, o = failed[0]
        if o is None:
            return "FAIL", "rank %d never reported it" % r
        return "FAIL", "rank %d: %s" % (r, o[1])
    if any(o[0] == "skipped" for o in outcomes):
        reason = next(o[1] for o in outcomes if o[0] == "skipped")
        return "SKIP", reason
    return "PASS", ""


def run_mpirun(args, np_, node_ids, outdir, shim, suite_dir, timeout):
    """One mpirun over `node_ids`; returns (exit code or None on timeout,
    seconds, tail of its output)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [shim, args.build_python, suite_dir] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("HVDTUNE_AUTOTUNE_STORE", "off")
    if args.gloo:
        # The Gloo engine: hvd-tune's own launcher, no mpirun.
        cmd = [args.gloo, "run", "--gloo", "-np", str(np_), "--"]
    else:
        cmd = [args.mpirun, "--allow-run-as-root", "--oversubscribe",
               "--bind-to", "none", "--mca", "btl", "self,vader,tcp",
               "-np", str(np_)]
    cmd += [args.python, os.path.join(shim, "suite_runner.py"),
            outdir] + node_ids
    start = time.monotonic()
    with open(os.path.join(outdir, "output.txt"), "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=outdir, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    with open(os.path.join(outdir, "output.txt"), "rb") as f:
        tail = f.read()[-4000:].decode("utf-8", "replace")
    return code, time.monotonic() - start, tail


def error_line(output):
    """The line of a job's output that best says why it failed."""
    lines = [l.strip() for l in output.splitlines()]
    lines = [l for l in lines if l and l.strip("-=") and "mpirun" not in l]
    for l in lines:
        if "Error" in l or "error" in l:
            return l[:240]
    return lines[-1][:240] if lines else ""


def summarize(rows):
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0, "HANG": 0}
    for row in rows:
        counts[row["outcome"]] += 1
    return counts


def print_rows(title, rows, stream):
    stream.write("== %s\n" % title)
    for row in rows:
        line = "%-4s %s" % (row["outcome"], row["test"])
        if row["reason"]:
            line += "  -- " + row["reason"][:240]
        stream.write(line + "\n")
    c = summarize(rows)
    stream.write("== %s: %d pass, %d fail, %d skip, %d hang of %d\n" %
                 (title, c["PASS"], c["FAIL"], c["SKIP"], c["HANG"],
                  len(rows)))
    stream.flush()


def run_each(args, np_, tests, shim, suite_dir, work):
    rows = []
    for cls, name in tests:
        outdir = os.path.join(work, "np%d" % np_, name)
        os.makedirs(outdir)
        node = "%s::%s::%s" % (args.suite, cls, name)
        code, secs, tail = run_mpirun(args, np_, [node], outdir, shim,
                                      suite_dir, args.timeout)
        results, running = read_logs(outdir, np_)
        if code is None:
            outcome, reason = "HANG", "no end within %ds" % args.timeout
        else:
            outcome, reason = combine(results.get(name, {}), np_)
            if outcome == "FAIL" and not results.get(name):
                reason = "no result (exit %d): %s" % (code, error_line(tail))
            elif outcome == "PASS" and code not in (0, 5):
                outcome, reason = "FAIL", "job exited %d after it passed" % code
        row = {"test": name, "outcome": outcome, "reason": reason,
               "seconds": round(secs, 1)}
        rows.append(row)
        if args.verbose:
            print_rows("np=%d %s" % (np_, name), [row], sys.stdout)
        if not args.keep:
            shutil.rmtree(outdir, ignore_errors=True)
    return rows


def run_whole(args, np_, tests, shim, suite_dir, work):
    outdir = os.path.join(work, "whole_np%d" % np_)
    os.makedirs(outdir)
    node = args.suite
    code, secs, tail = run_mpirun(args, np_, [node], outdir, shim, suite_dir,
                                  args.whole_timeout)
    results, running = read_logs(outdir, np_)
    rows = []
    for _, name in tests:
        outcome, reason = combine(results.get(name, {}), np_)
        if name in running.values():
            ranks = sorted(r for r, t in running.items() if t == name)
            outcome = "HANG"
            reason = "ranks %s were in it when the run %s" % (
                ranks, "timed out" if code is None else "ended (exit %s)" %
                code)
        elif not results.get(name):
            reason = "never ran (the run %s)" % (
                "timed out" if code is None else "ended, exit %s" % code)
        rows.append({"test": name, "outcome": outcome, "reason": reason})
    return rows, code, secs, tail


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", help="path to Horovod's test_torch.py (with "
                        "its helper common.py in the same folder)")
    parser.add_argument("--np", type=int, nargs="+", default=[2],
                        help="rank counts (default 2)")
    parser.add_argument("--build-python",
                        default=os.path.join(SOURCE_DIR, "build", "python"),
                        help="the build tree's importable package "
                        "(default build/python)")
    parser.add_argument("--python", default="/usr/bin/python3"
                        if os.path.exists("/usr/bin/python3") else
                        sys.executable)
    parser.add_argument("--mpirun", default=os.environ.get("MPIEXEC",
                                                           "mpirun"))
    parser.add_argument("--gloo", metavar="HVD_TUNE",
                        help="launch every run with `HVD_TUNE run --gloo` "
                        "(the Gloo engine) instead of mpirun")
    parser.add_argument("--timeout", type=int, default=120,
                        help="seconds per test before it counts as a hang")
    parser.add_argument("--whole", action="store_true",
                        help="also run the whole file in one mpirun")
    parser.add_argument("--whole-only", action="store_true",
                        help="only the whole-file run")
    parser.add_argument("--whole-timeout", type=int, default=1200)
    parser.add_argument("-k", "--tests", nargs="+", default=None,
                        help="only these tests (names or substrings)")
    parser.add_argument("-x", "--exclude", nargs="+", default=None,
                        help="leave out these tests (names or substrings)")
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--keep", action="store_true",
                        help="keep each run's logs (printed path)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print each test's outcome as it ends")
    args = parser.parse_args()

    args.suite = os.path.abspath(args.suite)
    suite_dir = os.path.dirname(args.suite)
    if not os.path.exists(os.path.join(suite_dir, "common.py")):
        parser.error("common.py (Horovod's test/utils/common.py) must be "
                     "next to " + args.suite)
    if not os.path.exists(os.path.join(args.build_python, "hvdtune")):
        parser.error("no hvdtune package in %s (build first, or pass "
                     "--build-python)" % args.build_python)
    tests = test_names(args.suite)
    if args.tests:
        tests = [t for t in tests if any(k in t[1] for k in args.tests)]
    if args.exclude:
        tests = [t for t in tests
                 if not any(k in t[1] for k in args.exclude)]
    work = tempfile.mkdtemp(prefix="hvd_suite_")
    shim = os.path.join(work, "shim")
    make_shim(shim, args.python)

    report = {"suite": args.suite, "tests": len(tests), "runs": []}
    for np_ in args.np:
        if not args.whole_only:
            rows = run_each(args, np_, tests, shim, suite_dir, work)
            print_rows("each test in its own mpirun -np %d" % np_, rows,
                       sys.stdout)
            report["runs"].append({"np": np_, "mode": "each", "rows": rows,
                                   "counts": summarize(rows)})
        if args.whole or args.whole_only:
            rows, code, secs, tail = run_whole(args, np_, tests, shim,
                                               suite_dir, work)
            title = "whole file in one mpirun -np %d (%s, %.0fs)" % (
                np_, "timed out" if code is None else "exit %d" % code, secs)
            print_rows(title, rows, sys.stdout)
            report["runs"].append({"np": np_, "mode": "whole", "rows": rows,
                                   "counts": summarize(rows),
                                   "exit": code, "seconds": round(secs, 1)})
    for run in report["runs"]:
        c = run["counts"]
        print("np=%d %-5s: %d pass, %d fail, %d skip, %d hang of %d" %
              (run["np"], run["mode"], c["PASS"], c["FAIL"], c["SKIP"],
               c["HANG"], len(run["rows"])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.keep:
        print("logs kept in " + work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    failed = any(r["counts"]["FAIL"] or r["counts"]["HANG"]
                 for r in report["runs"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
