"""albumentations 2.0.8 reference for glassbox's pixel transforms (augment_pixel_test.cpp).

  albu_pixel_ref.py parity DIR   # DIR/cases.json, DIR/<image>.npy -> DIR/out_<id>.npy, arrays, DIR/params.json
  albu_pixel_ref.py dist DIR     # DIR/dist.json, DIR/<id>.npy (C++ draws) -> p-values as JSON on stdout

parity: each case builds getattr(A, name)(**kwargs, p=1), runs A.Compose([t], seed=seed) on the
image and writes the output, the drawn params (scalars in params.json, arrays such as kernels and
noise maps as <id>_<key>.npy) and "draws": the drawn numbers in the order glassbox's
Transform::draw_params returns them (some, like GaussianBlur's sigma, never reach t.params, so
the transform's random generators are wrapped to record every draw).
dist: draws the same numbers n times from albumentations and compares each with the C++ draws:
two-sample Kolmogorov-Smirnov for continuous values, chi-square on the frequencies for discrete
ones (kernel sizes, ColorJitter's order).
"""
import json
import random
import sys
import warnings
from pathlib import Path

import cv2
import numpy as np
import scipy.stats

import albumentations as A

assert A.__version__ == "2.0.8", f"albumentations {A.__version__}, the reference needs 2.0.8"
# OpenCV 5 changed warpAffine/remap; these pixel ops are the same in every 4.x wheel.
assert cv2.__version__.startswith("4."), f"cv2 {cv2.__version__}, the reference needs OpenCV 4"

warnings.filterwarnings("ignore")  # albumentations warns about gray input to HSV, odd blur sizes...


class RecordingRandom(random.Random):
    """The transform's py_random, remembering every uniform/randint result."""

    def __init__(self, seed):
        super().__init__(seed)
        self.log = []

    def uniform(self, a, b):
        v = super().uniform(a, b)
        self.log.append(float(v))
        return v

    def randint(self, a, b):
        v = super().randint(a, b)
        self.log.append(int(v))
        return v


class RecordingGenerator:
    """The transform's numpy Generator, remembering integers() results (GaussNoise's cv2 seed)."""

    def __init__(self, g):
        self.g = g
        self.log = []

    def integers(self, *args, **kwargs):
        v = self.g.integers(*args, **kwargs)
        self.log.append(int(v))
        return v

    def __getattr__(self, name):
        return getattr(self.g, name)


def build(name, kwargs):
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    return getattr(A, name)(**kw, p=1.0)


def draws(name, t, params, py_log, np_log):
    """The drawn numbers in glassbox's draw_params order."""
    if name == "CLAHE":
        return [params["clip_limit"]]
    if name == "RandomBrightnessContrast":
        return [params["alpha"], params["beta"]]
    if name == "RandomGamma":
        return [params["gamma"]]
    if name == "HueSaturationValue":
        return [params["hue_shift"], params["sat_shift"], params["val_shift"]]
    if name == "ColorJitter":
        return [params["brightness"], params["contrast"], params["saturation"], params["hue"], *params["order"]]
    if name == "Solarize":
        return [params["threshold"]]
    if name == "GaussianBlur":
        return [py_log[0], py_log[1]]  # sigma, then the kernel size
    if name == "MotionBlur":
        k = params["kernel"].shape[0]
        rest = py_log[-4:] if t.allow_shifted else py_log[-2:]  # a randint comes first unless lo == hi
        out = [k, rest[0], rest[1]]
        if t.allow_shifted:
            out += [rest[2] * (k // 2) / 2, rest[3] * (k // 2) / 2]
        return out
    if name == "GaussNoise":
        return [py_log[0], py_log[1], np_log[0]]
    return []


def record(t, seed):
    t.py_random = RecordingRandom(seed)
    t.random_generator = RecordingGenerator(np.random.default_rng(seed))


def parity(d):
    cases = json.loads((d / "cases.json").read_text())
    report = {"albumentations": A.__version__, "cv2": cv2.__version__, "numpy": np.__version__, "cases": {}}
    for c in cases:
        img = np.load(d / f"{c['image']}.npy")
        t = build(c["name"], c["kwargs"])
        pipe = A.Compose([t], seed=c["seed"])
        record(t, c["seed"])  # after Compose, which reseeds its children
        # Copies: some albumentations ops (Equalize "pil" on a gray image) write into their input.
        out = pipe(image=img.copy())["image"]
        again = t.apply(img.copy(), **t.params)  # apply() alone reproduces the pipeline
        assert np.array_equal(again, out), c["id"]
        np.save(d / f"out_{c['id']}.npy", np.ascontiguousarray(out))
        scalars = {}
        for k, v in t.params.items():
            if k == "shape":
                continue
            if isinstance(v, np.ndarray):
                np.save(d / f"{c['id']}_{k}.npy", np.ascontiguousarray(v))
            elif isinstance(v, (int, float, np.integer, np.floating)):
                scalars[k] = float(v)
            elif isinstance(v, list):
                scalars[k] = [float(x) for x in v]
        report["cases"][c["id"]] = {
            "params": scalars,
            "draws": [float(x) for x in draws(c["name"], t, t.params, t.py_random.log, t.random_generator.log)],
            "dtype": str(out.dtype),
        }
    (d / "params.json").write_text(json.dumps(report))
    print(json.dumps({"albumentations": A.__version__, "cv2": cv2.__version__, "cases": len(cases)}))


def compare(a, b, discrete):
    """p-value that a and b come from one distribution."""
    if np.all(a == a[0]) and np.all(b == b[0]):
        return 1.0 if a[0] == b[0] else 0.0
    if discrete:
        values = np.union1d(a, b)
        table = np.array([[np.sum(a == v) for v in values], [np.sum(b == v) for v in values]])
        return float(scipy.stats.chi2_contingency(table)[1])
    return float(scipy.stats.ks_2samp(a, b).pvalue)


def dist(d):
    cases = json.loads((d / "dist.json").read_text())
    img = np.load(d / "image.npy")
    result = {"albumentations": A.__version__, "cv2": cv2.__version__, "dist": {}}
    for c in cases:
        ours = np.load(d / f"{c['id']}.npy")
        t = build(c["name"], c["kwargs"])
        record(t, c["seed"])
        rows = []
        for _ in range(ours.shape[0]):
            t.py_random.log.clear()
            t.random_generator.log.clear()
            params = t.get_params()
            params["shape"] = img.shape
            params.update(t.get_params_dependent_on_data(params, {"image": img}))
            rows.append(draws(c["name"], t, params, t.py_random.log, t.random_generator.log))
        theirs = np.array(rows, dtype=np.float64)
        assert theirs.shape == ours.shape, (c["id"], theirs.shape, ours.shape)
        names = c["columns"]
        pvals = {}
        if c["name"] == "ColorJitter":  # the order as one categorical value (24 permutations)
            code = lambda m: m[:, 4] * 64 + m[:, 5] * 16 + m[:, 6] * 4 + m[:, 7]  # noqa: E731
            pvals["order"] = compare(code(ours), code(theirs), True)
            names = names[:4]
        for j, col in enumerate(names):
            pvals[col] = compare(ours[:, j], theirs[:, j], col in c.get("discrete", []))
        result["dist"][c["id"]] = pvals
    print(json.dumps(result))


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    {"parity": parity, "dist": dist}[mode](folder)
