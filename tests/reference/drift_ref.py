"""Drift statistics as scipy computes them, on seeded data sets (ties and tiny samples included).

    drift_ref.py

Prints one JSON object: "samples" (pairs of 1-d samples with scipy.stats.ks_2samp's statistic
and p-value, method="auto": exact up to 10 000 values a side; wasserstein_distance; and the Wasserstein distance over the
first sample's population standard deviation, at least 0.001, as Evidently's "wasserstein"
test), "tables" (contingency tables with chi2_contingency's statistic, p-value and degrees of
freedom, default correction), "distributions" (pairs with jensenshannon's distance) and
"kolmogorov" (scipy.stats.kstwo.sf at (n, x) pairs).
"""
import json

import numpy as np
from scipy import stats
from scipy.spatial import distance


def samples():
    rng = np.random.default_rng(11)
    return {
        "normal_shifted": (rng.normal(0, 1, 50), rng.normal(0.4, 1.2, 60)),
        "equal_sizes": (rng.normal(0, 1, 40), rng.normal(0.2, 1, 40)),
        "ties": (rng.integers(0, 6, 30).astype(float), rng.integers(1, 7, 45).astype(float)),
        "tiny": (np.array([0.3]), np.array([0.1, 0.5, 0.9])),
        "tiny_equal": (np.array([1.0, 2.0]), np.array([1.5, 3.0])),
        "identical": (np.array([1.0, 2.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0, 2.0])),
        "separated": (rng.uniform(0, 1, 25), rng.uniform(2, 3, 35)),
        "large_coprime": (rng.normal(0, 1, 997), rng.normal(0.05, 1, 1200)),
        "window_vs_reference": (rng.gamma(2.0, 1.0, 3000), rng.gamma(2.2, 1.0, 1000)),
        "constant_reference": (np.full(20, 5.0), rng.normal(5, 0.1, 30)),
        # Beyond 10 000 values a side: the asymptotic p-value (method="auto")
        "asymp_shifted": (rng.normal(0, 1, 12000), rng.normal(0.03, 1, 15000)),
        "asymp_small_window": (rng.normal(0, 1, 30), rng.normal(0.5, 1, 12000)),
        "asymp_same": (rng.normal(0, 1, 11000), rng.normal(0, 1, 11000)),
    }


# (n, x) covering each way scipy.stats.kstwo.sf computes: Ruben-Gambino's two ends, twice the
# Smirnov tail, the Durbin matrix, Pomeranz's recursion (n <= 140), Pelz-Good, and the zero tail.
KOLMOGOROV = [(10, 0.04), (10, 0.08), (10, 0.95), (10, 0.6), (100, 0.05), (100, 0.15), (100, 0.3), (140, 0.1),
              (1000, 0.02), (1000, 0.01), (1000, 0.05), (5000, 0.015), (5000, 0.004), (50000, 0.0075),
              (200000, 0.002), (200000, 0.1), (20000, 0.005), (1, 0.7), (2, 0.3), (150, 0.0443), (400, 0.02)]


def tables():
    return {
        "two_by_two_yates": [[12, 5], [7, 15]],
        "two_by_two_small": [[1, 3], [4, 2]],
        "class_mix": [[300, 250, 200, 150, 100], [90, 60, 50, 45, 55]],
        "three_by_four": [[10, 20, 30, 5], [15, 15, 25, 10], [8, 30, 12, 20]],
        "no_difference": [[10, 20, 30], [20, 40, 60]],
        "one_row": [[4, 5, 6]],
        "fractional": [[0.5, 1.5, 2.0], [3.25, 0.75, 1.0]],
    }


def distributions():
    return {
        "close": ([0.2, 0.3, 0.5], [0.25, 0.25, 0.5]),
        "disjoint": ([1, 0, 0], [0, 0, 1]),
        "with_zero": ([0.0, 0.4, 0.6], [0.1, 0.4, 0.5]),
        "counts": ([300, 250, 200, 150, 100], [90, 60, 50, 45, 55]),
        "equal": ([1, 2, 3], [2, 4, 6]),
        "uniform_vs_peaked": ([1, 1, 1, 1], [0.97, 0.01, 0.01, 0.01]),
    }


def main():
    out = {"samples": {}, "tables": {}, "distributions": {}}
    for name, (a, b) in samples().items():
        ks = stats.ks_2samp(a, b, method="auto")
        wd = stats.wasserstein_distance(a, b)
        out["samples"][name] = {
            "a": a.tolist(),
            "b": b.tolist(),
            "ks_statistic": float(ks.statistic),
            "ks_pvalue": float(ks.pvalue),
            "ks_method": "asymp" if max(len(a), len(b)) > 10000 else "exact",
            "wasserstein": float(wd),
            "wasserstein_normed": float(wd / max(np.std(a), 0.001)),
        }
    for name, t in tables().items():
        r = stats.chi2_contingency(np.array(t, dtype=float))
        out["tables"][name] = {"table": t, "statistic": float(r.statistic), "pvalue": float(r.pvalue), "dof": int(r.dof)}
    for name, (p, q) in distributions().items():
        out["distributions"][name] = {"p": p, "q": q, "distance": float(distance.jensenshannon(p, q))}
    out["kolmogorov"] = [{"n": n, "x": x, "sf": float(stats.kstwo.sf(x, n))} for n, x in KOLMOGOROV]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
