#!/usr/bin/env python3
"""glassbox serve's /dashboard in headless Chromium (Selenium): the quickstart's model, exported with
its profile and served with windows of 200 predictions, gets in-distribution then brightness-shifted
traffic; the page must log nothing to the console, draw every panel of both models (the monitored
one's ten, the unmonitored one's five), and show exactly the values /metrics gives once the traffic
has stopped (each number carries the series and the value it was read from).

    dashboard_browser_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Exits 0 when every check holds, 1 otherwise, 77 without Chromium or its driver.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "reference"))
import monitor_test as mt  # noqa: E402
import report_browser as rb  # noqa: E402
import serve_common as sc  # noqa: E402

WINDOW = 200
MONITORED_PANELS = ["qps", "latency", "failures", "queue", "batch", "out_of_range", "drift", "confidence", "classes",
                    "alarms"]


def metrics_series(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            cut = line.rfind(" ")
            out[line[:cut]] = line[cut + 1:]
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    browser, driver_path = rb.find_browser()
    if not browser or not driver_path:
        print(f"skipped: Chromium ({browser}) or chromedriver ({driver_path}) is not installed")
        return sc.SKIP
    from selenium.webdriver.common.by import By

    work = sc.workdir_arg(args.workdir, "gb-dashboard-")
    checks = sc.Checks("dashboard_browser")
    repo = mt.prepare(args.glassbox, work, checks)
    with sc.ServeProcess(args.glassbox, repo, work, ["--monitor-window", WINDOW]) as server:
        traffic = mt.Traffic(repo, server.port, WINDOW)
        for shift in ("in_distribution", "in_distribution", "brightness"):
            traffic.window_of(shift)
        plain = mt.Traffic(repo, server.port, 100)
        plain.model = "plain"
        plain.window_of("in_distribution")
        driver = rb.start_driver(browser, driver_path)
        try:
            driver.get(f"http://127.0.0.1:{server.port}/dashboard")
            refreshes = lambda: int(driver.execute_script("return Number(document.body.dataset.refreshes || 0)"))
            deadline = time.monotonic() + 60
            while refreshes() < 3 and time.monotonic() < deadline:
                time.sleep(0.2)
            checks.check(refreshes() >= 3, "the page refreshes itself from the server")
            # The traffic has stopped: wait for one more refresh, then hold the page to /metrics.
            n = refreshes()
            while refreshes() < n + 1 and time.monotonic() < deadline + 30:
                time.sleep(0.1)
            shown = driver.execute_script(
                "return [...document.querySelectorAll('[data-series]')].map(e => "
                "[e.dataset.series, e.dataset.value, e.textContent, e.closest('[data-panel]').dataset.panel])")
            text = sc.request(server.metrics_port, "GET", "/metrics")[2].decode()
            truth = metrics_series(text)
            wrong = [s for s in shown if truth.get(s[0]) != s[1]]
            checks.check(len(shown) >= 30 and not wrong,
                         f"{len(shown)} values shown, each equal to /metrics: {wrong[:5]}")
            unreadable = [s for s in shown if abs(float(s[2]) - float(s[1])) > 1e-5 * max(1.0, abs(float(s[1])))]
            checks.check(not unreadable, f"the text shown is the value: {unreadable[:5]}")
            panels_seen = {}
            for sec in driver.find_elements(By.CSS_SELECTOR, "section.model"):
                model = sec.get_attribute("data-model")
                for p in sec.find_elements(By.CSS_SELECTOR, "[data-panel]"):
                    name = p.get_attribute("data-panel")
                    svg = p.find_element(By.CSS_SELECTOR, "svg")
                    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", svg)
                    stats = rb.pixel_stats(svg.screenshot_as_png)
                    series = len(svg.find_elements(By.CSS_SELECTOR, ".series"))
                    panels_seen.setdefault(model, []).append(name)
                    checks.check(series > 0 and rb.is_drawn(stats), f"{model} {name}: drawn ({series} series, {stats})")
            checks.check(panels_seen.get("quickstart") == MONITORED_PANELS,
                         f"the monitored model has its panels: {panels_seen.get('quickstart')}")
            checks.check(panels_seen.get("plain") == MONITORED_PANELS[:5],
                         f"the unmonitored model has the serving panels: {panels_seen.get('plain')}")
            alarms = driver.find_element(By.CSS_SELECTOR, 'section[data-model="quickstart"] table.alarms').text
            checks.check("input_drift" in alarms and "since" in alarms, f"the alarm table names the drift: {alarms!r}")
            console = [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "WARNING")]
            checks.check(not console, f"no console message: {console}")
        finally:
            driver.quit()
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
