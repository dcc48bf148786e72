#!/usr/bin/env python3
"""The glass-box report in headless Chromium: it opens without console messages and every chart
region is drawn.

    report_browser.py --glassbox build/glassbox/cli/glassbox \
                      --sample-tool build/glassbox/report/report_sample_run [--workdir DIR]

1. Writes a synthetic run directory (report_sample_run) and runs `glassbox report` on it.
2. Opens report.html from file:// in headless Chromium (window 1400 px wide) through Selenium
   and reads the browser console (goog:loggingPrefs browser=ALL): any SEVERE or WARNING entry
   fails the test. The page must not overflow the window horizontally.
3. For every [data-chart] element, screenshots what it draws (its visible <svg> elements, or the
   element itself when it holds images) and decodes the PNG with Pillow. A region is drawn when
   >= 2 % of its pixels differ from its background colour (the most common one), it has >= 3
   distinct colours, and >= 0.1 % of its pixels are chromatic (data is drawn in colour; axes,
   grid and text are grey). All eight charts of the sample run must be present, and the lr
   chart's log/linear switch (CSS only) must swap its two drawings when clicked.
4. Self-check, so that the test can fail: a copy of the report with the first chart's SVG emptied
   must be caught as blank (and only that chart), and a copy that tries to load an external
   image must produce a console entry.
Prints a JSON summary. Exit 0 when everything holds, 1 when not, 77 (skip) when Chromium or
its driver is not installed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

EXPECTED_CHARTS = ["loss", "accuracy", "lr", "grad_norm", "confusion", "reliability", "pr", "gradcam"]
WIDTH = 1400
MIN_NON_BACKGROUND = 0.02
MIN_COLOURS = 3
MIN_CHROMATIC = 0.001


def find_browser() -> tuple[str | None, str | None]:
    browser = os.environ.get("GB_CHROMIUM") or next(
        (p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = os.environ.get("GB_CHROMEDRIVER") or shutil.which("chromedriver")
    return browser, driver


def start_driver(browser: str, driver: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={WIDTH},1000", "--force-device-scale-factor=1", "--hide-scrollbars",
                "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


def pixel_stats(png: bytes) -> dict:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    w, h = img.size
    n = w * h
    if n == 0:
        return {"size": f"{w}x{h}", "non_background": 0.0, "colours": 0, "chromatic": 0.0}
    counts = {colour: count for count, colour in img.getcolors(maxcolors=n)}
    bg = max(counts, key=counts.get)
    differ = sum(c for p, c in counts.items() if sum(abs(a - b) for a, b in zip(p, bg)) > 24)
    chromatic = sum(c for p, c in counts.items() if max(p) - min(p) > 60)
    # Distinct colours, quantised to 5 bits a channel so that anti-aliasing alone does not count.
    quantised = {(r >> 3, g >> 3, b >> 3) for (r, g, b) in counts}
    return {"size": f"{w}x{h}", "background": "#%02x%02x%02x" % bg, "non_background": round(differ / n, 4),
            "colours": len(quantised), "chromatic": round(chromatic / n, 4)}


def is_drawn(stats: dict) -> bool:
    return (stats["non_background"] >= MIN_NON_BACKGROUND and stats["colours"] >= MIN_COLOURS
            and stats["chromatic"] >= MIN_CHROMATIC)


def check_page(driver, path: Path) -> dict:
    """Loads the page; returns its console entries, overflow and per-chart pixel statistics."""
    from selenium.webdriver.common.by import By

    driver.get(path.resolve().as_uri())
    driver.execute_script("return document.readyState")
    console = [{"level": e.get("level"), "message": e.get("message")} for e in driver.get_log("browser")]
    scroll_width = driver.execute_script("return document.documentElement.scrollWidth")
    inner_width = driver.execute_script("return window.innerWidth")
    charts: dict[str, dict] = {}
    for el in driver.find_elements(By.CSS_SELECTOR, "[data-chart]"):
        name = el.get_attribute("data-chart")
        targets = [s for s in el.find_elements(By.CSS_SELECTOR, "svg") if s.is_displayed()]
        if not targets:
            targets = [el]
        regions = []
        for t in targets:
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", t)
            stats = pixel_stats(t.screenshot_as_png)
            stats["drawn"] = is_drawn(stats)
            regions.append(stats)
        charts[name] = {"regions": regions, "drawn": bool(regions) and all(r["drawn"] for r in regions)}
    # The CSS-only log/linear switch: clicking it swaps which of the two charts is shown.
    switches = {}
    for box in driver.find_elements(By.CSS_SELECTOR, "input.logswitch"):
        fig = box.find_element(By.XPATH, "./ancestor::*[@data-chart][1]")
        name = fig.get_attribute("data-chart")
        log_div, lin_div = fig.find_element(By.CSS_SELECTOR, ".log"), fig.find_element(By.CSS_SELECTOR, ".lin")
        before = (log_div.is_displayed(), lin_div.is_displayed())
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
        box.click()
        after = (log_div.is_displayed(), lin_div.is_displayed())
        lin_stats = pixel_stats(lin_div.find_element(By.CSS_SELECTOR, "svg").screenshot_as_png) if after[1] else None
        box.click()
        switches[name] = {"log_first": before == (True, False), "switched": after == (False, True),
                          "linear_drawn": bool(lin_stats) and is_drawn(lin_stats)}
    # Entries logged while scrolling and taking screenshots count too.
    console += [{"level": e.get("level"), "message": e.get("message")} for e in driver.get_log("browser")]
    bad = [e for e in console if e["level"] in ("SEVERE", "WARNING")]
    return {"console": console, "console_problems": bad, "scroll_width": scroll_width,
            "inner_width": inner_width, "charts": charts, "switches": switches}


def blank_first_chart(html: str) -> tuple[str, str]:
    """The report with the contents of the first chart's <svg> removed (the element keeps its size)."""
    m = re.search(r'data-chart="([^"]+)"', html)
    if not m:
        raise SystemExit("report_browser: no data-chart element in the report")
    start = html.index("<svg", m.end())
    open_end = html.index(">", start) + 1
    close = html.index("</svg>", open_end)
    return html[:open_end] + html[close:], m.group(1)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True, type=Path)
    ap.add_argument("--sample-tool", required=True, type=Path)
    ap.add_argument("--workdir", type=Path, help="where the run directory goes (default: a temporary one)")
    args = ap.parse_args(argv)

    browser, driver_path = find_browser()
    if not browser or not driver_path:
        print(json.dumps({"skipped": "chromium or chromedriver not installed",
                          "browser": browser, "driver": driver_path}))
        return 77

    work = args.workdir or Path(tempfile.mkdtemp(prefix="gb-report-browser-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    run = work / "run"
    subprocess.run([str(args.sample_tool), str(run)], check=True)
    r = subprocess.run([str(args.glassbox), "report", str(run)], capture_output=True, text=True)
    if r.returncode != 0:
        print(json.dumps({"ok": False, "error": "glassbox report failed", "rc": r.returncode,
                          "output": r.stdout + r.stderr}))
        return 1
    report = run / "report.html"
    html = report.read_text(encoding="utf-8")

    failures: list[str] = []
    driver = start_driver(browser, driver_path)
    try:
        main_check = check_page(driver, report)
        for e in main_check["console_problems"]:
            failures.append(f"console {e['level']}: {e['message']}")
        if main_check["scroll_width"] > main_check["inner_width"]:
            failures.append(f"page overflows horizontally: {main_check['scroll_width']} > {main_check['inner_width']} px")
        for name in EXPECTED_CHARTS:
            if name not in main_check["charts"]:
                failures.append(f"chart {name!r} missing")
        for name, c in main_check["charts"].items():
            if not c["drawn"]:
                failures.append(f"chart {name!r} looks blank: {c['regions']}")
        if "lr" not in main_check["switches"]:
            failures.append("the lr chart (four decades in the sample run) has no log-scale switch")
        for name, sw in main_check["switches"].items():
            if not all(sw.values()):
                failures.append(f"log-scale switch of {name!r} does not work: {sw}")

        # Self-check 1: an emptied chart must be caught, the others must still pass.
        blank_html, blanked = blank_first_chart(html)
        blank_path = work / "blank.html"
        blank_path.write_text(blank_html, encoding="utf-8")
        blank_check = check_page(driver, blank_path)
        caught = [n for n, c in blank_check["charts"].items() if not c["drawn"]]
        if caught != [blanked]:
            failures.append(f"self-check: emptying chart {blanked!r} was reported as blank charts {caught}")

        # Self-check 2: a load from outside the page must show up in the console.
        leak_path = work / "leak.html"
        leak_path.write_text(html.replace("</main>", '<img src="https://example.invalid/x.png" alt=""></main>', 1),
                             encoding="utf-8")
        leak_check = check_page(driver, leak_path)
        if not leak_check["console_problems"]:
            failures.append("self-check: an external image load left no console entry")
    finally:
        driver.quit()

    summary = {
        "ok": not failures,
        "report": str(report),
        "bytes": report.stat().st_size,
        "console": main_check["console"],
        "charts": {n: {"drawn": c["drawn"], "regions": c["regions"]} for n, c in main_check["charts"].items()},
        "log_switches": main_check["switches"],
        "self_check": {"blanked": blanked, "caught_blank": caught,
                       "leak_console": [e["message"] for e in leak_check["console_problems"]][:2]},
        "failures": failures,
    }
    print(json.dumps(summary, indent=2))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
