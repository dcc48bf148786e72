"""Reference classification metrics (scikit-learn, torchmetrics) for glassbox's metrics tests.

    .venv/bin/python tests/reference/metrics_ref.py --labels L.npy --probs P.npy --num-classes K

L.npy: int64 [N] true labels in [0, K); P.npy: float64 [N, K] rows of class probabilities (ties allowed).
Prints one JSON object (Python floats at full double precision; NaN is written as null):

  n_samples, num_classes, versions {sklearn, torchmetrics, torch, numpy}
  y_pred                 [N]     argmax of P (numpy: the first maximum wins a tie)
  confusion_matrix       [K][K]  rows = true class, columns = predicted class (labels=range(K))
  accuracy
  per_class              {precision, recall, f1, support}: [K] each (zero_division=0)
  micro, macro, weighted {precision, recall, f1}
  undefined_precision    classes never predicted (TP+FP = 0: precision is set to 0)
  undefined_recall       classes absent from the labels (TP+FN = 0: recall is set to 0)
  undefined_f1           classes with TP+FP+FN = 0 (F1 set to 0); a class absent from the labels
                         but predicted has F1 = 0 by its definition 2TP/(2TP+FP+FN), not by zero_division
  top_k_accuracy         {"1": .., "2": .., ...} for k in 1..min(5, K-1)
  top_k_argmax_ties      {"1": ..} top-1 accuracy with numpy's argmax tie rule (= accuracy), to show
                         where sklearn's tie rule differs
  average_precision      {per_class: [K] (null where undefined), macro}
  roc_auc                {per_class: [K] (null where undefined), macro_ovr}
  pr_curve               {"c": {precision, recall, thresholds}} for every class c (one-vs-rest)
  roc_curve              {"c": {fpr, tpr, thresholds}} for every class c (drop_intermediate=False)
  class_weight           {classes: present classes, weights: [..], all_classes: weights for range(K)
                         or null, all_classes_error: the error text}
  ece_torchmetrics       torchmetrics multiclass_calibration_error(n_bins=15, norm='l1')
  ece_float64            the same algorithm re-done in float64 numpy
  notes                  [strings]: every warning and caught error, by metric

What scikit-learn 1.9.1 does in the edge cases (observed, not assumed):
  - class never predicted: precision = 0 (zero_division=0, no warning); recall and F1 as usual.
  - class absent from the labels (no positives):
      precision_recall_fscore_support: recall = 0 (zero_division), support = 0, and the class still
        counts in the macro mean (labels=range(K)) and with weight 0 in the weighted mean;
      average_precision_score(y == c, P[:, c]): warns "No positive class found in y_true, recall is set
        to one for all thresholds" and returns 0.0 (recall is 1 at every threshold, so the sum
        Σ (R_n − R_{n−1}) P_n is 0); the macro AP over label_binarize(y) INCLUDES that 0 (mean over K);
      roc_auc_score(y == c, P[:, c]): warns "Only one class is present in y_true. ROC AUC score is not
        defined in that case." and returns nan (older versions raised ValueError); the macro of
        roc_auc_score(y, P, multi_class='ovr', labels=range(K)) is then nan as well (an unweighted
        mean with a nan in it); without labels= it raises ValueError ("Number of classes in y_true
        not equal to the number of columns in 'y_score'"). This script writes nan as null.
      compute_class_weight('balanced', classes=range(K), y) raises ValueError ("classes should have
        valid labels that are in y"); with the present classes only it returns
        n_samples / (n_present · count_c): n_classes is the number of classes passed, not K.
  - tied scores: AP / PR / ROC curves treat tied scores as one threshold (one step); top_k_accuracy_score
    ranks with np.argsort(y_score, kind="mergesort")[:, ::-1], i.e. a stable ascending sort reversed,
    so among tied scores the class with the LARGER index ranks first (numpy argmax picks the smaller
    index); top-1 accuracy from sklearn can therefore differ from `accuracy` when the maximum is tied.
  - K = 2: top_k_accuracy_score and roc_auc_score treat the labels as binary and reject a 2-column
    score, so P[:, 1] is passed; top-1 then predicts class 1 iff P[:, 1] > 0.5 (a tie at 0.5 goes to
    class 0, as argmax). label_binarize gives one column for K = 2, so the one-hot matrix is used
    for the macro AP.

torchmetrics 1.9.0 ECE: casts the confidences (max probability) and accuracies to float32
(`confidences.float()`) and builds the boundaries with torch.linspace(0, 1, n_bins + 1) in float32;
bins come from torch.bucketize(conf, boundaries, right=True) - 1, so bin b is [b/15, (b+1)/15)
(left-closed) and a confidence of exactly 1.0 falls into an extra 16th bin of its own (the bin
arrays have n_bins + 1 entries); ECE = Σ_b (n_b / N) |acc_b − conf_b| over non-empty bins. The
predicted class is torch's max(dim=1) index (the first maximum on CPU). Inputs outside [0, 1] would
be softmaxed first (probabilities are not). ece_float64 repeats exactly that in float64.
"""
import argparse
import json

import numpy as np
import sklearn
import torch
import torchmetrics
from sklearn.metrics import (accuracy_score, average_precision_score, confusion_matrix, precision_recall_curve,
                             precision_recall_fscore_support, roc_auc_score, roc_curve, top_k_accuracy_score)
from sklearn.preprocessing import label_binarize
from sklearn.utils.class_weight import compute_class_weight
from torchmetrics.functional.classification import multiclass_calibration_error

from ref_common import call, clean




def ece_float64(probs, labels, n_bins=15):
    """torchmetrics' binning (right-bucketized linspace boundaries, extra bin for 1.0) in float64."""
    conf = probs.max(axis=1)
    pred = probs.argmax(axis=1)
    acc = (pred == labels).astype(np.float64)
    bounds = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.searchsorted(bounds, conf, side="right") - 1  # = torch.bucketize(right=True) - 1
    count = np.bincount(idx, minlength=n_bins + 1).astype(np.float64)
    conf_sum = np.bincount(idx, weights=conf, minlength=n_bins + 1)
    acc_sum = np.bincount(idx, weights=acc, minlength=n_bins + 1)
    nz = count > 0
    return float(np.sum(np.abs(acc_sum[nz] / count[nz] - conf_sum[nz] / count[nz]) * (count[nz] / count.sum())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--labels", required=True)
    ap.add_argument("--probs", required=True)
    ap.add_argument("--num-classes", type=int, required=True)
    a = ap.parse_args()
    y = np.load(a.labels).astype(np.int64).reshape(-1)
    p = np.load(a.probs).astype(np.float64)
    k = a.num_classes
    assert p.ndim == 2 and p.shape == (y.shape[0], k), f"probs must be [N, {k}], got {p.shape}"
    assert y.min() >= 0 and y.max() < k, "labels must lie in [0, K)"
    classes = list(range(k))
    notes = []
    out = {"n_samples": int(y.shape[0]), "num_classes": k,
           "versions": {"sklearn": sklearn.__version__, "torchmetrics": torchmetrics.__version__,
                        "torch": torch.__version__, "numpy": np.__version__}}

    y_pred = p.argmax(axis=1)
    out["y_pred"] = y_pred
    out["confusion_matrix"] = confusion_matrix(y, y_pred, labels=classes)
    out["accuracy"] = accuracy_score(y, y_pred)
    pr, rc, f1, sup = precision_recall_fscore_support(y, y_pred, labels=classes, zero_division=0, average=None)
    out["per_class"] = {"precision": pr, "recall": rc, "f1": f1, "support": sup}
    for avg in ("micro", "macro", "weighted"):
        pa, ra, fa, _ = precision_recall_fscore_support(y, y_pred, labels=classes, zero_division=0, average=avg)
        out[avg] = {"precision": pa, "recall": ra, "f1": fa}
    cm = out["confusion_matrix"]
    tp = np.diag(cm)
    out["undefined_precision"] = [c for c in classes if cm[:, c].sum() == 0]
    out["undefined_recall"] = [c for c in classes if cm[c, :].sum() == 0]
    out["undefined_f1"] = [c for c in classes if 2 * tp[c] + (cm[:, c].sum() - tp[c]) + (cm[c, :].sum() - tp[c]) == 0]

    # top-k: sklearn sorts with np.argsort(kind="mergesort")[:, ::-1]; among tied scores the LARGER
    # class index ranks first (the reverse of numpy argmax's first-maximum rule).
    topk = {}
    score_for_topk = p[:, 1] if k == 2 else p  # sklearn treats K = 2 as binary and wants a 1-D score
    for kk in range(1, min(5, k - 1) + 1):
        topk[str(kk)] = call(notes, f"top_k_accuracy(k={kk})",
                             lambda kk=kk: top_k_accuracy_score(y, score_for_topk, k=kk, labels=classes))
    out["top_k_accuracy"] = topk
    out["top_k_argmax_ties"] = {"1": float(np.mean(y_pred == y))}

    # average precision and ROC AUC, one-vs-rest
    ap_pc, auc_pc = [], []
    pr_curves, roc_curves = {}, {}
    for c in classes:
        yc = (y == c).astype(np.int64)
        ap_pc.append(call(notes, f"average_precision[class {c}]", lambda: average_precision_score(yc, p[:, c])))
        auc_pc.append(call(notes, f"roc_auc[class {c}]", lambda: roc_auc_score(yc, p[:, c])))
        curve = call(notes, f"precision_recall_curve[class {c}]", lambda: precision_recall_curve(yc, p[:, c]))
        if curve is not None:
            pr_curves[str(c)] = {"precision": curve[0], "recall": curve[1], "thresholds": curve[2]}
        curve = call(notes, f"roc_curve[class {c}]", lambda: roc_curve(yc, p[:, c], drop_intermediate=False))
        if curve is not None:
            roc_curves[str(c)] = {"fpr": curve[0], "tpr": curve[1], "thresholds": curve[2]}
    onehot = label_binarize(y, classes=classes) if k > 2 else np.eye(k, dtype=np.int64)[y]
    ap_macro = call(notes, "average_precision[macro]", lambda: average_precision_score(onehot, p, average="macro"))
    if k == 2:
        auc_macro = call(notes, "roc_auc[macro_ovr]", lambda: roc_auc_score(y, p[:, 1]))
    else:
        auc_macro = call(notes, "roc_auc[macro_ovr]",
                         lambda: roc_auc_score(y, p, multi_class="ovr", average="macro", labels=classes))
    out["average_precision"] = {"per_class": ap_pc, "macro": ap_macro}
    out["roc_auc"] = {"per_class": auc_pc, "macro_ovr": auc_macro}
    out["pr_curve"] = pr_curves
    out["roc_curve"] = roc_curves

    present = np.unique(y)
    w_present = compute_class_weight("balanced", classes=present, y=y)
    w_all = None
    err = None
    try:
        w_all = compute_class_weight("balanced", classes=np.arange(k), y=y)
    except ValueError as e:
        err = f"ValueError: {e}"
        notes.append(f"class_weight[range(K)]: error {err}")
    out["class_weight"] = {"classes": present, "weights": w_present, "all_classes": w_all, "all_classes_error": err}

    # torchmetrics casts confidences to float32 internally (see the docstring).
    out["ece_torchmetrics"] = float(multiclass_calibration_error(torch.tensor(p), torch.tensor(y), num_classes=k,
                                                                 n_bins=15, norm="l1").double())
    out["ece_float64"] = ece_float64(p, y)
    tm_pred = torch.tensor(p).max(dim=1).indices.numpy()
    if not np.array_equal(tm_pred, y_pred):
        notes.append("ece: torch max(dim=1) picked a different index than numpy argmax on a tie")
    out["notes"] = notes
    print(json.dumps(clean(out)))


if __name__ == "__main__":
    main()
