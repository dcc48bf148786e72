"""Reference group-fairness metrics (fairlearn, and AIF360's signed convention) for glassbox's tests.

    .venv/bin/python tests/reference/fairness_ref.py --labels L.npy --preds Y.npy --groups G.npy \
        --positive C [--privileged g]

L.npy, Y.npy: [N] true and predicted class labels (int64); G.npy: [N] group of each sample (int64 or
strings). Everything is binary one-vs-rest for class C: y = (L == C), ŷ = (Y == C).
Prints one JSON object (full double precision; NaN/inf written as null):

  positive, n_samples, versions {fairlearn, sklearn, numpy}
  groups        the group values in fairlearn's order (MetricFrame.by_group index), as JSON ints/strings
  by_group      {"<group>": {selection_rate, true_positive_rate, false_positive_rate, accuracy, count}}
  overall       the same five on all samples
  difference    MetricFrame.difference(method='between_groups') of each metric (max − min over groups)
  ratio         MetricFrame.ratio(method='between_groups') of each metric (min / max)
  demographic_parity_difference, demographic_parity_ratio           fairlearn functions
  equalized_odds_difference                                          agg='worst_case'
  equal_opportunity_difference                                       fairlearn function (0.15 has it)
  false_positive_rate_difference                                     fairlearn function (= difference.false_positive_rate)
  aif360        only with --privileged: {privileged, unprivileged: [groups pooled], and for each side
                selection_rate / true_positive_rate / false_positive_rate, then the signed values
                statistical_parity_difference, disparate_impact, equal_opportunity_difference,
                average_odds_difference, false_positive_rate_difference}
  notes         warnings and caught errors

fairlearn details (0.15.0): true/false_positive_rate come from sklearn's confusion_matrix with
normalize='true', which turns a 0/0 row into 0 — a group without positives gets TPR = 0, a group
without negatives FPR = 0 (not NaN), and those zeros take part in the max − min. selection_rate is
the mean of ŷ == 1. The "between_groups" difference is max − min over the groups (always >= 0) and
the ratio is min / max.

AIF360 convention (computed by hand here; AIF360 itself is not installed): a ClassificationMetric
with privileged_groups=[{g: p}] and unprivileged_groups=[{g: u} for every other value u] selects the
unprivileged samples as the UNION of those conditions, i.e. it POOLS all non-privileged samples into
one group. With two groups this is exactly AIF360's one-privileged/one-unprivileged setting; with more
groups this script likewise pools every non-privileged sample (the "pooled" key says so). Values are
signed unprivileged − privileged:
  statistical_parity_difference = sel_u − sel_p;  disparate_impact = sel_u / sel_p;
  equal_opportunity_difference = TPR_u − TPR_p;  false_positive_rate_difference = FPR_u − FPR_p;
  average_odds_difference = ½[(FPR_u − FPR_p) + (TPR_u − TPR_p)].
Here an undefined rate (0/0) is NaN (AIF360 divides without a guard) and is written as null.
"""
import argparse
import json

import fairlearn
import numpy as np
import sklearn
from fairlearn.metrics import (MetricFrame, count, demographic_parity_difference, demographic_parity_ratio,
                               equal_opportunity_difference, equalized_odds_difference,
                               false_positive_rate_difference, false_positive_rate, selection_rate,
                               true_positive_rate)
from sklearn.metrics import accuracy_score

from ref_common import call, clean



def load(path):
    try:
        return np.load(path)
    except ValueError:  # an object array (e.g. strings saved from a list of str) needs pickle
        return np.load(path, allow_pickle=True)



def as_metric(name, value):
    return int(value) if name == "count" else clean(value)  # pandas stores the counts as floats


def rate(num, den):
    return float(num) / float(den) if den > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--labels", required=True)
    ap.add_argument("--preds", required=True)
    ap.add_argument("--groups", required=True)
    ap.add_argument("--positive", required=True, help="the class treated as positive (one-vs-rest)")
    ap.add_argument("--privileged", help="the privileged group value (enables the AIF360 block)")
    a = ap.parse_args()
    labels = load(a.labels).reshape(-1)
    preds = load(a.preds).reshape(-1)
    groups = load(a.groups).reshape(-1)
    assert labels.shape == preds.shape == groups.shape, "labels, preds and groups must have the same length"
    positive = int(a.positive) if np.issubdtype(labels.dtype, np.integer) else a.positive
    y = (labels == positive).astype(np.int64)
    yhat = (preds == positive).astype(np.int64)
    if groups.dtype.kind in "OUS":
        groups = groups.astype(str)
    notes = []

    metrics = {"selection_rate": selection_rate, "true_positive_rate": true_positive_rate,
               "false_positive_rate": false_positive_rate, "accuracy": accuracy_score, "count": count}
    mf = call(notes, "MetricFrame", lambda: MetricFrame(metrics=metrics, y_true=y, y_pred=yhat, sensitive_features=groups))
    by_group = mf.by_group
    out = {"positive": positive, "n_samples": int(y.shape[0]),
           "versions": {"fairlearn": fairlearn.__version__, "sklearn": sklearn.__version__, "numpy": np.__version__},
           "groups": [clean(g) for g in by_group.index.tolist()],
           "by_group": {str(g): {m: as_metric(m, by_group.loc[g, m]) for m in metrics} for g in by_group.index},
           "overall": {m: as_metric(m, mf.overall[m]) for m in metrics},
           "difference": {m: clean(v) for m, v in mf.difference(method="between_groups").items() if m != "count"},
           "ratio": {m: clean(v) for m, v in mf.ratio(method="between_groups").items() if m != "count"}}
    kw = {"sensitive_features": groups}
    out["demographic_parity_difference"] = call(notes, "demographic_parity_difference",
                                                lambda: demographic_parity_difference(y, yhat, **kw))
    out["demographic_parity_ratio"] = call(notes, "demographic_parity_ratio", lambda: demographic_parity_ratio(y, yhat, **kw))
    out["equalized_odds_difference"] = call(notes, "equalized_odds_difference",
                                            lambda: equalized_odds_difference(y, yhat, agg="worst_case", **kw))
    out["equal_opportunity_difference"] = call(notes, "equal_opportunity_difference",
                                               lambda: equal_opportunity_difference(y, yhat, **kw))
    out["false_positive_rate_difference"] = call(notes, "false_positive_rate_difference",
                                                 lambda: false_positive_rate_difference(y, yhat, **kw))

    if a.privileged is not None:
        gvals = [str(g) for g in groups]
        priv = np.array([g == a.privileged for g in gvals])
        assert priv.any(), f"no sample is in the privileged group {a.privileged!r}"
        unpriv = ~priv  # AIF360 with unprivileged_groups = every other value: the union, pooled

        def side(mask):
            yy, pp = y[mask], yhat[mask]
            return {"count": int(mask.sum()),
                    "selection_rate": rate(pp.sum(), mask.sum()),
                    "true_positive_rate": rate(((pp == 1) & (yy == 1)).sum(), (yy == 1).sum()),
                    "false_positive_rate": rate(((pp == 1) & (yy == 0)).sum(), (yy == 0).sum())}

        p, u = side(priv), side(unpriv)
        others = sorted({g for g, m in zip(gvals, unpriv) if m})
        out["aif360"] = {
            "privileged": a.privileged, "unprivileged": others, "pooled": len(others) > 1,
            "privileged_rates": p, "unprivileged_rates": u,
            "statistical_parity_difference": u["selection_rate"] - p["selection_rate"],
            "disparate_impact": (u["selection_rate"] / p["selection_rate"]) if p["selection_rate"] > 0 else float("nan"),
            "equal_opportunity_difference": u["true_positive_rate"] - p["true_positive_rate"],
            "false_positive_rate_difference": u["false_positive_rate"] - p["false_positive_rate"],
            "average_odds_difference": 0.5 * ((u["false_positive_rate"] - p["false_positive_rate"])
                                              + (u["true_positive_rate"] - p["true_positive_rate"])),
        }
    out["notes"] = notes
    print(json.dumps(clean(out)))


if __name__ == "__main__":
    main()
