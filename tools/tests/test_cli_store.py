"""hvd-tune show, export, import (round trip), knobs, best and plot on the
sweep's store."""
import json
import os
import shlex
import xml.etree.ElementTree as ET

from cli_helpers import (ARGS, MPIRUN, WORKLOAD, check, dump, run, store,
                         sweep_result, trainer, tune)


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
