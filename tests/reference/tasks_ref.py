"""Regression and multi-label runs checked from outside glassbox.

    tasks_ref.py data --out DIR        writes DIR/reg/{train,test}.csv (two targets, linear with noise)
                                       and DIR/multi/{train,test}_{x,y}.npy (three 0/1 labels)
    tasks_ref.py check --eval DIR --task regression|multilabel --model model.pt --onnx model.onnx
                       --contract model.json --inputs FILE
        reads glassbox eval's predictions.csv and metrics.json, recomputes the metrics with
        scikit-learn from the predictions, and runs the exported files (TorchScript in torch,
        ONNX in onnxruntime) on the raw inputs with the contract's preprocessing. Prints JSON:
        scikit-learn's metrics, glassbox's, and the largest differences.
"""
import argparse
import json
import os

import numpy as np
import onnxruntime as ort
import torch
from sklearn import metrics as skm

from ref_common import clean


def make_data(out):
    rng = np.random.default_rng(7)
    os.makedirs(os.path.join(out, "reg"), exist_ok=True)
    os.makedirs(os.path.join(out, "multi"), exist_ok=True)
    # Both targets vary by a few units (comparable scales: one MSE serves both).
    w = np.array([[1.0, 0.5], [-0.5, 0.4], [0.8, -0.3], [0.3, 0.6], [-1.0, 0.2]])
    for name, n in (("train", 600), ("test", 200)):
        x = rng.normal(size=(n, 5)) * [1, 2, 0.5, 3, 1] + [0, 1, -2, 5, 0]
        y = x @ w + rng.normal(scale=0.1, size=(n, 2)) + [10, -3]
        with open(os.path.join(out, "reg", name + ".csv"), "w") as f:
            f.write("a,b,c,price,d,e,load\n")
            for i in range(n):
                f.write(",".join(f"{v:.6f}" for v in (x[i, 0], x[i, 1], x[i, 2], y[i, 0], x[i, 3], x[i, 4], y[i, 1])))
                f.write("\n")
    m = rng.normal(size=(8, 3))
    for name, n in (("train", 800), ("test", 300)):
        x = rng.normal(size=(n, 8)).astype(np.float32)
        y = ((x @ m + rng.normal(scale=0.3, size=(n, 3))) > [0.0, 0.8, -0.5]).astype(np.float32)
        np.save(os.path.join(out, "multi", name + "_x.npy"), x)
        np.save(os.path.join(out, "multi", name + "_y.npy"), y)


def read_predictions(path):
    rows = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    k = (rows.shape[1] - 1) // 2
    return rows[:, 0].astype(int), rows[:, 1::2][:, :k], rows[:, 2::2][:, :k]


def raw_inputs(path):
    if path.endswith(".npy"):
        return np.load(path).astype(np.float32)
    with open(path) as f:
        header = f.readline().strip().split(",")
    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return table, header


def check(a):
    index, truth, pred = read_predictions(os.path.join(a.eval, "predictions.csv"))
    g = json.load(open(os.path.join(a.eval, "metrics.json")))
    sk = {}
    if a.task == "regression":
        sk["mae"] = skm.mean_absolute_error(truth, pred)
        sk["mse"] = skm.mean_squared_error(truth, pred)
        sk["rmse"] = skm.root_mean_squared_error(truth, pred)
        sk["r2"] = skm.r2_score(truth, pred)
        sk["explained_variance"] = skm.explained_variance_score(truth, pred)
        sk["r2_per_output"] = skm.r2_score(truth, pred, multioutput="raw_values")
        ours = {k: g[k] for k in ("mae", "mse", "rmse", "r2", "explained_variance")}
        ours["r2_per_output"] = [o["r2"] for o in g["per_output"]]
    else:
        y = truth.astype(int)
        hard = (pred >= 0.5).astype(int)
        for avg in ("micro", "macro", "samples", "weighted"):
            sk[avg + "_f1"] = skm.f1_score(y, hard, average=avg, zero_division=0)
        sk["subset_accuracy"] = skm.accuracy_score(y, hard)
        sk["hamming_loss"] = skm.hamming_loss(y, hard)
        sk["macro_ap"] = skm.average_precision_score(y, pred, average="macro")
        sk["micro_ap"] = skm.average_precision_score(y, pred, average="micro")
        sk["f1_per_label"] = skm.f1_score(y, hard, average=None, zero_division=0)
        ours = {avg + "_f1": g[avg]["f1"] for avg in ("micro", "macro", "samples", "weighted")}
        ours.update(subset_accuracy=g["subset_accuracy"], hamming_loss=g["hamming_loss"],
                    macro_ap=g["average_precision"]["macro"], micro_ap=g["average_precision"]["micro"],
                    f1_per_label=[r["f1"] for r in g["per_label"]])
    worst_metric = max(float(np.max(np.abs(np.asarray(sk[k], float) - np.asarray(ours[k], float)))) for k in sk)

    # The exported files on raw inputs, preprocessed as the contract says.
    c = json.load(open(a.contract))
    pre = c["preprocessing"]
    if a.inputs.endswith(".npy"):
        raw = np.load(a.inputs).astype(np.float64)
    else:
        table, header = raw_inputs(a.inputs)
        cols = [header.index(n) for n in c["input"]["feature_names"]]
        raw = table[:, cols]
    x = ((raw[index] * pre["scale"] - np.asarray(pre["mean"])) / np.asarray(pre["std"])).astype(np.float32)
    model = torch.jit.load(a.model)
    model.eval()
    with torch.no_grad():
        ts = model(torch.from_numpy(x)).double().numpy()
    sess = ort.InferenceSession(a.onnx, providers=["CPUExecutionProvider"])
    ox = sess.run([c["output"]["name"]], {c["input"]["name"]: x})[0].astype(np.float64)
    if a.task == "multilabel":
        ts, ox = 1 / (1 + np.exp(-ts)), 1 / (1 + np.exp(-ox))
    print(json.dumps(clean({"sklearn": sk, "glassbox": ours, "worst_metric_diff": worst_metric,
                            "torchscript_vs_eval": float(np.max(np.abs(ts - pred))),
                            "onnx_vs_eval": float(np.max(np.abs(ox - pred))), "task": c["output"]["task"]})))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("--out", required=True)
    k = sub.add_parser("check")
    for name in ("--eval", "--task", "--model", "--onnx", "--contract", "--inputs"):
        k.add_argument(name, required=True)
    a = ap.parse_args()
    if a.cmd == "data":
        make_data(a.out)
    else:
        check(a)


if __name__ == "__main__":
    main()
