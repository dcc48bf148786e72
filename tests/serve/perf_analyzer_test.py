#!/usr/bin/env python3
"""glassbox serve under Triton's load generator: perf_analyzer (tritonclient 2.48.0's binary, put
in .venv/bin by scripts/setup) runs a concurrency sweep on the FP32 model with binary tensors (its
default), with JSON tensors, and with -b 2. Each run must exit 0 and write a CSV with one row per
concurrency and a throughput above zero, report the server's statistics, and the server's own
statistics must agree with it: no failed request, at least as many successful requests as
perf_analyzer counted, and batch size x requests inferences.

    perf_analyzer_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR] [--perf-analyzer PATH]
Exits 0 when every run holds, 1 otherwise, 77 when perf_analyzer cannot run on this machine.
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

# Concurrency 1 and 3. perf_analyzer repeats measurement windows until the last 3 agree within
# --stability-percentage (throughput and latency, max / min) and fails with "Failed to obtain
# stable measurement" after --max-trials windows. On a loaded 2-core machine neither time windows
# nor a 50 % band are enough: a window is a count of requests here (count_windows: at least 50 per
# window, so a slow one is longer, never empty) and the band is 1000 % (max / min <= 11). What is
# checked is correctness, never speed.
SWEEP = ["--concurrency-range", "1:4:2", "--measurement-mode", "count_windows", "--measurement-request-count", "50",
         "--stability-percentage", "1000", "--max-trials", "20"]
CONCURRENCIES = [1, 3]


def find_perf_analyzer(given: str | None) -> str | None:
    if given:
        return given
    here = Path(sys.executable).parent / "perf_analyzer"
    if here.exists():
        return str(here)
    return shutil.which("perf_analyzer")


def server_counts(port: int) -> dict[str, int]:
    """The fp32 model's counters from the statistics extension."""
    status, stats = sc.get_json(port, "/v2/models/fp32/stats")
    s = (stats or {}).get("model_stats", [{}])[0] if status == 200 and isinstance(stats, dict) else {}
    inf = s.get("inference_stats", {})
    return {"success": int(inf.get("success", {}).get("count", 0)), "fail": int(inf.get("fail", {}).get("count", 0)),
            "inferences": int(s.get("inference_count", 0)), "executions": int(s.get("execution_count", 0))}


def reported_counts(stdout: str, section: str, what: str) -> list[int]:
    """perf_analyzer's per-concurrency counts, e.g. section "Client", what "Request count"."""
    return [int(m) for m in re.findall(rf"{section}:\s*\n(?:\s+[^\n]*\n)*?\s+{what}: (\d+)", stdout)]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--perf-analyzer")
    args = ap.parse_args(argv)
    pa = find_perf_analyzer(args.perf_analyzer)
    if pa is None:
        print("skipped: perf_analyzer is not installed (run `GB_SKIP_BUILD=1 scripts/setup`)")
        return sc.SKIP
    probe = subprocess.run([pa, "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"skipped: {pa} --version exits {probe.returncode}: {(probe.stderr or probe.stdout).strip()[:400]}")
        return sc.SKIP
    print("perf_analyzer:", probe.stdout.strip().splitlines()[0] if probe.stdout.strip() else "?")

    work = sc.workdir_arg(args.workdir, "gb-serve-perf-analyzer-")
    c = sc.Checks("perf_analyzer_test")
    repo = sc.build_repository(work / "repo", models=["fp32"])
    runs = [
        ("binary", []),
        ("json", ["--input-tensor-format", "json", "--output-tensor-format", "json"]),
        ("binary -b 2", ["-b", "2"]),
    ]
    with sc.ServeProcess(args.glassbox, repo, work, name="serve-perf-analyzer") as srv:
        for what, extra in runs:
            batch = int(extra[1]) if extra[:1] == ["-b"] else 1
            csv_path = work / f"pa_{what.replace(' ', '_')}.csv"
            csv_path.unlink(missing_ok=True)
            cmd = [pa, "-m", "fp32", "-u", f"localhost:{srv.port}", "-i", "http", *SWEEP, "-f", str(csv_path), *extra]
            before = server_counts(srv.port)
            t = time.monotonic()
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            took = time.monotonic() - t
            after = server_counts(srv.port)
            print(f"--- perf_analyzer {what}: exit {r.returncode} in {took:.1f} s\n$ {' '.join(cmd)}")
            print(r.stdout[-3000:])
            if r.stderr.strip():
                print("stderr:", r.stderr[-2000:])
            if not c.check(r.returncode == 0, f"perf_analyzer {what}: exit {r.returncode}: "
                                             f"{(r.stderr.strip() or r.stdout.strip())[-600:]}"):
                continue
            if not c.check(csv_path.exists(), f"perf_analyzer {what}: no CSV at {csv_path}"):
                continue
            with open(csv_path, newline="", encoding="utf-8") as f:
                rows = [row for row in csv.DictReader(f) if row.get("Concurrency", "").strip().isdigit()]
            conc = [int(row["Concurrency"]) for row in rows]
            c.check(conc == CONCURRENCIES, f"perf_analyzer {what}: CSV concurrencies {conc} (expected {CONCURRENCIES})")
            for row in rows:
                thr = float(row.get("Inferences/Second", "0") or 0)
                c.check(thr > 0, f"perf_analyzer {what}: concurrency {row['Concurrency']} throughput {thr}")
                print(f"  concurrency {row['Concurrency']}: {thr:.1f} infer/s, p50 {row.get('p50 latency')} us, "
                      f"p99 {row.get('p99 latency')} us, server queue {row.get('Server Queue')} us, "
                      f"compute infer {row.get('Server Compute Infer')} us")

            # The server's statistics against perf_analyzer's report and against themselves.
            client = reported_counts(r.stdout, "Client", "Request count")
            server = reported_counts(r.stdout, "Server", "Inference count")
            delta = {k: after[k] - before[k] for k in after}
            print(f"  client request counts {client}, server inference counts {server}; server delta {delta}")
            c.check(len(client) == len(CONCURRENCIES) and all(n > 0 for n in client),
                    f"perf_analyzer {what}: client request counts {client} (one per concurrency, > 0)")
            c.check(len(server) == len(CONCURRENCIES) and all(n > 0 for n in server),
                    f"perf_analyzer {what}: no server-side inference counts in its report ({server})")
            c.check(delta["fail"] == 0, f"perf_analyzer {what}: the server counted {delta['fail']} failed requests")
            c.check(delta["success"] >= sum(client),
                    f"perf_analyzer {what}: the server counted {delta['success']} successful requests, fewer than "
                    f"the {sum(client)} perf_analyzer measured")
            c.check(delta["inferences"] == batch * delta["success"],
                    f"perf_analyzer {what}: {delta['inferences']} inferences for {delta['success']} requests of "
                    f"batch {batch}")
            c.check(sum(server) <= delta["inferences"],
                    f"perf_analyzer {what}: it reports {sum(server)} server inferences, the server counted "
                    f"{delta['inferences']}")
            c.check(0 < delta["executions"] <= delta["success"],
                    f"perf_analyzer {what}: {delta['executions']} executions for {delta['success']} requests")
    c.check(srv.returncode == 0, f"server exited {srv.returncode} on SIGTERM")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
