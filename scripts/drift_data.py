#!/usr/bin/env python3
"""Writes a reference CSV and a current CSV for a per-column data drift comparison.

Both files have ROWS rows of COLS numeric columns named f0..f{COLS-1}. Every column has its own
distribution, drawn once from the seed, cycling through ten kinds (column index mod 10):

  0-3  normal          N(mu, sigma)
  4-5  lognormal       exp(N(m, s)), right-skewed, positive
  6-7  uniform         U(lo, hi)
  8    int-categorical integers 0..K-1 with K in 4..10: a rounded, clipped normal. pandas reads it
                       as int64 and Evidently 0.7 types an int column with <= 10 distinct values
                       as categorical (Jensen-Shannon above 1000 rows, chi-square or z at or below)
  9    int-numerical   integers 0..K-1 with K in 12..20, the same way: Evidently types it numerical
                       (normed Wasserstein above 1000 rows, KS at or below)

The current file draws from the same distributions except the columns named by --shift and
--scale:
  --shift COLS:D  adds D reference standard deviations to the column (the distribution's own
                  std; for the integer kinds D is added, in units of the latent normal's std,
                  before rounding and clipping, so the mean moves by about D std)
  --scale COLS:F  multiplies the column's spread around its mean by F (for the integer kinds,
                  the latent normal's)
COLS is a comma-separated list of column indices and ranges: 0,5,17 or 10-19 or 0,40-44.
Both options repeat; a column named twice takes both, shift after scale.

Rows are generated and written in chunks (--chunk), so 1 000 000 x 100 runs in bounded memory
(about chunk x cols x 8 bytes x 3). Reference and current use independent streams of the seed,
so the reference file does not depend on --shift/--scale or on the current file's row count.

  scripts/drift_data.py --rows 100000 --out-dir runs/drift/100k --shift 0,5,17:0.3 --scale 3:1.5
  -> runs/drift/100k/reference.csv, runs/drift/100k/current.csv, runs/drift/100k/columns.json

columns.json records each column's kind, parameters and shift/scale (the ground truth).
Only numpy is needed, so .venv or .venv-evidently runs it.
"""

import argparse
import json
import os
import sys

import numpy as np

KINDS = ["normal"] * 4 + ["lognormal"] * 2 + ["uniform"] * 2 + ["int-categorical", "int-numerical"]


def parse_cols(spec, ncols):
    cols = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            lo, hi = int(a), int(b)
            if hi < lo:
                raise ValueError(f"empty range {part!r}")
            cols.update(range(lo, hi + 1))
        else:
            cols.add(int(part))
    bad = sorted(c for c in cols if not 0 <= c < ncols)
    if bad:
        raise ValueError(f"column index out of range 0..{ncols - 1}: {bad}")
    return sorted(cols)


def parse_changes(specs, ncols, what):
    out = {}
    for spec in specs or []:
        if ":" not in spec:
            raise ValueError(f"--{what} {spec!r}: expected COLS:VALUE, e.g. 0,5,17:0.3")
        cols, value = spec.rsplit(":", 1)
        v = float(value)
        for c in parse_cols(cols, ncols):
            out[c] = out.get(c, 1.0 if what == "scale" else 0.0)
            out[c] = out[c] * v if what == "scale" else out[c] + v
    return out


def column_specs(ncols, seed):
    """Each column's distribution, from its own stream of the seed."""
    specs = []
    for c in range(ncols):
        rng = np.random.default_rng([seed, 0, c])
        kind = KINDS[c % len(KINDS)]
        if kind == "normal":
            mu, sigma = float(rng.uniform(-10, 10)), float(rng.uniform(0.5, 5))
            spec = {"kind": kind, "mu": mu, "sigma": sigma, "mean": mu, "std": sigma}
        elif kind == "lognormal":
            m, s = float(rng.uniform(-1, 2)), float(rng.uniform(0.25, 1.0))
            mean = float(np.exp(m + s * s / 2))
            std = float(np.sqrt((np.exp(s * s) - 1) * np.exp(2 * m + s * s)))
            spec = {"kind": kind, "m": m, "s": s, "mean": mean, "std": std}
        elif kind == "uniform":
            lo = float(rng.uniform(-5, 5))
            hi = lo + float(rng.uniform(1, 10))
            spec = {"kind": kind, "lo": lo, "hi": hi, "mean": (lo + hi) / 2, "std": (hi - lo) / np.sqrt(12)}
        else:
            k = int(rng.integers(4, 11)) if kind == "int-categorical" else int(rng.integers(12, 21))
            # latent N(center, width), rounded and clipped to 0..k-1
            spec = {"kind": kind, "levels": k, "center": (k - 1) / 2 + float(rng.uniform(-0.5, 0.5)), "width": k / 5}
        specs.append(spec)
    return specs


def generate(specs, n, rng, shift, scale):
    """n rows of every column (float64), with the current file's changes applied."""
    out = np.empty((n, len(specs)))
    for c, sp in enumerate(specs):
        kind = sp["kind"]
        d, f = shift.get(c, 0.0), scale.get(c, 1.0)
        if kind == "normal":
            x = rng.normal(sp["mu"], sp["sigma"], n)
        elif kind == "lognormal":
            x = np.exp(rng.normal(sp["m"], sp["s"], n))
        elif kind == "uniform":
            x = rng.uniform(sp["lo"], sp["hi"], n)
        else:
            z = rng.standard_normal(n) * f + d
            x = np.clip(np.rint(sp["center"] + sp["width"] * z), 0, sp["levels"] - 1)
            out[:, c] = x
            continue
        if f != 1.0:
            x = sp["mean"] + f * (x - sp["mean"])
        if d != 0.0:
            x = x + d * sp["std"]
        out[:, c] = x
    return out


def write_csv(path, specs, nrows, rng, shift, scale, chunk):
    ncols = len(specs)
    row_fmt = ",".join("%d" if sp["kind"].startswith("int") else "%.6g" for sp in specs) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w", buffering=1 << 20) as f:
        f.write(",".join(f"f{c}" for c in range(ncols)) + "\n")
        done = 0
        while done < nrows:
            n = min(chunk, nrows - done)
            block = generate(specs, n, rng, shift, scale)
            f.write("".join(row_fmt % tuple(r) for r in block.tolist()))
            done += n
    os.replace(tmp, path)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, required=True, help="rows in the reference file (and the current one)")
    p.add_argument("--current-rows", type=int, help="rows in the current file (default: --rows)")
    p.add_argument("--cols", type=int, default=100, help="numeric columns (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--shift", action="append", metavar="COLS:D", help="mean shift of D reference stds")
    p.add_argument("--scale", action="append", metavar="COLS:F", help="spread times F around the mean")
    p.add_argument("--out-dir", required=True, help="writes reference.csv, current.csv, columns.json here")
    p.add_argument("--chunk", type=int, default=20000, help="rows generated at a time (default 20000)")
    a = p.parse_args(argv)
    if a.rows < 1 or a.cols < 1 or a.chunk < 1 or (a.current_rows is not None and a.current_rows < 1):
        p.error("--rows, --current-rows, --cols and --chunk must be positive")
    try:
        shift = parse_changes(a.shift, a.cols, "shift")
        scale = parse_changes(a.scale, a.cols, "scale")
    except ValueError as e:
        p.error(str(e))

    specs = column_specs(a.cols, a.seed)
    os.makedirs(a.out_dir, exist_ok=True)
    cur_rows = a.current_rows if a.current_rows is not None else a.rows
    write_csv(os.path.join(a.out_dir, "reference.csv"), specs, a.rows, np.random.default_rng([a.seed, 1]), {}, {}, a.chunk)
    write_csv(os.path.join(a.out_dir, "current.csv"), specs, cur_rows, np.random.default_rng([a.seed, 2]), shift, scale, a.chunk)
    meta = {
        "seed": a.seed,
        "reference_rows": a.rows,
        "current_rows": cur_rows,
        "columns": {
            f"f{c}": dict(sp, shift=shift.get(c, 0.0), scale=scale.get(c, 1.0), changed=c in shift or c in scale)
            for c, sp in enumerate(specs)
        },
    }
    with open(os.path.join(a.out_dir, "columns.json"), "w") as f:
        json.dump(meta, f, indent=1)
    changed = sorted(set(shift) | set(scale))
    print(f"drift_data: {a.rows} reference and {cur_rows} current rows x {a.cols} columns in {a.out_dir}; "
          f"changed columns: {','.join(map(str, changed)) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main()
