#!/usr/bin/env python3
"""End-to-end tests of hvd-tune on a real store made by a real 2-rank sweep.

Usage: python3 -m pytest tools/tests/test_cli.py [-k CASE] --hvd-tune BIN
         --trainer BIN --work DIR --source DIR

test_sweep makes the store the other tests read (it runs first in a whole-file
run; CTest runs one test per entry, the sweep as a fixture). Every check is on
real processes and real files.
"""
import hashlib
import json
import math
import os
import re
import shlex
import socket
import sqlite3
import subprocess
import xml.etree.ElementTree as ET

import pytest

from pg_server import PASSWORD, bin_dir, pg_server  # noqa: F401 (a fixture)

ARGS = None
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


def test_sweep():
    os.makedirs(ARGS.work, exist_ok=True)
    for f in ("store.db", "store.db-wal", "store.db-shm"):
        if os.path.exists(os.path.join(ARGS.work, f)):
            os.remove(os.path.join(ARGS.work, f))
    csv = os.path.join(ARGS.work, "sweep.csv")
    p = run(MPIRUN + ["-np", "2", ARGS.hvd_tune, "sweep", *WORKLOAD,
                      "--grid", "fusion_threshold=1M,64M",
                      "--grid", "cache_capacity=on,off", "--repeats", "2",
                      "--steps-per-sample", "4", "--confirm-top", "2",
                      "--confirm-rounds", "2", "--db", store(), "--csv", csv,
                      "--json"])
    result = json.loads(p.stdout)
    with open(os.path.join(ARGS.work, "sweep.json"), "w") as f:
        json.dump(result, f)
    check(len(result["points"]) == 4, f"4 grid points, got {len(result['points'])}")
    check(all(len(pt["scores"]) == 2 for pt in result["points"]), "2 repeats each")
    confirmed = [pt["confirmed"] for pt in result["points"][:2]]
    check(all(len(pt["confirm_scores"]) == 2 for pt in result["points"][:2]) and
          confirmed == sorted(confirmed, reverse=True),
          "the two leaders confirmed over 2 rounds, ranked by that")
    scores = [pt["score"] for pt in result["points"][2:]]
    check(scores == sorted(scores, reverse=True) and
          all(pt["confirmed"] is None for pt in result["points"][2:]),
          "the rest ranked by their median")
    check(result["best"] == result["points"][0], "best is the first row")
    check(result["varied"] == ["fusion_threshold", "cache_capacity"],
          f"varied knobs: {result['varied']}")
    check(re.fullmatch(r"[0-9a-f]{16}-[0-9a-f]{16}", result["fingerprint"]),
          "fingerprint printed")
    with open(csv) as f:
        lines = f.read().splitlines()
    check(len(lines) == 5 and lines[0].startswith("rank,fusion_threshold,"),
          f"CSV header + 4 rows: {lines[:2]}")
    # Every sample and the best are in the store under that fingerprint.
    con = sqlite3.connect(store())
    phases = dict(con.execute(
        "SELECT s.phase, COUNT(*) FROM samples s JOIN runs r ON r.id = "
        "s.run_id WHERE r.source = 'sweep' GROUP BY s.phase").fetchall())
    check(phases == {"sweep": 8, "confirm": 4}, f"samples stored: {phases}")
    score = con.execute("SELECT score FROM best").fetchone()[0]
    check(score == result["best"]["confirmed"], "stored best score is the "
          f"confirmation median: {score} vs {result['best']['confirmed']}")
    best = dict(con.execute("SELECT knob, value FROM best_values").fetchall())
    check(best["fusion_threshold"] == result["best"]["knobs"]["fusion_threshold"],
          f"stored best {best} vs {result['best']['knobs']}")
    con.close()
    # The next job with this workload computes the same fingerprint and
    # starts from the stored best.
    job = trainer({"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_DB": store(),
                   "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "3"})
    check(job["autotune"]["fingerprint"] == result["fingerprint"],
          f"job fingerprint {job['autotune']['fingerprint']} != sweep "
          f"{result['fingerprint']}")
    check(job["autotune"]["source"] == "store",
          f"job started from {job['autotune']['source']}, not the store")
    print("sweep: ok", result["fingerprint"])


def test_strategies():
    table = json.loads(tune("knobs", "--json").stdout)
    defaults = {k["name"]: k["default"] for k in table}
    for strategy in ("random", "bayes"):
        p = run(MPIRUN + ["-np", "2", ARGS.hvd_tune, "sweep", *WORKLOAD,
                          "--strategy", strategy, "--budget", "4",
                          "--repeats", "1", "--steps-per-sample", "2",
                          "--confirm-top", "0", "--no-store", "--json"],
                env={"HOROVOD_CYCLE_TIME": "1.5"})
        result = json.loads(p.stdout)
        points = [pt["knobs"] for pt in result["points"]]
        check(len(points) == 4, f"{strategy}: 4 points")
        check(len({json.dumps(k, sort_keys=True) for k in points}) == 4,
              f"{strategy}: 4 different configurations")
        initial = dict(defaults, cycle_time=1.5)
        check(initial in points, f"{strategy}: the initial knobs are measured")
        check(all(k["cycle_time"] == 1.5 for k in points) and
              "cycle_time" not in result["varied"],
              f"{strategy}: the pinned cycle time is never swept")
        check("fusion_threshold" in result["varied"], f"{strategy}: {result['varied']}")
    # lhs: the initial knobs, then a Latin hypercube over every tuned knob:
    # each continuous knob has one point in each 1/12 of its log range, and
    # each (algorithm, cache on/off) combination (3 x 2) appears twice.
    p = run(MPIRUN + ["-np", "2", ARGS.hvd_tune, "sweep", *WORKLOAD,
                      "--strategy", "lhs", "--budget", "12", "--repeats", "1",
                      "--steps-per-sample", "1", "--warmup-steps", "0",
                      "--confirm-top", "0", "--no-store", "--json"],
            env={"HOROVOD_CYCLE_TIME": "1.5"})
    result = json.loads(p.stdout)
    points = [pt["knobs"] for pt in result["points"]]
    check(len(points) == 13, "lhs: the initial knobs and 12 points")
    initial = dict(defaults, cycle_time=1.5)
    check(initial in points, "lhs: the initial knobs are measured")
    design = list(points)
    design.remove(initial)
    combos = {}
    for k in design:
        key = (k["allreduce_algorithm"], k["cache_capacity"] > 0)
        combos[key] = combos.get(key, 0) + 1
    check(len(combos) == 6 and set(combos.values()) == {2},
          f"lhs: every algorithm x cache combination twice: {combos}")
    for knob, lo, hi in (("fusion_threshold", 1 << 20, 256 << 20),
                         ("ring_segment_bytes", 16 << 10, 16 << 20)):
        strata = {min(11, int(12 * math.log(k[knob] / lo) / math.log(hi / lo)))
                  for k in design}
        check(len(strata) == 12, f"lhs: {knob} in every 1/12 of its range")
    check(all(k["cycle_time"] == 1.5 for k in points),
          "lhs: the pinned cycle time is never swept")
    print("strategies: ok")


def test_store():
    fp = sweep_result()["fingerprint"]
    text = tune("show", "--db", store()).stdout
    check(fp in text and "best:" in text, "show lists the fingerprint and best")
    listing = json.loads(tune("show", "--db", store(), "--json").stdout)
    check(len(listing["pairs"]) == 1 and listing["pairs"][0]["fingerprint"] == fp,
          "show --json lists the pair")
    check(listing["pairs"][0]["samples"] >= 12, "sample count")
    none = json.loads(tune("show", "--db", store(), "--json", "--model",
                           "no-such-model").stdout)
    check(none["pairs"] == [], "--model filter")
    cpu = listing["pairs"][0]["hardware"].split(", ", 1)[1]
    some = json.loads(tune("show", "--db", store(), "--json", "--hardware",
                           cpu).stdout)
    check(len(some["pairs"]) == 1, "--hardware filter by CPU name")
    one = json.loads(tune("show", "--db", store(), fp[:8], "--json").stdout)
    check(one["fingerprint"] == fp, "show PREFIX finds the pair")
    check(one["runs"][0]["source"] == "sweep" and
          len(one["runs"][0]["samples"]) == 12, "show FP: every sample of run 1")
    # Export -> import into a fresh store -> export: the same document.
    exported = os.path.join(ARGS.work, "export.json")
    tune("export", "--db", store(), "-o", exported)
    fresh = os.path.join(ARGS.work, "roundtrip.db")
    for f in (fresh, fresh + "-wal", fresh + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    tune("import", "--db", fresh, exported)
    again = json.loads(tune("export", "--db", fresh).stdout)
    first = json.load(open(exported))
    first.pop("exported")
    again.pop("exported")
    check(first == again, "export -> import -> export is lossless")
    # Importing again adds nothing; merging into the source loses nothing.
    before = dump(fresh)
    counts = json.loads(tune("import", "--db", fresh, exported, "--json").stdout)
    check(counts["samples_added"] == 0 and counts["runs_added"] == 0,
          f"re-import adds nothing: {counts}")
    check(dump(fresh) == before, "re-import changes nothing")
    md = tune("knobs", "--markdown").stdout
    page = open(os.path.join(ARGS.source, "docs", "configuration.md")).read()
    block = page.split("<!-- config-reference:begin -->\n")[1].split(
        "<!-- config-reference:end -->")[0]
    check(md == block,
          "docs/configuration.md's reference is `hvd-tune knobs --markdown`")
    knobs = json.loads(tune("knobs", "--json").stdout)
    check([k["name"] for k in knobs][:2] == ["fusion_threshold", "cycle_time"],
          "knobs --json")
    print("store: ok")


def test_best():
    fp = sweep_result()["fingerprint"]
    lines = tune("best", "--db", store(), fp).stdout
    check(all(l.startswith(("#", "export ")) for l in lines.splitlines()),
          "best prints only export lines")
    by_workload = tune("best", "--db", store(), *WORKLOAD).stdout
    check(by_workload == lines, "best --workload finds the same pair")
    env = json.loads(tune("best", "--db", store(), fp, "--json").stdout)["env"]
    # eval the lines in a shell and run the job from there.
    script = (f'eval "$({shlex.quote(ARGS.hvd_tune)} best --db '
              f'{shlex.quote(store())} {fp})" && exec ' +
              shlex.join(MPIRUN + ["-np", "2", ARGS.trainer, *WORKLOAD,
                                   "--warmup-steps", "1", "--measure-steps",
                                   "2", "--json"]))
    p = run(["sh", "-c", script])
    job = json.loads(p.stdout.strip().splitlines()[-1])
    table = {k["env"]: k for k in json.loads(tune("knobs", "--json").stdout)}
    for var, text in env.items():
        knob = table[var]
        got = job["config"][knob["name"]]
        want = {"integer": int, "float": float}.get(knob["type"], str)(text) \
            if knob["type"] != "bool" else text == "1"
        check(got == want, f"{knob['name']}: job ran with {got}, best says {want}")
    check(job["config"] == sweep_result()["best"]["knobs"],
          f"job knobs {job['config']} != sweep best {sweep_result()['best']['knobs']}")
    print("best: ok")


BAD = {
    "unknown knob": (lambda d: d["pairs"][0]["runs"][0]["samples"][0]["knobs"]
                     .update(fusion_treshold=1),
                     "pairs[0].runs[0].samples[0].knobs.fusion_treshold: unknown knob"),
    "out of range": (lambda d: d["pairs"][0]["best"]["knobs"]
                     .update(cycle_time=0),
                     "pairs[0].best.knobs.cycle_time: 0 is outside"),
    "wrong type": (lambda d: d["pairs"][0]["runs"][0]["samples"][1]["knobs"]
                   .update(fusion_threshold="16M"),
                   "pairs[0].runs[0].samples[1].knobs.fusion_threshold: "
                   "expected an integer, got a string"),
    "wrong type of score": (lambda d: d["pairs"][0]["runs"][0]["samples"][2]
                            .update(score="fast"),
                            "pairs[0].runs[0].samples[2].score: expected a number"),
    "unknown choice": (lambda d: d["pairs"][0]["best"]["knobs"]
                       .update(allreduce_algorithm="tree"),
                       "pairs[0].best.knobs.allreduce_algorithm: unknown choice 'tree'"),
    "newer schema": (lambda d: d.update(schema_version=99),
                     "schema_version: 99 is newer than this build's (1)"),
    "fingerprint mismatch": (lambda d: d["pairs"][0]["model"]
                             .update(tensors="7"),
                             "pairs[0].fingerprint: "),
    "missing field": (lambda d: d["pairs"][0]["runs"][0].pop("started"),
                      "pairs[0].runs[0].started: missing"),
}


def fnv1a(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def printable(hardware, model):
    text = lambda parts: "".join(f"{k}={v}\n" for k, v in parts.items())
    return fnv1a(text(hardware)) + "-" + fnv1a(text(model))


def test_import():
    exported = os.path.join(ARGS.work, "export_for_import.json")
    tune("export", "--db", store(), "-o", exported)
    good = json.load(open(exported))
    # Each bad file also holds a valid new pair ahead of the bad one:
    # nothing at all may be written.
    extra = json.loads(json.dumps(good["pairs"][0]))
    extra["model"]["tensors"] = "999"
    extra["fingerprint"] = printable(extra["hardware"], extra["model"])
    target = os.path.join(ARGS.work, "import_target.db")
    for f in (target, target + "-wal", target + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    tune("import", "--db", target, exported)
    before = dump(target)
    for name, (spoil, message) in BAD.items():
        doc = json.loads(json.dumps(good))
        spoil(doc)
        doc["pairs"].insert(0, extra)
        message = message.replace("pairs[0]", "pairs[1]")
        path = os.path.join(ARGS.work, f"bad_{name.replace(' ', '_')}.json")
        json.dump(doc, open(path, "w"))
        p = tune("import", "--db", target, path, expect=1)
        check(message in p.stderr, f"{name}: stderr {p.stderr!r} lacks {message!r}")
        check(path in p.stderr, f"{name}: the message names the file")
        check(dump(target) == before, f"{name}: the store changed")
    # The valid extra pair alone imports (the bad files failed for their
    # own fault only).
    alone = json.loads(json.dumps(good))
    alone["pairs"] = [extra]
    path = os.path.join(ARGS.work, "extra_pair.json")
    json.dump(alone, open(path, "w"))
    counts = json.loads(tune("import", "--db", target, path, "--dry-run",
                             "--json").stdout)
    check(counts["pairs_added"] == 1, f"the extra pair is valid: {counts}")
    p = tune("import", "--db", target, "/no/such/file.json", expect=1)
    check("/no/such/file.json" in p.stderr, "missing file named")
    open(os.path.join(ARGS.work, "bad.json"), "w").write("{\"format\": ")
    p = tune("import", "--db", target, os.path.join(ARGS.work, "bad.json"),
             expect=1)
    check("not valid JSON" in p.stderr, "truncated JSON")
    # Found by cli_import_fuzz: a number beyond a double's range.
    open(os.path.join(ARGS.work, "overflow.json"), "w").write(
        '{"format": "hvdtune-store-export", "schema_version": 1e999999}')
    p = tune("import", "--db", target, os.path.join(ARGS.work, "overflow.json"),
             expect=1)
    check("number overflow" in p.stderr, p.stderr)
    # --dry-run counts and writes nothing.
    fresh = json.loads(json.dumps(good))
    fresh["pairs"][0]["runs"][0]["started"] += 1
    path = os.path.join(ARGS.work, "newrun.json")
    json.dump(fresh, open(path, "w"))
    counts = json.loads(tune("import", "--db", target, path, "--dry-run",
                             "--json").stdout)
    check(counts["runs_added"] == 1 and counts["dry_run"], f"dry run {counts}")
    check(dump(target) == before, "--dry-run changed the store")
    counts = json.loads(tune("import", "--db", target, path, "--json").stdout)
    check(counts["runs_added"] == 1, "the new run is merged")
    con = sqlite3.connect(target)
    n = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    check(n == len(good["pairs"][0]["runs"]) + 1, "merge kept every run")
    print("import: ok")


def test_plot():
    fp = sweep_result()["fingerprint"]
    one = json.loads(tune("show", "--db", store(), fp, "--json").stdout)
    samples = sum(len(r["samples"]) for r in one["runs"])
    ns = "{http://www.w3.org/2000/svg}"
    for kind in ("progress", "knobs"):
        out = os.path.join(ARGS.work, f"plot_{kind}.svg")
        tune("plot", "--db", store(), fp, "--kind", kind, "--x",
             "fusion_threshold", "--y", "cache_capacity", "-o", out)
        root = ET.parse(out).getroot()
        check(root.tag == ns + "svg", f"{kind}: root is svg")
        points = [c for c in root.iter(ns + "circle") if c.get("class") == "sample"]
        check(len(points) == samples, f"{kind}: {len(points)} points, {samples} samples")
        if kind == "progress":
            check(any(e.get("class") == "running-best" for e in root.iter()),
                  "running best line")
            check(any(e.get("class") == "phase-band" for e in root.iter()),
                  "phase bands")
    run1 = os.path.join(ARGS.work, "plot_run.svg")
    tune("plot", "--db", store(), fp, "--run", str(one["runs"][0]["id"]), "-o", run1)
    points = [c for c in ET.parse(run1).getroot().iter(ns + "circle")
              if c.get("class") == "sample"]
    check(len(points) == 12, "--run plots that run's 12 samples")
    # From an autotune CSV log.
    log = os.path.join(ARGS.work, "autotune.csv")
    trainer({"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_STORE": "off",
             "HOROVOD_AUTOTUNE_LOG": log, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
             "HVDTUNE_AUTOTUNE_SAMPLE_PRECISION": "0",
             "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
             "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "4"}, "--until-frozen")
    rows = len(open(log).read().splitlines()) - 1
    out = os.path.join(ARGS.work, "plot_csv.svg")
    tune("plot", "--csv", log, "-o", out)
    points = [c for c in ET.parse(out).getroot().iter(ns + "circle")
              if c.get("class") == "sample"]
    check(len(points) == rows and rows >= 5, f"CSV: {len(points)} points, {rows} rows")
    print("plot: ok")


def test_run():
    log = os.path.join(ARGS.work, "run_autotune.csv")
    timeline = os.path.join(ARGS.work, "run_timeline.json")
    db = os.path.join(ARGS.work, "run_store.db")
    flags = ["--autotune", "--autotune-log-file", log,
             "--autotune-warmup-samples", "1", "--autotune-steps-per-sample", "2",
             "--autotune-bayes-opt-max-samples", "3", "--fusion-threshold-mb", "8",
             "--cycle-time-ms", "1.5", "--timeline-filename", timeline,
             "--metrics-port", "0", "--db", db]
    want = {"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": log,
            "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
            "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
            "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "3",
            "HOROVOD_FUSION_THRESHOLD": str(8 << 20), "HOROVOD_CYCLE_TIME": "1.5",
            "HOROVOD_TIMELINE": timeline, "HOROVOD_METRICS_PORT": "0",
            "HOROVOD_AUTOTUNE_DB": db, "HVDTUNE_ALLREDUCE_ALGORITHM": "ring"}
    env = {"HVDTUNE_ALLREDUCE_ALGORITHM": "ring"}  # forwarded from the caller
    # Every rank sees every variable.
    out = os.path.join(ARGS.work, "run_env")
    tune("run", "-np", "2", *flags, "--", "sh", "-c",
         f"env > {out}.$OMPI_COMM_WORLD_RANK", env=env)
    for rank in (0, 1):
        seen = dict(l.split("=", 1) for l in open(f"{out}.{rank}").read().splitlines()
                    if "=" in l)
        for k, v in want.items():
            check(seen.get(k) == v, f"rank {rank}: {k}={seen.get(k)!r}, want {v!r}")
    # The trainer on 2 ranks with --autotune: tuned, with the pinned knobs.
    p = tune("run", "-np", "2", *flags, "--", ARGS.trainer, *WORKLOAD,
             "--until-frozen", "--measure-steps", "3", "--json", env=env)
    job = json.loads(p.stdout.strip().splitlines()[-1])
    check(job["autotune"]["phase"] == "frozen", f"autotuned: {job['autotune']}")
    check(job["config"]["fusion_threshold"] == 8 << 20 and
          job["config"]["cycle_time"] == 1.5 and
          job["config"]["allreduce_algorithm"] == "ring", f"knobs {job['config']}")
    check(os.path.getsize(log) > 0 and os.path.getsize(timeline) > 0,
          "autotune log and timeline written")
    check(os.path.exists(db), "store at --db")
    # Emulated nodes: each rank runs on its fake host.
    nodes = os.path.join(ARGS.work, "run_node")
    tune("run", "-np", "4", "--fake-nodes", "2", "--", "sh", "-c",
         f"echo $HVDTUNE_FAKE_NODE > {nodes}.$OMPI_COMM_WORLD_RANK")
    hosts = [open(f"{nodes}.{r}").read().strip() for r in range(4)]
    check(sorted(hosts) == ["node0", "node0", "node1", "node1"], f"hosts {hosts}")
    # --dry-run: the flags only where needed.
    dry = tune("run", "-np", "1", "--dry-run", "--", "true").stdout
    check("--oversubscribe" not in dry, f"1 rank needs no --oversubscribe: {dry}")
    check(("--allow-run-as-root" in dry) == (os.geteuid() == 0), "root flag")
    many = os.cpu_count() + 1
    dry = tune("run", "-np", str(many), "--dry-run", "--", "true").stdout
    check("--oversubscribe" in dry, f"{many} ranks need --oversubscribe")
    dry = tune("run", "-np", "4", "-H", "a:2,b:2", "--dry-run", "--", "true").stdout
    check("--oversubscribe" not in dry and "-H a:2,b:2" in dry, dry)
    dry = tune("run", "-np", "4", "--fake-nodes", "2", "--dry-run", "--", "x").stdout
    check("plm_rsh_agent" in dry and "node0 slots=2, node1 slots=2" in dry, dry)
    # A host's slot count must be a whole number, on either engine.
    p = tune("run", "--gloo", "-np", "2", "-H", "localhost:2x", "--", "true",
             expect=2)
    check("'localhost:2x'" in p.stderr and "host:slots" in p.stderr, p.stderr)
    p = tune("run", "-np", "2", "--cycle-time-ms", "0", "--", "true", expect=2)
    check("--cycle-time-ms" in p.stderr and "HOROVOD_CYCLE_TIME" in p.stderr,
          p.stderr)
    print("run: ok")


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


def export_text(db):
    """`hvd-tune export` of a store, without the line of its timestamp."""
    text = tune("export", "--db", db).stdout
    return "".join(l for l in text.splitlines(True)
                   if not l.lstrip().startswith('"exported"'))


def test_postgres(pg_server):
    """The sweep's SQLite store moved to a PostgreSQL server and back, every
    reading command on the server, doctor on good and bad logins, a sweep
    into the server; no password anywhere in what hvd-tune prints."""
    uri = pg_server.create_database("cli")
    shown = f"postgresql://postgres@127.0.0.1:{pg_server.port}/cli"
    outputs = []

    def pg(*args, **kw):
        p = tune(*args, **kw)
        outputs.append(p.stdout + p.stderr)
        return p

    # SQLite -> PostgreSQL -> export: byte-identical documents (all but
    # the export's own timestamp line).
    exported = os.path.join(ARGS.work, "export_pg.json")
    tune("export", "--db", store(), "-o", exported)
    counts = json.loads(pg("import", "--db", uri, exported, "--json").stdout)
    check(counts["store"] == shown, f"import names {counts['store']}")
    check(counts["samples_added"] >= 12, f"imported {counts}")
    original = export_text(store())
    check(export_text(uri) == original,
          "export SQLite -> import PostgreSQL -> export: not byte-identical")
    again = json.loads(pg("import", "--db", uri, exported, "--json").stdout)
    check(again["samples_added"] == 0 and again["runs_added"] == 0,
          f"re-import adds nothing: {again}")
    # And back: PostgreSQL -> a fresh SQLite file -> the same document.
    back = os.path.join(ARGS.work, "from_pg.db")
    for f in (back, back + "-wal", back + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    pg_export = os.path.join(ARGS.work, "export_from_pg.json")
    pg("export", "--db", uri, "-o", pg_export)
    tune("import", "--db", back, pg_export)
    check(export_text(back) == original, "PostgreSQL -> SQLite changed rows")

    fp = sweep_result()["fingerprint"]
    listing = json.loads(pg("show", "--db", uri, "--json").stdout)
    check(listing["store"] == shown and listing["pairs"][0]["fingerprint"] == fp,
          f"show --json on the server: {listing['store']}")
    check(fp in pg("show", "--db", uri).stdout, "show lists the pair")
    check(pg("best", "--db", uri, fp).stdout ==
          tune("best", "--db", store(), fp).stdout, "best: the same lines")
    svg = os.path.join(ARGS.work, "plot_pg.svg")
    pg("plot", "--db", uri, fp, "-o", svg)
    check(ET.parse(svg).getroot().tag.endswith("svg"), "plot from the server")
    p = pg("doctor", "--db", uri, "--json")
    store_check = [c for c in json.loads(p.stdout)["checks"]
                   if c["check"] == "store"][0]
    check(store_check["status"] == "ok" and "connected, schema version"
          in store_check["detail"], f"doctor: {store_check}")
    bad = pg_server.uri("cli", password="Wr0ng-pass")
    p = pg("doctor", "--db", bad, expect=1)
    check("password authentication failed" in p.stdout and shown in p.stdout,
          f"doctor names the server and the refusal: {p.stdout}")
    p = pg("show", "--db", bad, expect=1)
    check(shown in p.stderr, f"show on a refused login: {p.stderr}")
    # A sweep that keeps its samples on the server.
    p = run(MPIRUN + ["-np", "2", ARGS.hvd_tune, "sweep", *WORKLOAD,
                      "--grid", "fusion_threshold=1M,64M", "--repeats", "1",
                      "--steps-per-sample", "2", "--db", uri, "--json"])
    outputs.append(p.stdout + p.stderr)
    swept = json.loads(p.stdout)
    check(swept["store"] == shown, f"sweep stored in {swept['store']}")
    rows = pg_server.psql("cli", "SELECT COUNT(*) FROM samples WHERE run_id = "
                          "(SELECT MAX(id) FROM runs)").stdout
    want = sum(len(pt["scores"]) + len(pt.get("confirm_scores") or [])
               for pt in swept["points"])
    check(int(rows) == want, f"sweep samples on the server: {rows}, want {want}")
    for text in outputs:
        check(PASSWORD not in text and "Wr0ng-pass" not in text,
              f"a password in hvd-tune's output: {text[:2000]}")
    print("postgres: ok")


def test_usage():
    for args, code, text in [
        (["bogus"], 2, "unknown command 'bogus'"),
        (["show", "--bogus"], 2, "--bogus"),
        (["sweep", "--strategy", "anneal"], 2, "--strategy: unknown strategy"),
        (["sweep", "--grid", "fusion=1,2"], 2, "--grid: unknown knob 'fusion'"),
        (["sweep", "--workload", "nope"], 2, "--workload: unknown workload"),
        (["run", "-np", "2"], 2, "command"),
        (["plot", "-o", "/tmp/x.svg"], 2, "FINGERPRINT"),
        (["show", "--db", "/no/such/store.db"], 1, "/no/such/store.db"),
        (["best", "--db", store(), "ffff"], 1, "fingerprint 'ffff'"),
    ]:
        p = tune(*args, expect=code)
        check(text in p.stderr, f"{args}: stderr {p.stderr!r} lacks {text!r}")
    for sub in ("sweep", "run", "show", "best", "export", "import", "knobs",
                "plot", "doctor"):
        check("Usage:" in tune(sub, "--help").stdout, f"{sub} --help")
    print("usage: ok")


@pytest.fixture(autouse=True)
def cli_args(request):
    """The command line's --hvd-tune, --trainer, --work and --source
    (conftest.py), as ARGS for the helpers above."""
    global ARGS
    ARGS = request.config.cli_args
    os.makedirs(ARGS.work, exist_ok=True)


class CmdlineWatch:
    """Reads every process's /proc/PID/cmdline, over and over, on a thread of
    its own, and records each one that holds `secret`. The one exception is
    hvd-tune itself given --db URI before it has started anything: it masks
    the password in its own arguments first thing in main, before its first
    child (a password still there once it has one was never masked)."""

    def __init__(self, secret, hvd_tune):
        import threading
        self.secret = secret.encode()
        self.hvd_tune = hvd_tune.encode()
        self.hits = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @staticmethod
    def _has_child(pid):
        try:
            return any(open(f"/proc/{pid}/task/{t}/children").read().strip()
                       for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            return False

    def _loop(self):
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                grown = self._has_child(pid)  # before the command line
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                except OSError:
                    continue
                if self.secret not in cmd:
                    continue
                if cmd.split(b"\0")[0] == self.hvd_tune and not grown:
                    continue
                self.hits.append(cmd.replace(b"\0", b" ").replace(
                    self.secret, b"<PASSWORD>").decode(errors="replace"))
            self.scans += 1

    def stop(self):
        self._stop.set()
        self._thread.join()


def test_password(pg_server):
    """A store URI with a password, given to hvd-tune run --db, through
    HOROVOD_AUTOTUNE_DB, and to the store commands: a real 2-rank autotuned
    job stores its run on the server, and the password is in no process's
    command line (read from /proc all along), no output, no file the job
    writes."""
    import secrets
    password = "pw" + secrets.token_hex(12)  # no other process has it
    role = "tuner"
    # The role's password goes to psql on stdin, never on a command line.
    subprocess.run([os.path.join(bin_dir(), "psql"),
                    "-h", pg_server.dir, "-p", str(pg_server.port), "-U",
                    "postgres", "-d", "postgres", "-X", "-q", "-v",
                    "ON_ERROR_STOP=1"], check=True, capture_output=True,
                   text=True, input=f"CREATE ROLE {role} LOGIN PASSWORD "
                   f"'{password}';\nCREATE DATABASE secret OWNER {role};\n")
    uri = pg_server.uri("secret", user=role, password=password)
    shown = f"postgresql://{role}@127.0.0.1:{pg_server.port}/secret"
    work = os.path.join(ARGS.work, "password")
    os.makedirs(work, exist_ok=True)
    outputs = []

    def hvd(*args, env=None, expect=0):
        p = tune(*args, env=env, expect=expect)
        outputs.append(p.stdout + p.stderr)
        return p

    watch = CmdlineWatch(password, ARGS.hvd_tune)
    try:
        hvd("store", "init", "--db", uri)
        p = hvd("store", "init", "--db", uri)
        check("nothing to do" in p.stdout and shown in p.stdout, p.stdout)
        job = ["--autotune", "--autotune-warmup-samples", "1",
               "--autotune-steps-per-sample", "2",
               "--autotune-bayes-opt-max-samples", "3",
               "--timeline-filename", os.path.join(work, "timeline.json"),
               "--autotune-log-file", os.path.join(work, "autotune.csv"),
               "--", ARGS.trainer, *WORKLOAD, "--until-frozen",
               "--measure-steps", "3", "--json"]
        # --db on the command line (and --verbose prints the mpirun line).
        proc = subprocess.Popen([ARGS.hvd_tune, "run", "-np", "2", "--db", uri,
                                 "--verbose", *job], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate(timeout=240)
        outputs.append(out + err)
        check(proc.returncode == 0, f"run --db exited {proc.returncode}: {err}")
        check("-x HOROVOD_AUTOTUNE_DB " in out and
              f"HOROVOD_AUTOTUNE_DB='postgresql://{role}:***@" in out,
              f"--verbose shows the variable by name, its password ***: {out}")
        first = json.loads(out.strip().splitlines()[-1])
        # From the environment, on two emulated nodes (each rank's daemon
        # started through the rsh agent), a dry run too.
        env = {"HOROVOD_AUTOTUNE_DB": uri}
        p = hvd("run", "-np", "2", "--fake-nodes", "2", *job, env=env)
        second = json.loads(p.stdout.strip().splitlines()[-1])
        hvd("run", "-np", "2", "--dry-run", *job, env=env)
        # Every store command, by flag and by environment, and a refused
        # login.
        for args in (["show"], ["show", "--json"], ["export"], ["doctor"],
                     ["best", second["autotune"]["fingerprint"]]):
            hvd(*args, "--db", uri)
            hvd(*args, env=env)
        p = hvd("show", "--db", uri.replace(password, password[::-1]), expect=1)
        check(shown in p.stderr, f"a refused login names the server: {p.stderr}")
    finally:
        watch.stop()
    check(watch.scans >= 10, f"only {watch.scans} scans of /proc")
    check(not watch.hits, "the password in a command line:\n" +
          "\n".join(sorted(set(watch.hits))[:10]))
    for text in outputs:
        check(password not in text, "the password in hvd-tune's output:\n" +
              text.replace(password, "<PASSWORD>")[:3000])
    for name in os.listdir(work):
        with open(os.path.join(work, name), errors="replace") as f:
            check(password not in f.read(), f"the password in {name}")
    # The jobs really used the server: the first explored, the second (on
    # two nodes: another hardware fingerprint) started from the first's
    # samples there.
    check(first["autotune"]["phase"] == "frozen", f"first job {first['autotune']}")
    check(second["autotune"]["source"] == "transfer",
          f"second job from the first's samples: {second['autotune']}")
    runs = pg_server.psql("secret", "SELECT COUNT(*) FROM runs").stdout.strip()
    check(int(runs) >= 2, f"runs on the server: {runs}")
    print(f"password: ok ({watch.scans} scans of /proc)")


def free_ports(n):
    """A base port with n free ports from it on loopback."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    fail(f"no {n} consecutive free ports")


def test_prometheus_targets():
    """hvd-tune run --prometheus-targets: while the job runs, a file_sd file
    that promtool accepts lists every rank's endpoint, each of which serves
    that rank's metrics; the file goes with the job."""
    import time
    import urllib.request
    work = os.path.join(ARGS.work, "targets")
    os.makedirs(work, exist_ok=True)
    targets = os.path.join(work, "hvdtune_targets.json")
    if os.path.exists(targets):
        os.remove(targets)
    base = free_ports(2)
    proc = subprocess.Popen(
        [ARGS.hvd_tune, "run", "-np", "2", "--metrics-port", str(base),
         "--prometheus-targets", targets, "--", ARGS.trainer, *WORKLOAD,
         "--warmup-steps", "5", "--measure-steps", "150", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not os.path.exists(targets) and proc.poll() is None:
            check(time.time() < deadline, "no targets file within 60 s")
            time.sleep(0.05)
        with open(targets) as f:
            groups = json.load(f)
        listed = [t for g in groups for t in g["targets"]]
        check(listed == [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"] and
              groups[0]["labels"] == {"node": "127.0.0.1"}, f"targets {groups}")
        # Each endpoint is the rank the file says (one host: rank = local rank).
        for rank, target in enumerate(listed):
            body = ""
            while f'rank="{rank}"' not in body:
                check(time.time() < deadline and proc.poll() is None,
                      f"{target} never served rank {rank}'s metrics: {body[:500]}")
                try:
                    with urllib.request.urlopen(f"http://{target}/metrics",
                                                timeout=2) as r:
                        body = r.read().decode()
                except OSError:
                    time.sleep(0.1)
            check("hvdtune_" in body, f"{target}: no hvdtune metrics")
        # promtool checks the file as Prometheus's file_sd reads it.
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("scrape_configs:\n  - job_name: hvdtune\n"
                    "    file_sd_configs:\n"
                    f"      - files: [{json.dumps(targets)}]\n")
        p = run(["promtool", "check", "config", config], expect=None)
        check(p.returncode == 0 and "SUCCESS" in p.stdout + p.stderr,
              f"promtool check config: {p.stdout}{p.stderr}")
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    check(proc.returncode == 0, f"the job failed: {err}")
    check(not os.path.exists(targets), "the targets file outlived the job")
    print("prometheus_targets: ok")
