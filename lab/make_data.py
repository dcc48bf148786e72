#!/usr/bin/env python3
"""Generate the data of the lab's broken setups (see docs/lab.md).

Every scenario of lab/ whose fault lives in the data gets its arrays from this one script:

    python lab/make_data.py NAME [--out DIR]   # one scenario (default DIR: lab/NAME/data)
    python lab/make_data.py --all              # every scenario that has data
    python lab/make_data.py --list             # the scenarios and what each plants

The source is Debian's Fashion-MNIST (IDX files, plain or .gz) in
/usr/share/datasets/fashion-mnist, or the folder given with --source. Each scenario writes, in
glassbox's `format = "npy"` layout,

    DIR/train_x.npy  DIR/train_y.npy  DIR/test_x.npy  DIR/test_y.npy          the broken data
    DIR/fixed/train_x.npy ...                                                 the repaired data

(`fixed/` only where the repair is in the data; scenarios fixed by a config change write none).
Inputs are uint8 [N, 28, 28] (glassbox scales them to [0, 1]) or float32 [N, 1, 28, 28] where the
fault needs float values; labels are int64 [N]. The base sample is the first 7000 training images
(glassbox's val_size = 1000 leaves 6000 to train on) and the first 2000 test images, checked to
hold no exact duplicates, so that a scenario trains in seconds on two CPU cores.

Deterministic: every random choice comes from a fixed seed, so two runs write identical files.
Idempotent: DIR/.stamp records a hash of this script and the scenario name; a scenario whose stamp
matches and whose files all exist is skipped (--force rewrites it). Files are written to a
temporary name and renamed, so an interrupted run never leaves a half-written array behind.

Image-folder scenarios write `DIR/train/<class>/*.png` and `DIR/test/<class>/*.png` instead (and
DIR/.complete when every file is there), PNGs encoded with zlib.

Needs numpy only. Errors are one line on stderr with exit status 2.
"""

import argparse
import gzip
import hashlib
import os
import struct
import sys
import zlib

import numpy as np

LAB = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"
N_TRAIN = 7000
N_TEST = 2000
FILES = ("train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy")


class LabError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Fashion-MNIST


def _read_idx(folder, name, magic, item_shape):
    plain = os.path.join(folder, name)
    packed = plain + ".gz"
    if os.path.exists(plain):
        path, opener = plain, open
    elif os.path.exists(packed):
        path, opener = packed, gzip.open
    else:
        raise LabError(
            f"Fashion-MNIST not found: {folder} has no {name} or {name}.gz "
            "(install Debian's dataset-fashion-mnist or pass --source DIR)"
        )
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise LabError(f"{path}: cannot be read ({e})") from None
    header = 4 * (2 + len(item_shape))  # magic, item count, item dimensions (big-endian uint32)
    if len(raw) < header:
        raise LabError(f"{path}: truncated IDX header ({len(raw)} bytes)")
    dims = np.frombuffer(raw, ">u4", count=2 + len(item_shape))
    if int(dims[0]) != magic:
        raise LabError(f"{path}: not an IDX file of this kind (magic {int(dims[0]):#x}, expected {magic:#x})")
    shape = (int(dims[1]),) + tuple(int(d) for d in dims[2:])
    if tuple(shape[1:]) != item_shape:
        raise LabError(f"{path}: items have shape {shape[1:]}, expected {item_shape}")
    count = int(np.prod(shape))
    if len(raw) - header != count:
        raise LabError(f"{path}: {len(raw) - header} bytes of data, expected {count} for {shape[0]} items")
    return np.frombuffer(raw, np.uint8, offset=header).reshape(shape)


def load_fashion(folder):
    """All of Fashion-MNIST: (train_x uint8 [60000,28,28], train_y, test_x, test_y int64)."""
    if not os.path.isdir(folder):
        raise LabError(f"Fashion-MNIST not found: {folder} is not a directory "
                       "(install Debian's dataset-fashion-mnist or pass --source DIR)")
    tx = _read_idx(folder, "train-images-idx3-ubyte", 0x803, (28, 28))
    ty = _read_idx(folder, "train-labels-idx1-ubyte", 0x801, ()).astype(np.int64)
    sx = _read_idx(folder, "t10k-images-idx3-ubyte", 0x803, (28, 28))
    sy = _read_idx(folder, "t10k-labels-idx1-ubyte", 0x801, ()).astype(np.int64)
    if len(tx) != len(ty) or len(sx) != len(sy):
        raise LabError(f"{folder}: image and label files disagree on the number of samples")
    return tx, ty, sx, sy


def _unique_rows(x, limit, exclude=frozenset()):
    """Indices of the first `limit` samples of x that are unique and not in `exclude` (hashes)."""
    seen = set(exclude)
    keep = []
    for i in range(len(x)):
        h = hashlib.sha1(x[i].tobytes()).digest()
        if h in seen:
            continue
        seen.add(h)
        keep.append(i)
        if len(keep) == limit:
            break
    return np.asarray(keep), seen


def base_sample(fashion):
    """The clean base: 7000 training and 2000 test samples without any exact duplicate."""
    tx, ty, sx, sy = fashion
    ti, seen = _unique_rows(tx, N_TRAIN)
    si, _ = _unique_rows(sx, N_TEST, exclude=seen)
    return {"train_x": tx[ti].copy(), "train_y": ty[ti].copy(), "test_x": sx[si].copy(), "test_y": sy[si].copy()}


def as_float(x):
    """uint8 [N,28,28] -> float32 [N,1,28,28] in [0,1], the values glassbox itself would use."""
    return (x.astype(np.float32) / 255.0)[:, None, :, :]


def with_(d, **changes):
    out = dict(d)
    out.update(changes)
    return out


# --------------------------------------------------------------------------------------------
# Scenarios: each returns {subdir: arrays}, "" being the broken data and "fixed" the repaired one.

SCENARIOS = {}


def scenario(name, summary):
    def register(fn):
        SCENARIOS[name] = (fn, summary)
        return fn
    return register


@scenario("nonfinite-input", "float32 inputs; 5 training samples hold a 4x4 patch of NaN")
def _nonfinite_input(fashion):
    b = base_sample(fashion)
    x = as_float(b["train_x"])
    bad = np.array([137, 1500, 2718, 4242, 6001])
    x[bad, 0, 12:16, 12:16] = np.nan
    clean = np.setdiff1d(np.arange(len(x)), bad)
    test_x = as_float(b["test_x"])
    return {
        "": with_(b, train_x=x, test_x=test_x),
        "fixed": with_(b, train_x=x[clean], train_y=b["train_y"][clean], test_x=test_x),
    }


@scenario("nonfinite-activation", "pre-normalised float32 inputs (normalize = false); one training "
          "sample holds finite values of about 3e38, so the first Linear layer overflows")
def _nonfinite_activation(fashion):
    b = base_sample(fashion)
    x = as_float(b["train_x"])
    mean, std = float(x.mean()), float(x.std())
    x = (x - mean) / std
    test_x = (as_float(b["test_x"]) - mean) / std
    bad = 3141
    # the image's own pattern, mapped to 2.9e38..3.3e38: finite (float32 ends at 3.4e38), but a
    # weighted sum of 784 such values overflows for some units of any randomly initialised Linear
    raw = b["train_x"][bad].astype(np.float64) / 255.0
    x[bad, 0] = (2.9e38 + 0.4e38 * raw).astype(np.float32)
    keep = np.setdiff1d(np.arange(len(x)), [bad])
    return {
        "": with_(b, train_x=x, test_x=test_x),
        "fixed": with_(b, train_x=x[keep], train_y=b["train_y"][keep], test_x=test_x),
    }


@scenario("label-offset", "labels 1..10 instead of 0..9 (train and test)")
def _label_offset(fashion):
    b = base_sample(fashion)
    return {"": with_(b, train_y=b["train_y"] + 1, test_y=b["test_y"] + 1), "fixed": b}


@scenario("label-out-of-range", "labels 0..9, but 1% of the training labels are 10")
def _label_out_of_range(fashion):
    b = base_sample(fashion)
    rng = np.random.default_rng(4)
    y = b["train_y"].copy()
    y[rng.choice(len(y), size=len(y) // 100, replace=False)] = 10
    return {"": with_(b, train_y=y), "fixed": b}


@scenario("labels-shuffled", "training labels permuted independently of the images (test labels correct)")
def _labels_shuffled(fashion):
    b = base_sample(fashion)
    rng = np.random.default_rng(5)
    return {"": with_(b, train_y=rng.permutation(b["train_y"])), "fixed": b}


@scenario("ordered-data-without-shuffle", "the training file sorted by label (class 0 first, class 9 last); "
          "the same images as the base sample")
def _ordered(fashion):
    b = base_sample(fashion)
    order = np.argsort(b["train_y"], kind="stable")
    return {"": with_(b, train_x=b["train_x"][order], train_y=b["train_y"][order]), "fixed": b}


@scenario("label-noise", "a quarter of the training labels (1750 of 7000) moved to another class at random; "
          "test labels correct")
def _label_noise(fashion):
    b = base_sample(fashion)
    rng = np.random.default_rng(11)
    y = b["train_y"].copy()
    moved = rng.choice(len(y), len(y) // 4, replace=False)
    y[moved] = (y[moved] + rng.integers(1, 10, len(moved))) % 10
    return {"": with_(b, train_y=y), "fixed": b}


@scenario("constant-labels", "every training label is 0 (test labels correct)")
def _constant_labels(fashion):
    b = base_sample(fashion)
    return {"": with_(b, train_y=np.zeros_like(b["train_y"])), "fixed": b}


@scenario("class-imbalance", "all 6000 training images of class 0, 1% of every other class "
          "(share of class 0: 0.917); balanced test set")
def _class_imbalance(fashion):
    tx, ty, _, _ = fashion
    b = base_sample(fashion)
    rng = np.random.default_rng(7)
    keep = [np.flatnonzero(ty == 0)]
    for c in range(1, 10):
        members = np.flatnonzero(ty == c)
        keep.append(rng.choice(members, size=len(members) // 100, replace=False))
    idx = rng.permutation(np.concatenate(keep))
    # drawn from all 60000 images, so check again for duplicates within and against the test set
    ti, seen = _unique_rows(tx[idx], len(idx))
    idx = idx[ti]
    test_hashes = [hashlib.sha1(img.tobytes()).digest() for img in b["test_x"]]
    si = np.asarray([i for i, h in enumerate(test_hashes) if h not in seen])
    return {"": with_(b, train_x=tx[idx].copy(), train_y=ty[idx].copy(), test_x=b["test_x"][si], test_y=b["test_y"][si])}


@scenario("repeated-batches", "the training file is the same 64 samples tiled 110 times (a broken export)")
def _repeated_batches(fashion):
    b = base_sample(fashion)
    reps = 110
    return {
        "": with_(b, train_x=np.tile(b["train_x"][:64], (reps, 1, 1)), train_y=np.tile(b["train_y"][:64], reps)),
        "fixed": b,
    }


@scenario("unnormalized-input", "float32 pixels 0..255 (to be trained with normalize = false)")
def _unnormalized_input(fashion):
    b = base_sample(fashion)
    f = lambda x: x.astype(np.float32)[:, None, :, :]
    return {"": with_(b, train_x=f(b["train_x"]), test_x=f(b["test_x"]))}


@scenario("train-test-leakage", "600 of the 2000 test samples (30%) copied into the training set")
def _train_test_leakage(fashion):
    b = base_sample(fashion)
    rng = np.random.default_rng(10)
    leaked = rng.choice(len(b["test_x"]), size=3 * len(b["test_x"]) // 10, replace=False)
    x = np.concatenate([b["train_x"], b["test_x"][leaked]])
    y = np.concatenate([b["train_y"], b["test_y"][leaked]])
    order = rng.permutation(len(x))
    return {"": with_(b, train_x=x[order], train_y=y[order]), "fixed": b}


# --------------------------------------------------------------------------------------------
# Image-folder scenarios: {subdir: {"files": {relative path: bytes}}}, written as files.

def png_gray(img):
    """An 8-bit gray PNG of a uint8 [H, W] array (zlib only: no imaging library needed)."""
    h, w = img.shape
    raw = b"".join(b"\x00" + img[r].tobytes() for r in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


CLASS_FOLDERS = ["t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]


def image_folder(b, n_train=3000, n_test=1000):
    """train/<class>/NNNNN.png and test/<class>/NNNNN.png of the base sample's first images."""
    files = {}
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            label = int(b[split + "_y"][i])
            files[f"{split}/{CLASS_FOLDERS[label]}/{i:05d}.png"] = png_gray(b[split + "_x"][i])
    return files


@scenario("image-train-test-leakage", "PNG folders; 300 of the 1000 test images also copied into train/ under new names")
def _image_train_test_leakage(fashion):
    b = base_sample(fashion)
    clean = image_folder(b)
    leaky = dict(clean)
    rng = np.random.default_rng(12)
    for j, i in enumerate(sorted(rng.choice(1000, size=300, replace=False))):
        label = int(b["test_y"][i])
        leaky[f"train/{CLASS_FOLDERS[label]}/copy-{j:04d}.png"] = clean[f"test/{CLASS_FOLDERS[label]}/{i:05d}.png"]
    return {"": {"files": leaky}, "fixed": {"files": clean}}


@scenario("image-near-duplicates", "PNG folders; 300 of the 1000 test images also in train/, re-exported: "
          "contrast x0.9, brightness +12, a little sensor noise (never byte-identical)")
def _image_near_duplicates(fashion):
    b = base_sample(fashion)
    clean = image_folder(b)
    leaky = dict(clean)
    rng = np.random.default_rng(13)
    for j, i in enumerate(sorted(rng.choice(1000, size=300, replace=False))):
        label = int(b["test_y"][i])
        x = b["test_x"][i].astype(np.float64) * 0.9 + 12 + rng.normal(0, 2, b["test_x"][i].shape)
        leaky[f"train/{CLASS_FOLDERS[label]}/export-{j:04d}.png"] = png_gray(np.clip(np.rint(x), 0, 255).astype(np.uint8))
    return {"": {"files": leaky}, "fixed": {"files": clean}}


@scenario("image-unreadable", "PNG folders; 150 of the 3000 training images cut short by a broken copy")
def _image_unreadable(fashion):
    b = base_sample(fashion)
    clean = image_folder(b)
    broken = dict(clean)
    rng = np.random.default_rng(13)
    for i in sorted(rng.choice(3000, size=150, replace=False)):
        key = f"train/{CLASS_FOLDERS[int(b['train_y'][i])]}/{i:05d}.png"
        broken[key] = broken[key][: len(broken[key]) // 2]
    return {"": {"files": broken}, "fixed": {"files": clean}}


@scenario("image-unnormalized", "PNG folders, fed to the model as raw 0..255 pixels by a Normalize of mean 0, std 1")
def _image_unnormalized(fashion):
    return {"": {"files": image_folder(base_sample(fashion))}}


# --------------------------------------------------------------------------------------------
# Writing


def script_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _save(path, array):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)
    os.replace(tmp, path)


def _check(name, sub, arrays):
    if "files" in arrays:
        return
    for key in ("train_y", "test_y"):
        if arrays[key].dtype != np.int64:
            raise LabError(f"internal: {name}/{sub or '.'}: {key} is {arrays[key].dtype}, expected int64")
    for split in ("train", "test"):
        if len(arrays[split + "_x"]) != len(arrays[split + "_y"]):
            raise LabError(f"internal: {name}/{sub or '.'}: {split}_x and {split}_y differ in length")


def _write_files(d, files):
    """An image folder: every file written (to a temporary name, then renamed), files of an earlier
    generation that the scenario no longer has removed, and .complete last."""
    marker = os.path.join(d, ".complete")
    if os.path.exists(marker):
        os.remove(marker)
    for split in ("train", "test"):
        root = os.path.join(d, split)
        for folder, _, names in os.walk(root):
            for n in names:
                rel = os.path.relpath(os.path.join(folder, n), d).replace(os.sep, "/")
                if rel not in files:
                    os.remove(os.path.join(folder, n))
    for rel, data in files.items():
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    open(marker, "w").close()


_FASHION = {}  # source folder -> the arrays, read once per process


def generate(name, out, source, force=False, quiet=False):
    if name not in SCENARIOS:
        known = ", ".join(sorted(SCENARIOS))
        raise LabError(f"unknown scenario \"{name}\" (scenarios with data: {known})")
    stamp_path = os.path.join(out, ".stamp")
    stamp = f"{script_hash()} {name}\n"
    fn, _ = SCENARIOS[name]
    # the stamp also lists the subfolders written ("" and, where the repair is data, "fixed")
    if not force and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            recorded = f.read()
        subs = [line.split("=", 1)[1] for line in recorded.splitlines()[1:] if line.startswith("sub=")]
        present = all(os.path.exists(os.path.join(out, s, n)) or os.path.exists(os.path.join(out, s, ".complete"))
                      for s in subs for n in FILES)
        if recorded.startswith(stamp) and subs and present:
            if not quiet:
                print(f"{name}: up to date ({out})")
            return
    if source not in _FASHION:
        _FASHION[source] = load_fashion(source)
    parts = fn(_FASHION[source])
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    for sub, arrays in parts.items():
        _check(name, sub, arrays)
        d = os.path.join(out, sub)
        os.makedirs(d, exist_ok=True)
        if "files" in arrays:
            _write_files(d, arrays["files"])
            continue
        for key in ("train_x", "train_y", "test_x", "test_y"):
            _save(os.path.join(d, key + ".npy"), arrays[key])
    with open(stamp_path + ".tmp", "w") as f:
        f.write(stamp)
        for sub in parts:
            f.write(f"sub={sub}\n")
    os.replace(stamp_path + ".tmp", stamp_path)
    if not quiet:
        sizes = ", ".join(
            f"{sub or '.'}: {len(a['files'])} image files" if "files" in a else
            f"{sub or '.'}: {len(a['train_y'])} train / {len(a['test_y'])} test {a['train_x'].dtype}"
            for sub, a in parts.items())
        print(f"{name}: wrote {out} ({sizes})")


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Generate the data of the lab's broken setups (docs/lab.md).")
    p.add_argument("name", nargs="?", help="the scenario (a directory under lab/)")
    p.add_argument("--all", action="store_true", help="every scenario that has data, into lab/NAME/data")
    p.add_argument("--list", action="store_true", help="list the scenarios with data and exit")
    p.add_argument("--out", help="output folder (default: lab/NAME/data)")
    p.add_argument("--source", default=DEFAULT_SOURCE, help=f"Fashion-MNIST folder (default: {DEFAULT_SOURCE})")
    p.add_argument("--force", action="store_true", help="rewrite even when up to date")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    a = p.parse_args(argv)
    try:
        if a.list:
            for n, (_, summary) in SCENARIOS.items():
                print(f"{n:24} {summary}")
            return 0
        if a.all == (a.name is not None):
            raise LabError("give one scenario NAME or --all (see --list)")
        if a.all and a.out:
            raise LabError("--out applies to one scenario; --all writes lab/NAME/data")
        names = list(SCENARIOS) if a.all else [a.name]
        for n in names:
            generate(n, a.out or os.path.join(LAB, n, "data"), a.source, a.force, a.quiet)
    except LabError as e:
        print(f"make_data: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"make_data: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
