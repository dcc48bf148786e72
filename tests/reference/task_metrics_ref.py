"""scikit-learn's regression and multi-label metrics: the reference for glassbox's (metrics/task_metrics_test.cpp).

  task_metrics_ref.py regression Y_TRUE.npy Y_PRED.npy [...]    # float64 [N] or [N, K], pairs of files
  task_metrics_ref.py multilabel TARGETS.npy SCORES.npy [...]   # targets int64 0/1 [N, L], scores float64 [N, L]

Prints a JSON list, one object per pair (null for an undefined value, with the error in notes):
regression: mae, mse, rmse, r2, explained_variance, median_absolute_error, mape, max_error (single output),
and per_output {same keys: [K]}; multilabel (predicted = score >= 0.5): per_label {precision, recall, f1,
support, average_precision, roc_auc}, micro/macro/weighted/samples {precision, recall, f1},
subset_accuracy, hamming_loss, average_precision {macro, micro, weighted}, roc_auc {macro, micro}.
"""
import json
import sys

import numpy as np
import sklearn
from sklearn import metrics as skm

from ref_common import call, clean


def regression(y, p):
    notes = []
    out = {"notes": notes}
    for key, fn in [("mae", skm.mean_absolute_error), ("mse", skm.mean_squared_error),
                    ("rmse", skm.root_mean_squared_error), ("r2", skm.r2_score),
                    ("explained_variance", skm.explained_variance_score),
                    ("median_absolute_error", skm.median_absolute_error),
                    ("mape", skm.mean_absolute_percentage_error)]:
        out[key] = call(notes, key, lambda fn=fn: fn(y, p))
    out["max_error"] = call(notes, "max_error", lambda: skm.max_error(y, p)) if y.ndim == 1 else None
    if y.ndim == 2:
        out["per_output"] = {}
        for key, fn in [("mae", skm.mean_absolute_error), ("mse", skm.mean_squared_error),
                        ("rmse", skm.root_mean_squared_error), ("r2", skm.r2_score),
                        ("explained_variance", skm.explained_variance_score),
                        ("median_absolute_error", skm.median_absolute_error),
                        ("mape", skm.mean_absolute_percentage_error)]:
            out["per_output"][key] = call(notes, key, lambda fn=fn: fn(y, p, multioutput="raw_values"))
    return out


def multilabel(t, s):
    notes = []
    pred = (s >= 0.5).astype(np.int64)
    out = {"notes": notes}
    p, r, f, sup = skm.precision_recall_fscore_support(t, pred, average=None, zero_division=0)
    out["per_label"] = {"precision": p, "recall": r, "f1": f, "support": sup,
                        "average_precision": call(notes, "ap", lambda: skm.average_precision_score(t, s, average=None)),
                        "roc_auc": [call(notes, f"auc{l}", lambda l=l: skm.roc_auc_score(t[:, l], s[:, l]))
                                    for l in range(t.shape[1])]}
    for avg in ["micro", "macro", "weighted", "samples"]:
        a, b, c, _ = skm.precision_recall_fscore_support(t, pred, average=avg, zero_division=0)
        out[avg] = {"precision": a, "recall": b, "f1": c}
    out["subset_accuracy"] = skm.accuracy_score(t, pred)
    out["hamming_loss"] = skm.hamming_loss(t, pred)
    out["average_precision"] = {avg: call(notes, f"ap_{avg}", lambda avg=avg: skm.average_precision_score(t, s, average=avg))
                                for avg in ["macro", "micro", "weighted"]}
    out["roc_auc"] = {avg: call(notes, f"auc_{avg}", lambda avg=avg: skm.roc_auc_score(t, s, average=avg))
                      for avg in ["macro", "micro"]}
    return out


def main():
    out = []
    for i in range(2, len(sys.argv), 2):
        a, b = np.load(sys.argv[i]), np.load(sys.argv[i + 1])
        res = regression(a, b) if sys.argv[1] == "regression" else multilabel(a, b)
        res["sklearn"] = sklearn.__version__
        out.append(res)
    print(json.dumps(clean(out)))


if __name__ == "__main__":
    main()
