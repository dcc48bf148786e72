"""A TorchScript model made the way a PyTorch user makes one, for glassbox's import tests.

    .venv/bin/python tests/reference/make_script_model.py --out DIR [--arch resnet18|cnn] [--seed 0]
        [--script|--trace] [--first N] [--accuracy] [--data-root /usr/share/datasets/fashion-mnist]
        [--mean 0.286 --std 0.353] [--no-contract] [--fit-head N]

Writes, into DIR:
  model.pt           torch.jit.script(model) (or torch.jit.trace) saved with torch.jit.save
  model.json         the glassbox sidecar (format "glassbox-contract"): input [1, 28, 28] NCHW float32,
                     preprocessing scale 1/255 and mean/std, 10 logits, Fashion-MNIST's class names
                     (left out with --no-contract)
  model.safetensors  the same weights (state_dict), for tests/reference/gradcam_ref.py
  model_spec.json    {"input_shape", "num_classes", "stem": "small"} for gradcam_ref.py --model-json
With --first N: first_inputs.npy (float32 [N, 1, 28, 28], the first N test images normalised as
glassbox normalises them: uint8 / 255 in float32, then (x - mean) / std in float32) and
first_logits.npy (float32 [N, 10], the loaded TorchScript model's outputs for them), and both as
"inputs" and "logits" in first.safetensors.
With --accuracy: predictions.npy (int64 [N], argmax of the loaded model on every test image, or on
the first --test-limit N of them, in file order) and the accuracy in the printed summary; with
--test-limit also test_x.npy (uint8 [N, 1, 28, 28], the raw images) and test_y.npy (int64 [N]), so
glassbox can evaluate the same samples (data.format = "npy").

Models (random weights from --seed; eval mode):
  resnet18  torchvision.models.resnet18(num_classes=10) with conv1 = Conv2d(1, 64, 3, 1, 1, bias=False)
            and maxpool = Identity, so it suits 28x28 inputs; its forward calls self._forward_impl.
  cnn       glassbox's cnn layout (gradcam_ref.Cnn: features = Sequential(conv, bn, relu(inplace),
            ..., pool), classifier = Sequential(flatten, fc, relu, drop, out)), channels [8, 16].
BatchNorm statistics and affine parameters are randomised (running mean ~ N(0, 0.1), var ~
U(0.5, 2)). A fully random network predicts one class for every input, so by default
(--fit-head 1000) the last linear layer is then fitted by ridge regression on the random features
of the first 1000 training images (about 0.76 test accuracy for resnet18); --fit-head 0 keeps it
random.
Prints a JSON summary: files, accuracy, num_samples, first predictions.
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np
import safetensors.torch
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradcam_ref import build  # noqa: E402

FASHION = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(root, name):
    for cand in (name, name + ".gz"):
        p = os.path.join(root, cand)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(os.path.join(root, name))


def normalise(u8, mean, std):
    x = torch.from_numpy(np.ascontiguousarray(u8)).to(torch.float32).div(255.0).unsqueeze(1)
    return (x - torch.tensor(mean, dtype=torch.float32)) / torch.tensor(std, dtype=torch.float32)


def fit_head(model, arch, root, n, mean, std):
    """Ridge regression of one-hot labels on the frozen random features of the first n training
    images, written into the last linear layer: a random backbone with a fitted read-out predicts
    every class (a fully random network predicts one class for every input)."""
    images = read_idx(find(root, "train-images-idx3-ubyte"))[:n]
    labels = torch.from_numpy(read_idx(find(root, "train-labels-idx1-ubyte"))[:n].astype(np.int64))
    head = model.fc if arch == "resnet18" else model.classifier.out
    feats = []
    hook = head.register_forward_hook(lambda m, inp, out: feats.append(inp[0].detach().double()))
    with torch.no_grad():
        for s in range(0, n, 250):
            model(normalise(images[s:s + 250], [mean], [std]))
    hook.remove()
    f = torch.cat(feats)
    mu, sd = f.mean(0), f.std(0) + 1e-6
    z = (f - mu) / sd
    y = torch.nn.functional.one_hot(labels, 10).double()
    w = torch.linalg.solve(z.T @ z + 10.0 * torch.eye(z.shape[1], dtype=torch.float64), z.T @ (y - y.mean(0)))  # [F, 10]
    with torch.no_grad():
        head.weight.copy_((w / sd[:, None]).T.float())
        head.bias.copy_((y.mean(0) - (mu / sd) @ w).float())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", default="resnet18", choices=["resnet18", "cnn"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trace", action="store_true", help="torch.jit.trace instead of torch.jit.script")
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--accuracy", action="store_true")
    ap.add_argument("--test-limit", type=int, default=0, help="only the first N test images (0: all)")
    ap.add_argument("--data-root", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--mean", type=float, default=0.286)
    ap.add_argument("--std", type=float, default=0.353)
    ap.add_argument("--no-contract", action="store_true")
    ap.add_argument("--fit-head", type=int, default=1000, help="fit the last linear layer on N training images (0: keep it random)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)

    spec = {"input_shape": [1, 28, 28], "num_classes": 10, "stem": "small"}
    if a.arch == "cnn":
        spec.update({"channels": [8, 16], "convs_per_stage": 1, "hidden": 32, "dropout": 0.25})
    model = build(a.arch, spec)
    g = torch.Generator().manual_seed(a.seed + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 1.5 + 0.5)
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    model.eval()
    if a.fit_head > 0:
        fit_head(model, a.arch, a.data_root, a.fit_head, a.mean, a.std)
    if a.trace:
        scripted = torch.jit.trace(model, torch.zeros(2, 1, 28, 28))
    else:
        scripted = torch.jit.script(model)
    model_pt = os.path.join(a.out, "model.pt")
    torch.jit.save(scripted, model_pt)
    safetensors.torch.save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(a.out, "model.safetensors"))
    with open(os.path.join(a.out, "model_spec.json"), "w") as f:
        json.dump(spec, f)
    if not a.no_contract:
        contract = {
            "format": "glassbox-contract",
            "version": 1,
            "name": f"py-{a.arch}",
            "architecture": "torchscript",
            "input": {"name": "input", "shape": [1, 28, 28], "dtype": "float32", "layout": "NCHW"},
            "output": {"name": "logits", "num_classes": 10, "kind": "logits"},
            "preprocessing": {"scale": 1 / 255, "mean": [a.mean], "std": [a.std], "channel_order": "gray"},
            "labels": FASHION,
        }
        with open(os.path.join(a.out, "model.json"), "w") as f:
            json.dump(contract, f, indent=2)

    loaded = torch.jit.load(model_pt)
    loaded.eval()
    summary = {"model": model_pt, "arch": a.arch, "scripted": not a.trace}
    images = labels = None
    if a.first > 0 or a.accuracy:
        images = read_idx(find(a.data_root, "t10k-images-idx3-ubyte"))
        labels = read_idx(find(a.data_root, "t10k-labels-idx1-ubyte")).astype(np.int64)
        if a.test_limit > 0:
            images, labels = images[: a.test_limit], labels[: a.test_limit]
            np.save(os.path.join(a.out, "test_x.npy"), np.ascontiguousarray(images.reshape(-1, 1, 28, 28)))
            np.save(os.path.join(a.out, "test_y.npy"), labels)
    with torch.no_grad():
        if a.first > 0:
            x = normalise(images[: a.first], [a.mean], [a.std])
            logits = loaded(x)
            np.save(os.path.join(a.out, "first_inputs.npy"), x.numpy())
            np.save(os.path.join(a.out, "first_logits.npy"), logits.numpy())
            safetensors.torch.save_file({"inputs": x.contiguous(), "logits": logits.contiguous()}, os.path.join(a.out, "first.safetensors"))
            summary["first_predictions"] = logits.argmax(1).tolist()
            summary["first_labels"] = labels[: a.first].tolist()
        if a.accuracy:
            preds = []
            for s in range(0, len(images), 500):
                preds.append(loaded(normalise(images[s:s + 500], [a.mean], [a.std])).argmax(1))
            pred = torch.cat(preds).numpy().astype(np.int64)
            np.save(os.path.join(a.out, "predictions.npy"), pred)
            summary["num_samples"] = int(len(pred))
            summary["correct"] = int((pred == labels).sum())
            summary["accuracy"] = float((pred == labels).mean())
            summary["predicted_classes"] = np.bincount(pred, minlength=10).tolist()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
