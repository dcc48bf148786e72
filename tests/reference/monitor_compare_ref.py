#!/usr/bin/env python3
"""`glassbox monitor compare` against Evidently's DataDriftPreset (its own venv, .venv-evidently):
for a pair of 800 rows (KS and chi-square) and one of 20 000 rows (normed Wasserstein and
Jensen-Shannon) of 30 columns with planted shifts (scripts/drift_data.py), each column's test,
score and verdict must equal Evidently's (scores within 1e-6).

    monitor_compare_ref.py --glassbox build/glassbox/cli/glassbox --workdir DIR
Exits 0 when they agree, 1 otherwise, 77 when .venv-evidently is missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = {"ks": "K-S p_value", "chi2": "chi-square p_value", "wasserstein": "Wasserstein distance (normed)",
         "jensenshannon": "Jensen-Shannon distance"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    evidently = ROOT / ".venv-evidently" / "bin" / "python"
    if not evidently.exists():
        print("skipped: .venv-evidently is missing (scripts/setup makes it)")
        return 77
    failures = []
    for rows in (800, 20000):
        work = Path(args.workdir) / str(rows)
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "drift_data.py"), "--rows", str(rows), "--cols", "30",
                        "--seed", "3", "--shift", "0,5,17:0.3", "--shift", "8,9:0.5", "--scale", "3,26:1.5",
                        "--shift", "12:0.05", "--out-dir", str(work)], check=True, capture_output=True)
        g = json.loads(subprocess.run([args.glassbox, "monitor", "compare", "--reference", str(work / "reference.csv"),
                                       "--current", str(work / "current.csv"), "--out", str(work / "glassbox"),
                                       "--json"], check=True, capture_output=True, text=True).stdout)
        subprocess.run([str(evidently), str(ROOT / "scripts" / "evidently_drift.py"), str(work / "reference.csv"),
                        str(work / "current.csv"), "--out", str(work / "evidently.json")], check=True,
                       capture_output=True)
        e = json.loads((work / "evidently.json").read_text())["columns"]
        ours = {c["name"]: c for c in g["columns"]}
        for name, ev in e.items():
            c = ours.get(name)
            if c is None:
                failures.append(f"{rows}: {name} missing")
                continue
            if TESTS[c["stattest"]] != ev["stattest"]:
                failures.append(f"{rows}: {name} test {c['stattest']} vs {ev['stattest']}")
            if abs(c["score"] - ev["score"]) > 1e-6 * max(1.0, abs(ev["score"])):
                failures.append(f"{rows}: {name} score {c['score']} vs {ev['score']}")
            if c["drifted"] != ev["drifted"]:
                failures.append(f"{rows}: {name} verdict {c['drifted']} vs {ev['drifted']}")
        drifted = sorted(n for n, c in ours.items() if c["drifted"])
        print(f"{rows} rows: {len(e)} columns agree with Evidently; drifted: {drifted}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
