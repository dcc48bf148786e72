#!/usr/bin/env python3
"""`glassbox export --platform glassbox` end to end: a tabular model trained by glassbox on a CSV
with named features and class names, exported as a model repository whose server takes raw
features and applies the contract's preprocessing itself (per-feature mean/std), answering
probabilities. The server's answers are cross-checked against Python torch running the exported
TorchScript file on the same rows preprocessed in numpy from contract.json (the way a Python
client would have to do it without this platform).

    raw_platform_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Exits 0 when every check holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402


def write_table(path: Path, n: int, rng: np.random.Generator, kinds: list[str]) -> np.ndarray:
    y = np.arange(n) % 3
    height = y * 20.0 + 150.0 + rng.normal(0, 3, n)  # large, offset values: normalisation matters
    weight = (2 - y) * 15.0 + 40.0 + rng.normal(0, 3, n)
    with open(path, "w") as f:
        f.write("height,weight,kind\n")
        for h, w, k in zip(height, weight, y):
            f.write(f"{h:.6f},{w:.6f},{kinds[k]}\n")
    return np.stack([height, weight], 1).astype(np.float32)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-raw-platform-")
    checks = sc.Checks("raw_platform")
    rng = np.random.default_rng(7)
    kinds = ["bear", "cat", "dog"]
    write_table(work / "train.csv", 300, rng, kinds)
    x_test = write_table(work / "test.csv", 60, rng, kinds)

    run = work / "run"
    train = subprocess.run(
        [args.glassbox, "train", "--run-dir", str(run), "--overwrite",
         "--set", 'data.format="csv"', "--set", f'data.root="{work}"', "--set", 'data.train_csv="train.csv"',
         "--set", 'data.test_csv="test.csv"', "--set", 'data.label_column="kind"', "--set", "data.val_size=0.2",
         "--set", "data.loader.batch_size=32", "--set", "model.mlp.hidden=[16]", "--set", "trainer.max_epochs=15", "--set", "optim.lr=0.03",
         "--set", "trainer.enable_progress_bar=false", "--set", "trainer.enable_model_summary=false"],
        capture_output=True, text=True)
    if not checks.check(train.returncode == 0, f"training exits 0:\n{train.stdout}\n{train.stderr}"):
        return checks.summary()
    repo = work / "repo"
    export = subprocess.run(
        [args.glassbox, "export", "--checkpoint", str(run / "checkpoints" / "last.ckpt"), "--format", "repository",
         "--platform", "glassbox", "--out", str(repo), "--name", "animals"], capture_output=True, text=True)
    if not checks.check(export.returncode == 0, f"export exits 0:\n{export.stdout}\n{export.stderr}"):
        return checks.summary()
    config = (repo / "animals" / "config.pbtxt").read_text()
    checks.check('platform: "glassbox"' in config, "config.pbtxt names platform glassbox")
    checks.check("TYPE_FP32" in config, "features travel as FP32")
    contract = json.loads((repo / "animals" / "contract.json").read_text())
    checks.check(contract["input"].get("feature_names") == ["height", "weight"], "the contract names the features")
    checks.check(contract.get("labels") == kinds, "the contract names the classes")

    # The reference: Python torch on the exported file, preprocessing applied by hand.
    import torch
    model = torch.jit.load(str(repo / "animals" / "1" / "model.pt"))
    model.eval()
    pre = contract["preprocessing"]
    mean = np.asarray(pre["mean"], np.float32)
    std = np.asarray(pre["std"], np.float32)
    with torch.no_grad():
        logits = model(torch.from_numpy((x_test * np.float32(pre["scale"]) - mean) / std))
    want = torch.softmax(logits, 1).numpy()

    with sc.ServeProcess(args.glassbox, repo, work) as srv:
        body = {"inputs": [{"name": "INPUT__0", "shape": list(x_test.shape), "datatype": "FP32",
                            "data": x_test.flatten().tolist()}]}
        status, _, answer = sc.post_json(srv.port, "/v2/models/animals/infer", body)
        if checks.check(status == 200, f"inference answers 200, got {status}: {answer}"):
            out = answer["outputs"][0]
            got = np.asarray(out["data"], np.float32).reshape(out["shape"])
            ok, why = sc.close_enough(got, want, rtol=1e-5, atol=1e-6)
            checks.check(ok, f"server probabilities equal Python torch on the contract's preprocessing: {why}")
            checks.check(np.allclose(got.sum(1), 1, atol=1e-5), "each row is a probability distribution")
            accuracy = float((got.argmax(1) == np.arange(len(got)) % 3).mean())
            checks.check(accuracy > 0.8, f"the raw-input model predicts (accuracy {accuracy:.2f})")
        # Preprocessed input is what the torchscript platform takes; here it is raw: a row of
        # normalised values looks like another animal, so the two platforms must not be confused.
        status, _, answer = sc.post_json(srv.port, "/v2/models/animals/infer", {
            "inputs": [{"name": "INPUT__0", "shape": [1, 3], "datatype": "FP32", "data": [1.0, 2.0, 3.0]}]})
        checks.check(status == 400, f"a row of 3 features is refused with 400, got {status}")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
