#!/usr/bin/env python3
"""`glassbox monitor compare` against Evidently's DataDriftPreset on the same CSV pair, in one run:
both times (Evidently's from the start of its process: import, load, drift), their ratio, and
whether the two agree on every column's verdict.

    .venv/bin/python bench/monitor_compare_bench.py --glassbox build/glassbox/cli/glassbox \\
        [--rows 1000000] [--cols 100] [--workdir runs/drift-bench] [--json]

The pair comes from scripts/drift_data.py (seed 0; columns 0, 5, 17 shifted by 0.3 std, 8 and 9 by
0.5, 3 and 26 spread x1.5, 40, 44, 46 shifted by 0.05 std), written once and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str]) -> tuple[float, str]:
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{p.stdout}\n{p.stderr}")
    return time.monotonic() - t0, p.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--workdir", default=str(ROOT / "runs" / "drift-bench"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    evidently = ROOT / ".venv-evidently" / "bin" / "python"
    if not evidently.exists():
        print("needs .venv-evidently (scripts/setup makes it)")
        return 77
    work = Path(args.workdir) / f"{args.rows}x{args.cols}"
    if not (work / "current.csv").exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "drift_data.py"), "--rows", str(args.rows), "--cols",
                        str(args.cols), "--shift", "0,5,17:0.3", "--shift", "8,9:0.5", "--scale", "3,26:1.5",
                        "--shift", "40,44,46:0.05", "--out-dir", str(work)], check=True)
    g_s, g_out = timed([args.glassbox, "monitor", "compare", "--reference", str(work / "reference.csv"), "--current",
                        str(work / "current.csv"), "--out", str(work / "glassbox"), "--json"])
    g = json.loads(g_out)
    e_s, _ = timed([str(evidently), str(ROOT / "scripts" / "evidently_drift.py"), str(work / "reference.csv"),
                    str(work / "current.csv"), "--out", str(work / "evidently.json")])
    e = json.loads((work / "evidently.json").read_text())
    ours = {c["name"]: c["drifted"] for c in g["columns"]}
    disagree = sorted(n for n, c in e["columns"].items() if ours.get(n) != c["drifted"])
    result = {"rows": args.rows, "cols": args.cols, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "glassbox_seconds": round(g_s, 2), "glassbox_read_seconds": round(g["seconds"]["read"], 2),
              "glassbox_compare_seconds": round(g["seconds"]["compare"], 2), "evidently_seconds": round(e_s, 2),
              "evidently_drift_seconds": e.get("seconds"), "evidently_peak_rss_mb": e.get("peak_rss_mb"),
              "speedup": round(e_s / g_s, 1), "columns": len(e["columns"]), "verdicts_disagree": disagree,
              "drifted": sorted(n for n, d in ours.items() if d)}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{args.rows} x {args.cols}: glassbox {g_s:.1f} s, Evidently {e_s:.1f} s: {e_s / g_s:.0f}x faster; "
              f"verdicts agree on {len(e['columns']) - len(disagree)} of {len(e['columns'])} columns")
    return 0 if not disagree else 1


if __name__ == "__main__":
    sys.exit(main())
