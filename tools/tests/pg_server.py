"""A throwaway PostgreSQL server for process tests (the Python twin of
store/tests/pg_server.h): Debian's binaries (/usr/lib/postgresql/15/bin, or
$HVDTUNE_PG_BIN), initdb into a fresh directory under /tmp, the server on a
free loopback port with its Unix socket in that directory, everything
removed by stop(). PostgreSQL refuses to run as root: run as root (CI), the
directory belongs to the unprivileged `postgres` account and the server runs
as that user. Logins over TCP need a password (scram-sha-256).

    with PgServer() as pg:
        uri = pg.create_database("store")     # postgresql://postgres:...@...

`pg_server` is a pytest fixture (module scope) that skips, with the reason,
where no server can be started, or fails where PostgreSQL is required
(HVDTUNE_REQUIRE_POSTGRES=1).
"""
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

PASSWORD = "s3cret-pw"


def bin_dir():
    return os.environ.get("HVDTUNE_PG_BIN") or "/usr/lib/postgresql/15/bin"


def missing_reason():
    """Why no server can run here ('' when one can)."""
    for tool in ("initdb", "postgres", "psql"):
        if not os.access(os.path.join(bin_dir(), tool), os.X_OK):
            return (f"PostgreSQL server binaries not found ({bin_dir()}/{tool}; "
                    "Debian package postgresql-15)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and no 'postgres' account to run the server as"
    return ""


class PgServer:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hvdtune_pg_", dir="/tmp")
        self.uid = self.gid = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
            os.chown(self.dir, self.uid, self.gid)
        pwfile = os.path.join(self.dir, "pw")
        with open(pwfile, "w") as f:
            f.write(PASSWORD + "\n")
        if self.uid is not None:
            os.chown(pwfile, self.uid, self.gid)
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "log")
        self.proc = None
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        p = self._run([os.path.join(bin_dir(), "initdb"), "-D", self.data,
                       "-U", "postgres", "--auth-local=trust",
                       "--auth-host=scram-sha-256", "--pwfile=" + pwfile, "-N",
                       "-E", "UTF8", "--locale=C"], wait=True)
        if p.returncode != 0:
            raise RuntimeError("initdb failed: " + self.read_log())
        self.start()

    def _demote(self):
        os.setsid()
        if self.uid is not None:
            os.setgroups([])
            os.setgid(self.gid)
            os.setuid(self.uid)

    def _run(self, args, wait):
        with open(self.log, "a") as log:
            p = subprocess.Popen(args, stdout=log, stderr=log, cwd=self.dir,
                                 preexec_fn=self._demote)
        if wait:
            p.wait()
        return p

    def read_log(self):
        with open(self.log) as f:
            return f.read()

    def start(self):
        self.proc = self._run(
            [os.path.join(bin_dir(), "postgres"), "-D", self.data, "-p",
             str(self.port), "-k", self.dir, "-c", "listen_addresses=127.0.0.1",
             "-c", "fsync=off", "-c", "max_connections=200"], wait=False)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("postgres exited at start: " + self.read_log())
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2):
                    pass
                if self.psql("postgres", "SELECT 1", check=False).returncode == 0:
                    return
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("postgres did not start: " + self.read_log())
            time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def uri(self, db, user="postgres", password=PASSWORD):
        auth = f"{user}:{password}" if password else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def psql(self, db, sql, check=True):
        """`sql` as the superuser over the Unix socket; the completed
        process (stdout: unaligned tuples only)."""
        p = subprocess.run([os.path.join(bin_dir(), "psql"), "-h", self.dir,
                            "-p", str(self.port), "-U", "postgres", "-d", db,
                            "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           capture_output=True, text=True)
        if check and p.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {p.stderr}")
        return p

    def create_database(self, db):
        self.psql("postgres", f'CREATE DATABASE "{db}"')
        return self.uri(db)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# What a test that cannot start a server prints: CTest's SKIP_REGULAR_EXPRESSION
# of those tests matches it (the C++ twin is kNoServerSkip in pg_server.h).
NO_SERVER_SKIP = "skipped, no PostgreSQL server: "


def no_server(reason):
    """Ends the test: a failure where PostgreSQL is required
    (HVDTUNE_REQUIRE_POSTGRES=1: tools/test.sh and CI), else a skip."""
    if os.environ.get("HVDTUNE_REQUIRE_POSTGRES") == "1":
        pytest.fail("PostgreSQL is required here (HVDTUNE_REQUIRE_POSTGRES=1) "
                    "but no server could start: " + reason, pytrace=False)
    pytest.skip(NO_SERVER_SKIP + reason)


@pytest.fixture(scope="module")
def pg_server():
    reason = missing_reason()
    if reason:
        no_server(reason)
    try:
        server = PgServer()
    except Exception as e:  # initdb or the server failed: says why
        no_server(str(e))
    yield server
    server.stop()
