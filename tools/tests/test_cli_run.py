"""hvd-tune run: the variables every rank sees, an autotuned job, emulated
nodes, the mpirun flags, bad values; --prometheus-targets."""
import json
import os
import socket
import subprocess

from cli_helpers import ARGS, WORKLOAD, check, fail, run, tune


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
