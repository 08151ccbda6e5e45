#!/usr/bin/env python3
"""A real Prometheus scrapes a 4-rank job with autotune on; every PromQL
expression of the dashboard and of the rules file must then return data.

    prometheus_e2e.py --job TELEMETRY_JOB --mpirun "MPIRUN ARGS" --repo DIR

Prometheus (Debian's prometheus package) runs on 127.0.0.1 with a scrape
interval of 1 s; the job's endpoints (HOROVOD_METRICS_PORT=0: any free
ports) reach it through a file-based service-discovery file, as a job
would write it. The job slows its steps down once tuning froze, so the
throughput-regression alert's expression has something to return. Fails
loudly when Prometheus or promtool is missing or does not start.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

ENDPOINT = re.compile(r"\[hvdtune rank (\d+)\] metrics at http://([^/\s]+)/metrics")
JOB = "hvdtune"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read().decode())


def query(base, expr):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        return get(url)
    except urllib.error.HTTPError as e:
        return json.loads(e.read().decode())


def substitute(expr):
    # Grafana's variables as the dashboard would fill them in.
    return (expr.replace("$__rate_interval", "10s")
            .replace("$__interval", "5s")
            .replace("$job", JOB).replace("$rank", ".*"))


def dashboard_exprs(path):
    d = json.load(open(path))
    out = []
    for p in d["panels"]:
        for t in p.get("targets", []):
            out.append(("panel '%s' %s" % (p["title"], t["refId"]), t["expr"]))
    for a in d["annotations"]["list"]:
        if "expr" in a.get("target", {}):
            out.append(("annotation '%s'" % a["name"], a["target"]["expr"]))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q)
            if not m:
                fail("variable %s: unexpected query %r" % (v["name"], q))
            out.append(("variable '%s'" % v["name"], m.group(1)))
    return out


def rule_exprs(path):
    out = []
    for group in yaml.safe_load(open(path))["groups"]:
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            out.append(("rule '%s'" % name, rule["expr"].strip()))
            if "record" in rule:
                out.append(("recorded series '%s'" % name, name))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True)
    p.add_argument("--mpirun", required=True)
    p.add_argument("--repo", required=True)
    args = p.parse_args()
    args.repo = os.path.abspath(args.repo)
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            fail("%s not found: install Debian's prometheus package "
                 "(tools/setup.sh)" % tool)
    dashboard = os.path.join(args.repo, "dashboard", "hvdtune.json")
    rules = os.path.join(args.repo, "dashboard", "hvdtune_rules.yml")
    check = subprocess.run(["promtool", "check", "rules", rules],
                           capture_output=True, text=True)
    if check.returncode != 0:
        fail("promtool check rules:\n" + check.stdout + check.stderr)

    work = tempfile.mkdtemp(prefix="hvdtune_prom_")
    procs = []
    try:
        sd = os.path.join(work, "targets.json")
        with open(sd, "w") as f:
            f.write("[]")
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - %s\nscrape_configs:\n  - job_name: %s\n"
                    "    file_sd_configs:\n      - files: [%s]\n"
                    "        refresh_interval: 1s\n" % (rules, JOB, sd))
        port = free_port()
        base = "http://127.0.0.1:%d" % port
        prom_log = open(os.path.join(work, "prometheus.log"), "w")
        prom = subprocess.Popen(
            ["prometheus", "--config.file=" + config,
             "--storage.tsdb.path=" + os.path.join(work, "data"),
             "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
            stdout=prom_log, stderr=subprocess.STDOUT)
        procs.append(prom)
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/-/ready", timeout=2)
                break
            except Exception:
                if prom.poll() is not None or time.time() > deadline:
                    fail("Prometheus did not start:\n" +
                         open(prom_log.name).read())
                time.sleep(0.3)

        stop = os.path.join(work, "stop")
        env = {"HOROVOD_METRICS_PORT": "0", "HOROVOD_AUTOTUNE": "1",
               "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
               "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "5",
               "HVDTUNE_AUTOTUNE_SAMPLE_PRECISION": "0",
               "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "4",
               "HVDTUNE_AUTOTUNE_RETUNE_WINDOWS": "100000",
               "HOROVOD_AUTOTUNE_DB": os.path.join(work, "store.db")}
        e = dict(os.environ)
        e.update(env)
        cmd = shlex.split(args.mpirun) + ["-np", "4"]
        for k in env:
            cmd += ["-x", k]
        cmd += [args.job, "--tensors", "30", "--elements", "4096",
                "--stop-file", stop, "--slow-after-freeze-ms", "40",
                "--max-seconds", "150"]
        job_log_path = os.path.join(work, "job.log")
        job = subprocess.Popen(cmd, env=e, stdout=open(job_log_path, "w"),
                               stderr=subprocess.STDOUT)
        procs.append(job)
        deadline = time.time() + 60
        while True:
            found = dict(ENDPOINT.findall(open(job_log_path).read()))
            if len(found) == 4:
                break
            if job.poll() is not None or time.time() > deadline:
                fail("the job's 4 endpoints did not appear:\n" +
                     open(job_log_path).read())
            time.sleep(0.2)
        # Written as a job would: a new file renamed over the old one.
        with open(sd + ".tmp", "w") as f:
            json.dump([{"targets": sorted(found.values()),
                        "labels": {"cluster": "test"}}], f)
        os.rename(sd + ".tmp", sd)

        exprs = dashboard_exprs(dashboard) + rule_exprs(rules)
        pending = dict(exprs)
        deadline = time.time() + 90
        last = {}
        while pending and time.time() < deadline:
            time.sleep(2)
            if job.poll() is not None:
                fail("the job ended early:\n" + open(job_log_path).read())
            for what, expr in list(pending.items()):
                r = query(base, substitute(expr))
                last[what] = r
                if r.get("status") != "success":
                    fail("%s: %s\n%s" % (what, r.get("error"), expr))
                if r["data"]["result"]:
                    del pending[what]
        up = query(base, 'sum(up{job="%s"})' % JOB)["data"]["result"]
        print("targets up: %s" % (up[0]["value"][1] if up else "none"))
        if pending:
            for what in pending:
                print("EMPTY: %s\n  %s" % (what, substitute(pending[what])),
                      file=sys.stderr)
            fail("%d of %d expressions returned nothing" %
                 (len(pending), len(exprs)))
        groups = get(base + "/api/v1/rules")["data"]["groups"]
        if not groups:
            fail("Prometheus loaded no rule group from " + rules)
        for g in groups:
            for r in g["rules"]:
                if r.get("health") != "ok":
                    fail("rule %s: %s %s" % (r["name"], r.get("health"),
                                             r.get("lastError")))
        print("all %d expressions (dashboard and rules) returned data; "
              "%d rule groups healthy" % (len(exprs), len(groups)))
        # Rank 0 looked its fresh store up once: one miss, nothing else.
        lookups = {}
        for sample in query(base, 'sum by (result) (hvdtune_store_lookups_'
                            'total{job="%s"})' % JOB)["data"]["result"]:
            lookups[sample["metric"]["result"]] = float(sample["value"][1])
        if lookups != {"hit": 0, "near": 0, "miss": 1, "error": 0}:
            fail("store lookups through Prometheus: %r, expected one miss"
                 % lookups)
        open(stop, "w").close()
        if job.wait(120) != 0:
            fail("job failed:\n" + open(job_log_path).read())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
