"""albumentations 2.0.8 reference for glassbox's geometric transforms (augment_geometric_test.cpp).

  albu_geometric_ref.py parity DIR   # DIR/cases.json, DIR/<image>.npy -> DIR/geo_<id>_*.npy, DIR/params.json
  albu_geometric_ref.py dist DIR     # DIR/dist.json, DIR/draws_<id>.npy (C++ draws) -> p-values, JSON on stdout

Cases come from the C++ test with glassbox's config values ("kwargs"), converted here to
albumentations' arguments (glassbox writes None as "none", 0 or an empty list, see to_albu).

parity: each case builds getattr(A, name)(**kwargs, p=1), runs A.Compose([t], seed=seed) on an
image and a label mask and writes the outputs (geo_<id>_image.npy, geo_<id>_mask.npy), the drawn
params (scalars and small lists in params.json, arrays such as matrices, maps and holes as
geo_<id>_<key>.npy) and "draws": every number the transform's Python random generator returned,
in order (Rotate's angle, Affine's translation and shear never reach t.params). The raw numpy
noise of ElasticTransform is saved as geo_<id>_noise.npy so C++ can rebuild the maps from it.
dist: draws the same parameters n times from albumentations, flattened as glassbox's
Transform::draw_params returns them, and compares the columns the C++ test names: chi-square on
the frequencies for integer values with few levels, two-sample Kolmogorov-Smirnov otherwise.
"""
import json
import sys
import warnings
from pathlib import Path

import cv2
import numpy as np
import scipy.stats

import albumentations as A

assert A.__version__ == "2.0.8", f"albumentations {A.__version__}, the reference needs 2.0.8"
# OpenCV 5 changed warpAffine and remap (up to 7 grey levels); parity is defined against OpenCV 4.
assert cv2.__version__.startswith("4."), f"cv2 {cv2.__version__}, the reference needs OpenCV 4"

warnings.filterwarnings("ignore")  # ShiftScaleRotate's deprecation warning


class PyRecorder:
    """Wraps a transform's random.Random and keeps every number it hands out."""

    def __init__(self, rng):
        self.rng = rng
        self.log = []

    def _keep(self, v):
        if isinstance(v, (int, float)):
            self.log.append(float(v))
        return v

    def uniform(self, a, b):
        return self._keep(self.rng.uniform(a, b))

    def randint(self, a, b):
        return self._keep(self.rng.randint(a, b))

    def random(self):
        return self._keep(self.rng.random())

    def choice(self, seq):
        return self._keep(self.rng.choice(seq))  # only numeric choices (max_size) are kept

    def __getattr__(self, name):
        return getattr(self.rng, name)


class NpRecorder:
    """Wraps a transform's numpy Generator and keeps the arrays its float draws return."""

    def __init__(self, g):
        self.g = g
        self.arrays = []

    def standard_normal(self, *args, **kwargs):
        v = self.g.standard_normal(*args, **kwargs)
        self.arrays.append(np.array(v, copy=True))
        return v

    def uniform(self, *args, **kwargs):
        v = self.g.uniform(*args, **kwargs)
        self.arrays.append(np.array(v, copy=True))
        return v

    def __getattr__(self, name):
        return getattr(self.g, name)


def to_albu(name, kwargs):
    """glassbox config values -> albumentations arguments."""
    kw = {}
    for k, v in kwargs.items():
        if k in ("fill", "fill_mask"):
            if isinstance(v, list) and len(v) == 0:
                v = None  # CoarseDropout's fill_mask=None
            elif isinstance(v, list):
                v = float(v[0]) if len(v) == 1 else tuple(float(x) for x in v)
            else:
                v = float(v)
        elif k == "area_for_downscale":
            v = None if v == "none" else v
        elif k == "max_size_hw":
            v = tuple(None if x == 0 else int(x) for x in v)
        elif k in ("min_height", "min_width", "pad_height_divisor", "pad_width_divisor"):
            v = None if v == 0 else int(v)
        elif k == "max_size":
            v = [int(x) for x in v] if isinstance(v, list) else int(v)
        elif isinstance(v, list):
            v = tuple(v)
        kw[k] = v
    if name == "PadIfNeeded":  # glassbox's divisors default to 0 (None); albumentations' to None
        kw.setdefault("pad_height_divisor", None)
        kw.setdefault("pad_width_divisor", None)
    return kw


def build(name, kwargs):
    return getattr(A, name)(**to_albu(name, kwargs), p=1.0)


def flatten(name, params):
    """The parameters in glassbox's Transform::draw_params order."""
    if name in ("SmallestMaxSize", "LongestMaxSize"):
        return [params["scale"]]
    if name in ("CenterCrop", "RandomCrop"):
        pad = params["pad_params"] or {"pad_top": 0, "pad_bottom": 0, "pad_left": 0, "pad_right": 0}
        return [*params["crop_coords"], pad["pad_top"], pad["pad_bottom"], pad["pad_left"], pad["pad_right"]]
    if name == "RandomResizedCrop":
        return list(params["crop_coords"])
    if name == "PadIfNeeded":
        return [params["pad_top"], params["pad_bottom"], params["pad_left"], params["pad_right"]]
    if name == "RandomRotate90":
        return [params["factor"]]
    if name == "Rotate":
        return [params["x_min"], params["x_max"], params["y_min"], params["y_max"], *params["matrix"][:2].ravel()]
    if name in ("Affine", "ShiftScaleRotate"):
        s = params["scale"]
        return [params["rotate"], s["x"], s["y"], *params["matrix"][:2].ravel(), *params["output_shape"]]
    if name == "ElasticTransform":
        return [*params["map_x"].ravel(), *params["map_y"].ravel()]
    if name == "GridDistortion":
        return [*params["map_x"][0], *params["map_y"][:, 0]]
    if name == "CoarseDropout":
        return [len(params["holes"]), *np.asarray(params["holes"]).ravel()]
    return []


def jsonable(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    return v


def parity(d):
    cases = json.loads((d / "cases.json").read_text())
    report = {"albumentations": A.__version__, "cv2": cv2.__version__, "numpy": np.__version__, "cases": {}}
    for c in cases:
        cid = c["id"]
        img = np.load(d / f"{c['image']}.npy")
        mask = np.load(d / "mask.npy")
        t = build(c["name"], c["kwargs"])
        pipe = A.Compose([t], seed=c["seed"])
        t.py_random = PyRecorder(t.py_random)  # after Compose, which reseeds its children
        t.random_generator = NpRecorder(t.random_generator)
        out = pipe(image=img, mask=mask)
        # apply() alone, given the params, reproduces the pipeline: the contract glassbox mirrors.
        assert np.array_equal(t.apply(img, **t.params), out["image"]), cid
        np.save(d / f"geo_{cid}_image.npy", np.ascontiguousarray(out["image"]))
        np.save(d / f"geo_{cid}_mask.npy", np.ascontiguousarray(out["mask"]))
        params = {}
        for k, v in t.params.items():
            if k in ("shape", "interpolation", "fill", "fill_mask", "bbox_matrix"):
                continue
            if isinstance(v, np.ndarray):
                np.save(d / f"geo_{cid}_{k}.npy", np.ascontiguousarray(v))
            else:
                params[k] = jsonable(v)
        if t.random_generator.arrays and c["name"] == "ElasticTransform":
            noise = t.random_generator.arrays[0].astype(np.float32)
            np.save(d / f"geo_{cid}_noise.npy", np.ascontiguousarray(noise.reshape(-1, noise.shape[-1])))
        report["cases"][cid] = {"params": params, "draws": t.py_random.log}
    (d / "params.json").write_text(json.dumps(report))
    print(json.dumps({"albumentations": A.__version__, "cv2": cv2.__version__, "cases": len(cases)}))


def compare(a, b):
    """(p-value that a and b come from one distribution, test name)."""
    if np.all(a == a[0]) and np.all(b == b[0]):
        return (1.0 if a[0] == b[0] else 0.0), "constant"
    values = np.union1d(a, b)
    if np.all(values == np.round(values)) and len(values) <= 100:
        table = np.array([[np.sum(a == v) for v in values], [np.sum(b == v) for v in values]], dtype=np.float64)
        # Pool the rare levels so every cell of the chi-square table has a usable expectation.
        rare = table.sum(axis=0) < 20
        if rare.any():
            table = np.concatenate([table[:, ~rare], table[:, rare].sum(axis=1, keepdims=True)], axis=1)
            table = table[:, table.sum(axis=0) > 0]
        if table.shape[1] < 2:
            return 1.0, "chi2"
        return float(scipy.stats.chi2_contingency(table)[1]), "chi2"
    return float(scipy.stats.ks_2samp(a, b).pvalue), "ks"


def dist(d):
    cases = json.loads((d / "dist.json").read_text())
    result = {"albumentations": A.__version__, "cv2": cv2.__version__, "dist": {}}
    for c in cases:
        ours = np.load(d / f"draws_{c['id']}.npy")
        t = build(c["name"], c["kwargs"])
        t.set_random_seed(c["seed"])
        img = np.zeros((*c["shape"], 3), np.uint8)
        rows = []
        for _ in range(ours.shape[0]):
            params = t.get_params()
            params["shape"] = img.shape
            params.update(t.get_params_dependent_on_data(params, {"image": img}))
            rows.append(flatten(c["name"], params))
        width = max(ours.shape[1], max(len(r) for r in rows))
        theirs = np.full((len(rows), width), np.nan)
        for i, r in enumerate(rows):
            theirs[i, : len(r)] = r
        out = {}
        for col in c["columns"]:
            j, label = col["index"], col["name"]
            a = ours[:, j] if j < ours.shape[1] else np.array([])
            b = theirs[:, j]
            a, b = a[~np.isnan(a)], b[~np.isnan(b)]
            if len(a) == 0 or len(b) == 0:
                out[label] = {"p": 0.0 if len(a) != len(b) else 1.0, "test": "missing", "n": [len(a), len(b)]}
                continue
            p, test = compare(a, b)
            out[label] = {"p": p, "test": test, "n": [len(a), len(b)], "mean": [float(a.mean()), float(b.mean())]}
        result["dist"][c["id"]] = out
    print(json.dumps(result))


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    {"parity": parity, "dist": dist}[mode](folder)
