"""hvd-tune sweep: the grid sweep that makes the store every other test reads
(a later job starts from its best), and the random, bayes and lhs strategies.
"""
import json
import math
import os
import re
import sqlite3

from cli_helpers import (ARGS, MPIRUN, WORKLOAD, check, run, store, trainer,
                         tune)


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
