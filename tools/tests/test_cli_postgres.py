"""hvd-tune on a PostgreSQL store: the sweep's store moved there and back,
every command on the server, and a store password in no command line, output
or file."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET

from cli_helpers import (ARGS, MPIRUN, WORKLOAD, check, run, store,
                         sweep_result, tune)
from pg_server import PASSWORD, bin_dir, pg_server  # noqa: F401 (a fixture)


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
