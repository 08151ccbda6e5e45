"""hvd-tune import: bad files refused whole and named, --dry-run, merges."""
import json
import os
import sqlite3

from cli_helpers import ARGS, check, dump, store, tune


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
