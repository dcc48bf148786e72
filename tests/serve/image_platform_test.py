#!/usr/bin/env python3
"""A run on a folder of JPEGs through the rest of the loop: trained with augmentation and MixUp,
evaluated, explained (heat maps over the original files), predicted from image files, exported (TorchScript and a model repository of
platform glassbox whose input is the encoded image), predicted again by the exported TorchScript
file on images of other sizes, and served: JPEG bytes sent with Triton's own client
(tritonclient.http, binary BYTES) come back with the probabilities `glassbox predict` gives for
the same files.

    image_platform_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Exits 0 when every check holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

CLASSES = ["bottom", "none", "top"]


def write_images(root: Path, n_per_class: int, rng: np.random.Generator) -> list[Path]:
    """JPEGs of varied sizes: a bright square top-left (top), bottom-right (bottom), or none."""
    files = []
    for k, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(n_per_class):
            h, w = int(rng.integers(20, 33)), int(rng.integers(20, 33))
            img = rng.integers(0, 60, (h, w, 3), dtype=np.uint8)
            if name == "top":
                img[: h // 2, : w // 2] = (230, 200, 40)
            if name == "bottom":
                img[h // 2:, w // 2:] = (40, 200, 230)
            f = root / name / f"{i:03d}.jpg"
            cv2.imwrite(str(f), img, [cv2.IMWRITE_JPEG_QUALITY, 92])
            files.append(f)
    return files


def run(args: list[str], what: str, checks: sc.Checks) -> subprocess.CompletedProcess | None:
    p = subprocess.run(args, capture_output=True, text=True)
    return p if checks.check(p.returncode == 0, f"{what} exits 0:\n{p.stdout}\n{p.stderr}") else None


def read_predictions(path: Path) -> dict[str, np.ndarray]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return {Path(r["file"]).name + "/" + Path(r["file"]).parent.name: np.array(
        [float(r[f"p_{c}"]) for c in CLASSES], np.float64) for r in rows}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-image-platform-")
    checks = sc.Checks("image_platform")
    rng = np.random.default_rng(11)
    write_images(work / "photos", 40, rng)
    unseen = work / "unseen"
    write_images(unseen, 3, np.random.default_rng(99))
    gb = args.glassbox

    cfg = work / "photos.toml"
    cfg.write_text(f"""[data]
format = "imagefolder"
root = "{work / 'photos'}"
val_size = 0.15
test_size = 0.15
[[data.train_transforms]]
name = "RandomResizedCrop"
size = [16, 16]
scale = [0.7, 1.0]
[[data.train_transforms]]
name = "RandomBrightnessContrast"
p = 0.5
[[data.eval_transforms]]
name = "Resize"
height = 16
width = 16
[data.mixup]
mixup_alpha = 0.2
[data.loader]
batch_size = 16
num_workers = 2
[model]
name = "cnn"
[model.cnn]
channels = [8, 16]
hidden = 32
[optim]
lr = 0.01
[trainer]
max_epochs = 8
enable_progress_bar = false
enable_model_summary = false
""")
    rundir = work / "run"
    if not run([gb, "train", str(cfg), "--run-dir", str(rundir), "--overwrite"], "training", checks):
        return checks.summary()
    ckpt = str(rundir / "checkpoints" / "last.ckpt")
    ev = run([gb, "eval", "--checkpoint", ckpt, "--json"], "glassbox eval", checks)
    if ev:
        metrics = json.loads(ev.stdout[ev.stdout.find("{"):])
        print(f"test accuracy {metrics['accuracy']:.3f}")
        checks.check(metrics["accuracy"] > 0.8, f"the image model learns (test accuracy {metrics['accuracy']:.2f})")
    if run([gb, "explain", "--checkpoint", ckpt, "--samples", "0,1"], "glassbox explain", checks):
        index = json.loads((rundir / "explain" / "index.json").read_text())
        for item in index["items"]:
            over = rundir / "explain" / item.get("original_overlay", "missing.png")
            source = cv2.imread(item.get("file", ""))
            drawn = cv2.imread(str(over))
            checks.check(source is not None and drawn is not None and drawn.shape == source.shape,
                         f"the heat map is drawn over the original file at its own size: {item}")

    # The run's augmentation grid, in the report.
    if run([gb, "report", str(rundir)], "glassbox report", checks):
        html = (rundir / "report.html").read_text()
        checks.check('id="augmentation"' in html and (rundir / "augmentation.png").exists(),
                     "the report shows the run's augmentation grid")

    # Predictions from the files, by the checkpoint and by the exported TorchScript file.
    by_ckpt = work / "pred_ckpt.csv"
    run([gb, "predict", str(unseen), "--checkpoint", ckpt, "--out", str(by_ckpt)], "predict (checkpoint)", checks)
    exp = work / "export"
    run([gb, "export", "--checkpoint", ckpt, "--format", "torchscript", "--out", str(exp / "model.pt")],
        "export torchscript", checks)
    by_script = work / "pred_script.csv"
    run([gb, "predict", str(unseen), "--model", str(exp / "model.pt"), "--out", str(by_script)],
        "predict (exported TorchScript, images of other sizes)", checks)
    want = read_predictions(by_ckpt) if by_ckpt.exists() else {}
    if by_script.exists() and want:
        got = read_predictions(by_script)
        worst = max(float(np.abs(got[k] - want[k]).max()) for k in want)
        print(f"exported TorchScript vs checkpoint on files of other sizes: max |p diff| {worst:.2e}")
        checks.check(set(got) == set(want) and worst < 1e-5,
                     f"the exported file predicts what the checkpoint does (max diff {worst:.2e})")
        correct = sum(int(np.argmax(p) == CLASSES.index(k.split("/")[1])) for k, p in want.items())
        checks.check(correct >= 7, f"unseen images are mostly right ({correct}/9)")

    repo = work / "repo"
    if not run([gb, "export", "--checkpoint", ckpt, "--format", "repository", "--platform", "glassbox", "--out",
                str(repo), "--name", "photos"], "export repository", checks):
        return checks.summary()
    config = (repo / "photos" / "config.pbtxt").read_text()
    checks.check("TYPE_STRING" in config, "the served input is the encoded image (TYPE_STRING)")
    contract = json.loads((repo / "photos" / "contract.json").read_text())
    image = contract["preprocessing"].get("image", {})
    checks.check(image.get("channels") == 3 and image.get("transforms", [{}])[0].get("name") == "Resize",
                 f"the contract records decode + resize: {image}")

    import tritonclient.http as httpclient
    names = sorted(want)
    files = [unseen / k.split("/")[1] / k.split("/")[0] for k in names]
    with sc.ServeProcess(gb, repo, work) as srv:
        client = httpclient.InferenceServerClient(f"127.0.0.1:{srv.port}", network_timeout=120)
        data = np.array([[f.read_bytes()] for f in files], dtype=np.object_)
        inp = httpclient.InferInput("INPUT__0", list(data.shape), "BYTES")
        inp.set_data_from_numpy(data, binary_data=True)
        result = client.infer("photos", [inp])
        served = result.as_numpy("OUTPUT__0")
        worst = max(float(np.abs(served[i] - want[k]).max()) for i, k in enumerate(names))
        print(f"served JPEG bytes vs glassbox predict: max |p diff| {worst:.2e} over {len(names)} images")
        checks.check(served.shape == (len(files), 3) and worst < 1e-5,
                     f"served probabilities of JPEG bytes equal glassbox predict's (max diff {worst:.2e})")
        # A file that is not an image: 400 naming it, and the server keeps serving.
        bad = np.array([[b"not an image at all"]], dtype=np.object_)
        inp_bad = httpclient.InferInput("INPUT__0", [1, 1], "BYTES")
        inp_bad.set_data_from_numpy(bad, binary_data=True)
        try:
            client.infer("photos", [inp_bad])
            checks.check(False, "a non-image is refused")
        except Exception as e:  # tritonclient raises InferenceServerException
            msg = str(e)
            checks.check("400" in msg or "not an image" in msg, f"a non-image is refused with a reason: {msg}")
        again = client.infer("photos", [inp]).as_numpy("OUTPUT__0")
        checks.check(np.allclose(again, served), "the server still answers after a bad image")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
