"""Reference attributions from captum for glassbox's MLP on tabular inputs.

    .venv/bin/python tests/reference/captum_ref.py --model-json M.json --weights model.safetensors \
        --inputs X.npy --targets T.npy --runs RUNS.json --out-dir DIR

M.json: {"input_shape": [F] (or any sample shape), "num_classes": K, "mlp": {...}} with the keys of
glassbox's [model.mlp] section (hidden, activation, dropout, norm, bn_momentum, output); missing
ones take glassbox's defaults. The model mirrors glassbox/nn/mlp.cpp with the same parameter and
buffer names: body = Sequential(flatten, fc0, [bn0 | ln0], act0, [drop0], ..., head, [softmax]),
and the weights load with load_state_dict(safetensors.torch.load_file(path), strict=True).
X.npy: float32 [N, ...]; T.npy: int [N], the target class of each sample (captum's list target).
RUNS.json: a list of runs, each one of
  {"name": S, "kind": "quadrature", "method": "gausslegendre", "n_steps": 50}
  {"name": S, "kind": "saliency", "abs": true}
  {"name": S, "kind": "ig", "method": "gausslegendre", "n_steps": 50, "baseline": B.npy | null,
   "internal_batch_size": null | int}
A "quadrature" run writes DIR/S_alphas.npy and DIR/S_weights.npy (float64 [n_steps]): the nodes and
step sizes captum's approximation_parameters(method) gives IntegratedGradients. For the other runs
the script writes DIR/S_attr.npy (float32, shaped like X) and, for "ig", DIR/S_delta.npy
(float32 [N], captum's convergence delta, return_convergence_delta=True). A baseline file holds a
tensor shaped like X (passed to captum as is); null is captum's default (zeros).
captum.attr.Saliency(model).attribute(x, target=t, abs=...) and
captum.attr.IntegratedGradients(model).attribute(x, baselines=b, target=t, n_steps=...,
method=..., internal_batch_size=..., return_convergence_delta=True), model in eval mode, CPU,
float32. Prints a JSON summary (captum's version, shapes, the runs written).
"""
import argparse
import json
from collections import OrderedDict
from pathlib import Path

import captum
import numpy as np
import safetensors.torch
import torch
from captum.attr import IntegratedGradients, Saliency
from captum.attr._utils.approximation_methods import approximation_parameters

MLP_DEFAULTS = {
    "hidden": [256, 128],
    "activation": "relu",
    "dropout": 0.0,
    "norm": "none",
    "bn_momentum": 0.1,
    "output": "logits",
}

ACTIVATIONS = {
    "relu": torch.nn.ReLU,
    "gelu": torch.nn.GELU,
    "tanh": torch.nn.Tanh,
    "silu": torch.nn.SiLU,
    "leaky_relu": torch.nn.LeakyReLU,
}


class Mlp(torch.nn.Module):
    """glassbox/nn/mlp.cpp, layer by layer, under the same names."""

    def __init__(self, options, input_shape, num_classes):
        super().__init__()
        o = dict(MLP_DEFAULTS, **options)
        layers = [("flatten", torch.nn.Flatten())]
        width = int(np.prod(input_shape))
        for i, out in enumerate(o["hidden"]):
            layers.append((f"fc{i}", torch.nn.Linear(width, out)))
            if o["norm"] == "batchnorm":
                layers.append((f"bn{i}", torch.nn.BatchNorm1d(out, momentum=o["bn_momentum"])))
            elif o["norm"] == "layernorm":
                layers.append((f"ln{i}", torch.nn.LayerNorm(out)))
            layers.append((f"act{i}", ACTIVATIONS[o["activation"]]()))
            if o["dropout"] > 0:
                layers.append((f"drop{i}", torch.nn.Dropout(o["dropout"])))
            width = out
        layers.append(("head", torch.nn.Linear(width, num_classes)))
        if o["output"] == "softmax":
            layers.append(("softmax", torch.nn.Softmax(dim=1)))
        self.body = torch.nn.Sequential(OrderedDict(layers))

    def forward(self, x):
        return self.body(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-json", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--targets", required=True)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()

    torch.set_num_threads(1)
    spec = json.loads(Path(args.model_json).read_text())
    model = Mlp(spec.get("mlp", {}), spec["input_shape"], spec["num_classes"])
    model.load_state_dict(safetensors.torch.load_file(args.weights), strict=True)
    model.eval()

    x = torch.from_numpy(np.load(args.inputs)).float()
    targets = [int(t) for t in np.load(args.targets).reshape(-1)]
    out_dir = Path(args.out_dir)
    written = []
    for run in json.loads(Path(args.runs).read_text()):
        name = run["name"]
        if run["kind"] == "quadrature":
            step_sizes, alphas = approximation_parameters(run["method"])
            np.save(out_dir / f"{name}_alphas.npy", np.asarray(alphas(run["n_steps"]), dtype=np.float64))
            np.save(out_dir / f"{name}_weights.npy", np.asarray(step_sizes(run["n_steps"]), dtype=np.float64))
            written.append(name)
            continue
        if run["kind"] == "saliency":
            attr = Saliency(model).attribute(x, target=targets, abs=run.get("abs", True))
            delta = None
        elif run["kind"] == "ig":
            baseline = run.get("baseline")
            baselines = None if baseline is None else torch.from_numpy(np.load(baseline)).float()
            attr, delta = IntegratedGradients(model).attribute(
                x,
                baselines=baselines,
                target=targets,
                n_steps=run.get("n_steps", 50),
                method=run.get("method", "gausslegendre"),
                internal_batch_size=run.get("internal_batch_size"),
                return_convergence_delta=True,
            )
        else:
            raise SystemExit(f"captum_ref: unknown run kind {run['kind']!r}")
        np.save(out_dir / f"{name}_attr.npy", attr.detach().numpy().astype(np.float32))
        if delta is not None:
            np.save(out_dir / f"{name}_delta.npy", delta.detach().numpy().astype(np.float32))
        written.append(name)

    print(
        json.dumps(
            {
                "captum": captum.__version__,
                "inputs": list(x.shape),
                "targets": targets,
                "runs": written,
            }
        )
    )


if __name__ == "__main__":
    main()
