"""hvd-tune's usage errors (exit 2 or 1, the argument named) and --help."""
from cli_helpers import check, store, tune


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
