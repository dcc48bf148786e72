#!/usr/bin/env python3
"""`glassbox report` end to end: output file, --out, exit codes, one-line errors, and an earlier
report left untouched when an artefact is malformed.

    report_cli_test.py --glassbox build/glassbox/cli/glassbox \
                       --sample-tool build/glassbox/report/report_sample_run
Standard library only; exits 0 when every check holds, 1 otherwise (each failure printed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path


def run(cmd: list[str]) -> tuple[int, str, str]:
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--sample-tool", required=True)
    args = ap.parse_args(argv)
    failures: list[str] = []

    def check(cond: bool, what: str) -> None:
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="gb-report-cli-") as tmp:
        work = Path(tmp)
        run_dir = work / "run"
        subprocess.run([args.sample_tool, str(run_dir)], check=True)

        rc, out, err = run([args.glassbox, "report", str(run_dir)])
        report = run_dir / "report.html"
        check(rc == 0, f"report: exit {rc}, stderr {err!r}")
        check(out.startswith(f"wrote {report}"), f"report: stdout {out!r}")
        html = report.read_text(encoding="utf-8") if report.exists() else ""
        for needle in ('<section id="summary">', 'data-chart="confusion"', 'data-chart="gradcam"', "12,345"):
            check(needle in html, f"report.html lacks {needle!r}")

        other = work / "site" / "r.html"
        rc, out, err = run([args.glassbox, "report", str(run_dir), "--out", str(other)])
        check(rc == 0 and other.exists(), f"--out: exit {rc}, stderr {err!r}")

        # A malformed artefact: exit 2, one line naming the file and the problem, old report kept.
        metrics = run_dir / "eval" / "metrics.json"
        metrics.write_text('{"accuracy": "high"}', encoding="utf-8")
        rc, out, err = run([args.glassbox, "report", str(run_dir)])
        lines = [l for l in err.splitlines() if l.strip()]
        check(rc == 2, f"malformed: exit {rc} (expected 2)")
        check(len(lines) == 1 and lines[0].startswith("error: ")
              and f"{metrics}: accuracy must be a number, got a string" in lines[0],
              f"malformed: stderr {err!r}")
        check(report.read_text(encoding="utf-8") == html, "malformed: report.html was changed")
        check(not any(p.name.startswith(".report.html.tmp") for p in run_dir.iterdir()), "malformed: a temp file is left")

        # Absent optional artefacts are fine.
        metrics.unlink()
        rc, out, err = run([args.glassbox, "report", str(run_dir)])
        check(rc == 0, f"no eval: exit {rc}, stderr {err!r}")
        check("glassbox eval --checkpoint" in report.read_text(encoding="utf-8"), "no eval: the note is missing")

        # No such run directory; no argument at all.
        rc, out, err = run([args.glassbox, "report", str(work / "nowhere")])
        check(rc == 2 and "no run directory at" in err and len(err.strip().splitlines()) == 1,
              f"missing dir: exit {rc}, stderr {err!r}")
        rc, out, err = run([args.glassbox, "report"])
        check(rc == 2, f"no argument: exit {rc}")
        rc, out, err = run([args.glassbox, "report", "--help"])
        check(rc == 0 and "Examples" in out and "--out" in out, f"--help: exit {rc}, stdout {out!r}")

    for f in failures:
        print("FAIL:", f)
    print(f"report_cli: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
