#!/usr/bin/env python3
"""The monitor's rules and dashboard under a real Prometheus (Debian's): `glassbox monitor rules`
for the quickstart's repository passes `promtool check rules` and the unit tests of
monitor_rules_test.yml (`promtool test rules`); Prometheus loads the rules, scrapes the server
while it gets brightness-shifted traffic, and its ALERTS series shows GlassboxInputDrift firing;
every query of `glassbox monitor dashboard`'s panels returns data from Prometheus's query API.

    monitor_prometheus_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Exits 0 when every check holds, 1 otherwise, 77 without prometheus or promtool.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import monitor_test as mt  # noqa: E402
import prometheus_test as pt  # noqa: E402
import serve_common as sc  # noqa: E402

WINDOW = 200


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        print(f"skipped: prometheus ({prometheus}) or promtool ({promtool}) is not installed (Debian: prometheus)")
        return sc.SKIP
    work = sc.workdir_arg(args.workdir, "gb-monitor-prometheus-")
    checks = sc.Checks("monitor_prometheus")
    gb = args.glassbox
    repo = mt.prepare(gb, work, checks)

    rules = work / "rules.yml"
    p = subprocess.run([gb, "monitor", "rules", "--model-repository", str(repo), "--out", str(rules)],
                       capture_output=True, text=True)
    checks.check(p.returncode == 0 and rules.exists(), f"glassbox monitor rules: {p.stdout}{p.stderr}")
    p = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    checks.check(p.returncode == 0 and "SUCCESS" in p.stdout and "FAILED" not in p.stdout + p.stderr,
                 f"promtool check rules: {p.stdout}{p.stderr}")
    shutil.copy(Path(__file__).with_name("monitor_rules_test.yml"), work / "monitor_rules_test.yml")
    p = subprocess.run([promtool, "test", "rules", "monitor_rules_test.yml"], capture_output=True, text=True,
                       cwd=work)
    checks.check(p.returncode == 0 and "SUCCESS" in p.stdout, f"promtool test rules: {p.stdout}{p.stderr}")
    dash_file = work / "dashboard.json"
    p = subprocess.run([gb, "monitor", "dashboard", "--model-repository", str(repo), "--out", str(dash_file)],
                       capture_output=True, text=True)
    checks.check(p.returncode == 0, f"glassbox monitor dashboard: {p.stdout}{p.stderr}")
    dashboard = json.loads(dash_file.read_text())
    queries = [(panel["title"], t["expr"].replace("$model", ".*")) for panel in dashboard["panels"]
               for t in panel["targets"]]
    checks.check(len(dashboard["panels"]) >= 10, f"the dashboard has its panels: {len(dashboard['panels'])}")

    prom = None
    with sc.ServeProcess(gb, repo, work, ["--monitor-window", WINDOW, "--monitor-seconds", "5"]) as server:
        try:
            prom_port = sc.free_port()
            cfg = work / "prometheus.yml"
            cfg.write_text(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                f"rule_files:\n  - {rules}\n"
                f"scrape_configs:\n  - job_name: glassbox\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{server.metrics_port}']\n", encoding="utf-8")
            shutil.rmtree(work / "tsdb", ignore_errors=True)
            prom = subprocess.Popen([prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={work / 'tsdb'}",
                                     f"--web.listen-address=127.0.0.1:{prom_port}"],
                                    stdout=open(work / "prometheus.log", "wb"), stderr=subprocess.STDOUT)
            ok, last = pt.poll(prom_port, 'up{job="glassbox"}', lambda r: len(r) == 1 and r[0]["value"][1] == "1")
            checks.check(ok, f"Prometheus scrapes the server: {last}")
            traffic = mt.Traffic(repo, server.port, WINDOW)
            for _ in range(3):
                traffic.window_of("in_distribution")
            time.sleep(3)  # scraped while quiet
            firing = 'ALERTS{alertname="GlassboxInputDrift", alertstate="firing", model="quickstart"}'
            quiet = pt.query(prom_port, firing)
            checks.check(quiet == [], f"no drift alert while the traffic is in distribution: {quiet}")
            deadline = time.monotonic() + 90
            seen = []
            while time.monotonic() < deadline and not seen:
                traffic.window_of("brightness")
                seen = pt.query(prom_port, firing)
                time.sleep(0.5)
            checks.check(bool(seen), f"Prometheus's ALERTS shows {firing}")
            if seen:
                labels = seen[0]["metric"]
                checks.check(labels.get("severity") == "warning" and labels.get("version") == "1",
                             f"the alert carries severity and version: {labels}")
            # Every panel's query answers with data while the shift goes on (rates need a minute).
            time.sleep(2)
            empty = []
            for title, expr in queries:
                traffic.window_of("brightness")
                ok, last = pt.poll(prom_port, expr, lambda r: isinstance(r, list) and len(r) > 0, timeout=30)
                if not ok:
                    empty.append((title, expr, last))
            checks.check(not empty, f"every dashboard query returns data from Prometheus: {empty}")
            print(f"{len(queries)} dashboard queries answered; alert: {seen[0]['metric'] if seen else None}")
        finally:
            if prom:
                prom.terminate()
                prom.wait(timeout=30)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
