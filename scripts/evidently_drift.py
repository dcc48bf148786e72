#!/usr/bin/env python3
"""Evidently's DataDriftPreset, with its defaults, on a reference CSV and a current CSV.

The reference that `glassbox monitor compare` is measured against. Runs in .venv-evidently
(scripts/setup makes it; Evidently 0.7.23 does not import with pandas 3):

  .venv-evidently/bin/python scripts/evidently_drift.py REF.csv CUR.csv --out result.json [--rows N]

Both files are read whole with pandas.read_csv (only their first N rows with --rows), then
Report([DataDriftPreset()]).run(current_data=cur, reference_data=ref) runs as a user would call
it: column types inferred by Evidently (float -> numerical; int with <= 10 distinct values ->
categorical, more -> numerical), stat test and threshold chosen per column by Evidently
(reference <= 1000 rows: KS p-value for numerical, chi-square or z p-value for categorical /
<= 5 values; > 1000 rows: normed Wasserstein for numerical, Jensen-Shannon for categorical /
<= 5 values; threshold 0.05 for p-values, 0.1 for distances), dataset drift when at least half
of the columns drift.

The JSON written:
  rows, cols            rows of the reference (and of the current file), columns compared
  reference_rows, current_rows
  import_seconds        importing pandas, scipy and Evidently (Python's own start not counted)
  load_seconds          reading both CSVs
  seconds               Report.run alone (the drift computation, with the rendering it does)
  peak_rss_mb           the process's peak resident memory (after the run)
  peak_rss_mb_after_load
  dataset_drift         the preset's verdict (DriftedColumnsCount share >= drift_share 0.5)
  drifted_count, drifted_share, drift_share
  stattests             {stattest name: number of columns}
  columns               {name: {type, stattest, score, threshold, drifted}}, from the preset's
                        per-column ValueDrift results (metrics[i].config.{column,method,threshold}
                        and metrics[i].value in Snapshot.dict()); drifted is Evidently's rule for
                        the stattest (p-value tests: p <= t for KS, p < t for chi-square and z;
                        distances: score >= t), checked against the drift_detected of the
                        preset's own drift table where that can be read
  verdict_mismatches    columns where that check disagreed (expected empty)
  versions              evidently, pandas, numpy, scipy
"""

import argparse
import json
import os
import resource
import sys
import time

T_START = time.perf_counter()

def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # ru_maxrss is KiB on Linux


# Evidently 0.7's legacy stattests decide drift as below (evidently/legacy/calculations/stattests/).
P_VALUE_LE = {"K-S p_value"}
P_VALUE_LT = {"chi-square p_value", "Z-test p_value"}


def drifted(stattest, score, threshold):
    if stattest in P_VALUE_LE:
        return bool(score <= threshold)
    if stattest in P_VALUE_LT:
        return bool(score < threshold)
    return bool(score >= threshold)  # distances: Wasserstein (normed), Jensen-Shannon, PSI, ...


def legacy_drift_table(snapshot):
    """The preset's DataDriftTable per-column results ({column: ColumnDataDriftMetrics}), read from
    the snapshot's context (not public API: None when it is not there)."""
    try:
        for value in snapshot.context._legacy_metrics.values():
            result = value[0] if isinstance(value, tuple) else value
            by_column = getattr(result, "drift_by_columns", None)
            if by_column:
                return by_column
    except Exception:  # noqa: BLE001 - private structure; the check is optional
        return None
    return None


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("reference", help="reference CSV")
    p.add_argument("current", help="current CSV")
    p.add_argument("--out", required=True, help="JSON result file")
    p.add_argument("--rows", type=int, help="read only the first N rows of each file")
    a = p.parse_args(argv)
    if a.rows is not None and a.rows < 1:
        p.error("--rows must be positive")

    import numpy as np
    import pandas as pd
    import scipy
    import evidently
    from evidently import Report
    from evidently.presets import DataDriftPreset

    t0 = time.perf_counter()
    import_seconds = t0 - T_START
    ref = pd.read_csv(a.reference, nrows=a.rows)
    cur = pd.read_csv(a.current, nrows=a.rows)
    load_seconds = time.perf_counter() - t0
    rss_after_load = peak_rss_mb()
    if list(ref.columns) != list(cur.columns):
        sys.exit(f"evidently_drift: the files' columns differ: {list(ref.columns)[:5]}... vs {list(cur.columns)[:5]}...")

    t0 = time.perf_counter()
    snapshot = Report([DataDriftPreset()]).run(current_data=cur, reference_data=ref)
    seconds = time.perf_counter() - t0
    rss = peak_rss_mb()

    d = snapshot.dict()
    dd = snapshot.context.data_definition
    cat = set(dd.categorical_columns or [])
    columns, count = {}, None
    for m in d["metrics"]:
        cfg = m["config"]
        kind = cfg["type"].rsplit(":", 1)[-1]
        if kind == "ValueDrift":
            name, score, thr = cfg["column"], float(m["value"]), float(cfg["threshold"])
            columns[name] = {
                "type": "cat" if name in cat else "num",
                "stattest": cfg["method"],
                "score": score,
                "threshold": thr,
                "drifted": drifted(cfg["method"], score, thr),
            }
        elif kind == "DriftedColumnsCount":
            count = m
    columns = {c: columns[c] for c in ref.columns if c in columns}  # file order

    mismatches = []
    table = legacy_drift_table(snapshot)
    if table is not None:
        for name, r in columns.items():
            t = table.get(name)
            if t is None or bool(t.drift_detected) != r["drifted"] or t.stattest_name != r["stattest"]:
                mismatches.append(name)

    drift_share = float(count["config"].get("drift_share", 0.5)) if count else 0.5
    n_drifted = sum(r["drifted"] for r in columns.values())
    share = float(count["value"]["share"]) if count else n_drifted / max(len(columns), 1)
    stattests = {}
    for r in columns.values():
        stattests[r["stattest"]] = stattests.get(r["stattest"], 0) + 1

    out = {
        "rows": len(ref),
        "cols": len(columns),
        "reference_rows": len(ref),
        "current_rows": len(cur),
        "reference": os.path.abspath(a.reference),
        "current": os.path.abspath(a.current),
        "import_seconds": round(import_seconds, 3),
        "load_seconds": round(load_seconds, 3),
        "seconds": round(seconds, 3),
        "peak_rss_mb": round(rss, 1),
        "peak_rss_mb_after_load": round(rss_after_load, 1),
        "dataset_drift": bool(share >= drift_share),
        "drifted_count": int(round(float(count["value"]["count"]))) if count else n_drifted,
        "drifted_share": share,
        "drift_share": drift_share,
        "stattests": stattests,
        "columns": columns,
        "verdict_check": "drift table read" if table is not None else "drift table not readable",
        "verdict_mismatches": mismatches,
        "versions": {
            "evidently": evidently.__version__,
            "pandas": pd.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
    }
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)
    print(
        f"evidently_drift: {out['rows']} x {out['cols']}: load {load_seconds:.1f} s, drift {seconds:.1f} s, "
        f"peak RSS {rss:.0f} MB; {out['drifted_count']} columns drifted, dataset_drift={out['dataset_drift']}; "
        f"stattests {stattests}" + (f"; VERDICT MISMATCHES {mismatches}" if mismatches else ""),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
