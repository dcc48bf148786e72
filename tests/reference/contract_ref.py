"""Serves a glassbox export the way a deployment would: raw Fashion-MNIST test images, the
preprocessing the contract describes, the TorchScript file in Python torch and the ONNX file in
onnxruntime. Prints the softmax probabilities of the first N images from both, as JSON.

    contract_ref.py --model model.pt --onnx model.onnx --contract model.json --images t10k-images-idx3-ubyte --n 64
"""
import argparse
import gzip
import json

import numpy as np
import onnxruntime as ort
import torch

from ref_common import clean


def read_idx_images(path):
    raw = (gzip.open if path.endswith(".gz") else open)(path, "rb").read()
    assert raw[2] == 0x08 and raw[3] == 3, "expected a uint8 IDX file of rank 3"
    n, h, w = (int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(3))
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, h, w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--contract", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--n", type=int, default=64)
    a = ap.parse_args()
    c = json.load(open(a.contract))
    pre = c["preprocessing"]
    images = read_idx_images(a.images)[: a.n].astype(np.float32)
    x = images[:, None, :, :] * np.float32(pre["scale"])  # [N, 1, H, W], gray
    mean = np.array(pre["mean"], dtype=np.float32).reshape(1, -1, 1, 1)
    std = np.array(pre["std"], dtype=np.float32).reshape(1, -1, 1, 1)
    x = ((x - mean) / std).astype(np.float32)
    assert list(x.shape[1:]) == c["input"]["shape"], (x.shape, c["input"]["shape"])
    model = torch.jit.load(a.model)
    model.eval()
    with torch.no_grad():
        ts = torch.softmax(model(torch.from_numpy(x)).double(), 1).numpy()
    sess = ort.InferenceSession(a.onnx, providers=["CPUExecutionProvider"])
    logits = sess.run([c["output"]["name"]], {c["input"]["name"]: x})[0].astype(np.float64)
    ox = np.exp(logits - logits.max(1, keepdims=True))
    ox /= ox.sum(1, keepdims=True)
    print(json.dumps(clean({"torchscript": ts, "onnxruntime": ox, "labels": c["labels"]})))


if __name__ == "__main__":
    main()
