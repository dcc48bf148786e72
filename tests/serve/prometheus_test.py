#!/usr/bin/env python3
"""glassbox serve's metrics endpoint under a real Prometheus (Debian's /usr/bin/prometheus): two
servers (default names and --metric-names triton) are scraped every second; after N inferences the
query API must return the success counter = N for each, a p99 from the request-latency histogram
(histogram_quantile over rate(..._bucket[1m])) must be a number, and `promtool check metrics` must
accept the default names without a word.

    prometheus_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Exits 0 when every check holds, 1 otherwise, 77 without prometheus or promtool.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

N_DEFAULT = 37  # inferences sent to the server with the default names
N_TRITON = 23   # and to the one with Triton's names
TRITON_NAMES = ["nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                "nv_inference_exec_count", "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                "nv_inference_compute_output_duration_us", "nv_inference_pending_request_count"]
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text: str) -> tuple[dict[str, str], list[tuple[str, dict, float]]]:
    """(family name -> TYPE, samples as (name, labels, value))."""
    types: dict[str, str] = {}
    samples = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            types[name] = kind.strip()
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            if m:
                labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
                samples.append((m.group(1), labels, float(m.group(3))))
    return types, samples


def value(samples, name: str, **labels) -> float | None:
    vals = [v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]
    return sum(vals) if vals else None


def scrape(port: int) -> tuple[str, str]:
    status, headers, body = sc.request(port, "GET", "/metrics")
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}: {body[:200]!r}")
    return body.decode("utf-8"), headers.get("content-type", "")


def query(prom_port: int, q: str) -> list:
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise RuntimeError(f"query {q!r}: {doc}")
    return doc["data"]["result"]


def poll(prom_port: int, q: str, want, timeout: float = 60) -> tuple[bool, object]:
    """Polls until want(result) holds; returns (held, last result)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = query(prom_port, q)
            if want(last):
                return True, last
        except (OSError, RuntimeError) as e:
            last = str(e)
        time.sleep(0.5)
    return False, last


def scalar(result) -> float | None:
    try:
        return float(result[0]["value"][1])
    except (TypeError, IndexError, KeyError, ValueError):
        return None


def infer_n(port: int, n: int, c: sc.Checks, what: str) -> None:
    ok = 0
    for i in range(n):
        body, _ = sc.fp32_request(batch=1 + i % 2, seed=i)
        status, _, _ = sc.post_json(port, "/v2/models/fp32/infer", body)
        ok += status == 200
    c.check(ok == n, f"{what}: {ok} of {n} inferences succeeded")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        print(f"skipped: prometheus ({prometheus}) or promtool ({promtool}) is not installed (Debian: prometheus)")
        return sc.SKIP
    work = sc.workdir_arg(args.workdir, "gb-serve-prometheus-")
    c = sc.Checks("prometheus_test")
    repo = sc.build_repository(work / "repo", models=["fp32"])

    a = sc.ServeProcess(args.glassbox, repo, work, name="serve-prom-default").start()
    b = None
    prom = None
    try:
        b = sc.ServeProcess(args.glassbox, repo, work, ["--metric-names", "triton"], name="serve-prom-triton").start()
        text, ctype = scrape(a.metrics_port)
        c.check(ctype.startswith("text/plain") and "0.0.4" in ctype, f"/metrics Content-Type {ctype!r}")
        types, _ = parse_metrics(text)
        print("default metric families:", ", ".join(f"{n} ({t})" for n, t in sorted(types.items())))
        success = next((n for n in types if re.fullmatch(r"nv_inference_request_success(_total)?", n)), None)
        c.check(success == "nv_inference_request_success_total", f"success counter family: {success!r}")
        success = success or "nv_inference_request_success_total"
        hist = sorted(n for n, t in types.items() if t == "histogram" and "request" in n and n.endswith("_seconds"))
        c.check(bool(hist), f"no request-latency histogram in seconds among {sorted(types)}")
        hist_name = hist[0] if hist else "nv_inference_request_duration_seconds"
        for part in ("queue", "compute"):
            c.check(any(t == "histogram" and part in n and n.endswith("_seconds") for n, t in types.items()),
                    f"no {part} histogram in seconds")
        c.check(any("pending" in n and t == "gauge" for n, t in types.items()), "no pending-request gauge")
        c.check(any(("rss" in n or "resident" in n) and n.endswith("bytes") for n in types), "no process RSS gauge in bytes")

        # Prometheus scraping both servers every second.
        prom_port = sc.free_port()
        cfg = work / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
            f"  - job_name: default\n    static_configs:\n      - targets: ['127.0.0.1:{a.metrics_port}']\n"
            f"  - job_name: triton\n    static_configs:\n      - targets: ['127.0.0.1:{b.metrics_port}']\n",
            encoding="utf-8")
        shutil.rmtree(work / "tsdb", ignore_errors=True)
        prom_log = open(work / "prometheus.log", "wb")
        prom = subprocess.Popen([prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={work / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=prom_log, stderr=subprocess.STDOUT)
        ok, last = poll(prom_port, 'up{job=~"default|triton"}',
                        lambda r: len(r) == 2 and all(x["value"][1] == "1" for x in r), timeout=60)
        c.check(ok, f"Prometheus never saw both targets up: {last}")

        infer_n(a.port, N_DEFAULT, c, "default names")
        infer_n(b.port, N_TRITON, c, "triton names")
        ok, last = poll(prom_port, f'sum({success}{{job="default",model="fp32"}})', lambda r: scalar(r) == N_DEFAULT)
        c.check(ok, f"Prometheus: {success}{{model=\"fp32\"}} = {scalar(last) if isinstance(last, list) else last}"
                    f" (expected {N_DEFAULT})")
        print(f"Prometheus: {success}{{model=\"fp32\"}} = {scalar(last) if isinstance(last, list) else last}")
        ok, last = poll(prom_port, f'sum(nv_inference_request_success{{job="triton",model="fp32"}})',
                        lambda r: scalar(r) == N_TRITON)
        c.check(ok, f"Prometheus (triton names): nv_inference_request_success = "
                    f"{scalar(last) if isinstance(last, list) else last} (expected {N_TRITON})")
        q99 = f'histogram_quantile(0.99, sum by (le) (rate({hist_name}_bucket{{job="default",model="fp32"}}[1m])))'
        ok, last = poll(prom_port, q99, lambda r: scalar(r) is not None and math.isfinite(scalar(r)) and scalar(r) > 0)
        c.check(ok, f"Prometheus: {q99} = {last}")
        print(f"Prometheus: p99 request latency {scalar(last) if isinstance(last, list) else last} s")
        ok, last = poll(prom_port, f'sum({hist_name}_count{{job="default",model="fp32"}})',
                        lambda r: scalar(r) == N_DEFAULT)
        c.check(ok, f"Prometheus: {hist_name}_count = {last} (expected {N_DEFAULT})")

        # The endpoint's own numbers, and promtool's lint on the default names.
        text, _ = scrape(a.metrics_port)
        (work / "metrics_default.txt").write_text(text, encoding="utf-8")
        types, samples = parse_metrics(text)
        batch_elems = sum(1 + i % 2 for i in range(N_DEFAULT))
        got = value(samples, success, model="fp32", version="1")
        c.check(got == N_DEFAULT, f"/metrics {success}{{model=fp32,version=1}} = {got}")
        count_name = next((n for n in types if re.fullmatch(r"nv_inference_count(_total)?", n)), "nv_inference_count_total")
        got = value(samples, count_name, model="fp32")
        c.check(got == batch_elems, f"/metrics {count_name} = {got} (expected {batch_elems} batch elements)")
        buckets = sorted(((float(l["le"]), v) for n, l, v in samples if n == f"{hist_name}_bucket"
                          and l.get("model") == "fp32"), key=lambda t: t[0])
        c.check(bool(buckets) and buckets[-1][0] == math.inf and buckets[-1][1] == N_DEFAULT,
                f"{hist_name}: +Inf bucket {buckets[-1] if buckets else None} (expected {N_DEFAULT})")
        c.check(all(x[1] <= y[1] for x, y in zip(buckets, buckets[1:])), f"{hist_name}: buckets not cumulative {buckets}")
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        c.check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
                f"promtool check metrics: exit {r.returncode}: {(r.stdout + r.stderr).strip()[:1500]}")

        # Triton's names on the second server.
        text_t, _ = scrape(b.metrics_port)
        (work / "metrics_triton.txt").write_text(text_t, encoding="utf-8")
        types_t, samples_t = parse_metrics(text_t)
        missing = [n for n in TRITON_NAMES if n not in types_t]
        c.check(not missing, f"--metric-names triton lacks {missing} (has {sorted(types_t)})")
        got = value(samples_t, "nv_inference_request_success", model="fp32", version="1")
        c.check(got == N_TRITON, f"triton names: nv_inference_request_success{{model=fp32,version=1}} = {got}")
        r = subprocess.run([promtool, "check", "metrics"], input=text_t, capture_output=True, text=True)
        print(f"promtool on Triton's names (not required): exit {r.returncode} {(r.stdout + r.stderr).strip()[:300]!r}")
    except Exception as e:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        c.check(False, f"{type(e).__name__}: {e}")
    finally:
        if prom is not None:
            prom.terminate()
            try:
                prom.wait(30)
            except subprocess.TimeoutExpired:
                prom.kill()
        for s in (a, b):
            if s is not None:
                c.check(s.stop() == 0, f"{s.log_path.name}: exit {s.returncode} on SIGTERM")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
