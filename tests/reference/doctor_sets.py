"""Data sets for the doctor's variations beyond lab/: scikit-learn's bundled sets and synthetic
ones of several sizes and class balances, healthy or with a fault planted in the data.

    .venv/bin/python tests/reference/doctor_sets.py --out DIR

Writes DIR/<name>/{train_x,train_y,test_x,test_y}.npy (float32 inputs, int64 labels; glassbox's
`format = "npy"`) for every set below and prints {"sets": {name: {"train": n, "test": n,
"features": f, "classes": k}}}. Every random choice has a fixed seed.
"""
import argparse
import json
import os

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine, make_classification, make_moons
from sklearn.model_selection import train_test_split


def split(x, y, test=0.25, seed=0, stratify=True):
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=test, random_state=seed, stratify=y if stratify else None)
    return [xtr.astype(np.float32), ytr.astype(np.int64), xte.astype(np.float32), yte.astype(np.int64)]


def base_sets():
    """The healthy sets: (name, [train_x, train_y, test_x, test_y])."""
    out = {}
    for name, loader in (("iris", load_iris), ("wine", load_wine), ("breast_cancer", load_breast_cancer),
                         ("digits", load_digits)):
        x, y = loader(return_X_y=True)
        out[name] = split(x, y)
    x, y = load_digits(return_X_y=True)
    d = split(x, y)
    out["digits_images"] = [d[0].reshape(-1, 1, 8, 8), d[1], d[2].reshape(-1, 1, 8, 8), d[3]]
    x, y = make_classification(n_samples=400, n_features=10, n_informative=5, n_classes=2, random_state=1)
    out["small_binary"] = split(x, y)
    x, y = make_classification(n_samples=4000, n_features=20, n_informative=10, n_classes=5, random_state=2)
    out["five_classes"] = split(x, y)
    x, y = make_classification(n_samples=2000, n_features=12, n_informative=6, n_classes=2, weights=[0.9, 0.1],
                               random_state=3)
    out["imbalanced_90_10"] = split(x, y)
    x, y = make_classification(n_samples=1500, n_features=16, n_informative=8, n_classes=3, weights=[0.7, 0.2, 0.1],
                               random_state=4)
    out["imbalanced_70_20_10"] = split(x, y)
    x, y = make_classification(n_samples=800, n_features=50, n_informative=6, n_redundant=4, n_classes=4,
                               random_state=5)
    out["many_features"] = split(x, y)
    x, y = make_classification(n_samples=3000, n_features=8, n_informative=4, n_redundant=0, n_classes=2,
                               weights=[0.97, 0.03], class_sep=1.0, flip_y=0, random_state=8)
    out["imbalanced_97_3_hard"] = split(x, y)
    x, y = make_moons(n_samples=1200, noise=0.2, random_state=6)
    out["moons"] = split(x, y)
    return out


def faulty_sets(base):
    rng = np.random.default_rng(7)
    out = {}
    xtr, ytr, xte, yte = base["wine"]
    out["wine_shuffled"] = [xtr, rng.permutation(ytr), xte, yte]
    xtr, ytr, xte, yte = base["breast_cancer"]
    out["breast_cancer_offset"] = [xtr, ytr + 1, xte, yte + 1]
    xtr, ytr, xte, yte = base["digits"]
    noisy = ytr.copy()
    moved = rng.choice(len(noisy), int(0.35 * len(noisy)), replace=False)
    noisy[moved] = (noisy[moved] + rng.integers(1, 10, len(moved))) % 10
    out["digits_label_noise"] = [xtr, noisy, xte, yte]
    order = np.argsort(ytr, kind="stable")
    out["digits_sorted"] = [xtr[order], ytr[order], xte, yte]
    near = xte.copy()
    picks = rng.choice(len(xtr), 90, replace=False)
    near[:90] = xtr[picks] * (1 + rng.normal(0, 0.01, xtr[picks].shape)).astype(np.float32)  # re-exported: 1 % jitter
    yn = yte.copy()
    yn[:90] = ytr[picks]
    out["digits_near_duplicates"] = [xtr, ytr, near, yn]
    xtr, ytr, xte, yte = base["five_classes"]
    bad = xtr.copy()
    bad[[5, 500, 1500], 3] = np.nan
    out["five_classes_nan"] = [bad, ytr, xte, yte]
    out["five_classes_constant"] = [xtr, np.zeros_like(ytr), xte, yte]
    out["five_classes_tiled"] = [np.tile(xtr[:40], (40, 1)), np.tile(ytr[:40], 40), xte, yte]
    wrong = ytr.copy()
    wrong[rng.choice(len(wrong), len(wrong) // 50, replace=False)] = 5  # 2 % labelled 5 in a 5-class set
    out["five_classes_out_of_range"] = [xtr, wrong, xte, yte]
    xtr, ytr, xte, yte = base["many_features"]
    leak = np.concatenate([xtr, xte[:60]])
    out["many_features_leak"] = [leak, np.concatenate([ytr, yte[:60]]), xte, yte]
    x, y = load_wine(return_X_y=True)  # raw scale: proline up to 1680, the rest near 1
    out["wine_raw"] = split(x * 1.0, y)
    xtr, ytr, xte, yte = base["small_binary"]
    big = xtr.copy()
    big[17] = 3e38
    out["small_binary_outlier"] = [big, ytr, xte, yte]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    base = base_sets()
    sets = dict(base)
    sets.update(faulty_sets(base))
    info = {}
    for name, (xtr, ytr, xte, yte) in sets.items():
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        for fname, arr in (("train_x", xtr), ("train_y", ytr), ("test_x", xte), ("test_y", yte)):
            np.save(os.path.join(d, fname + ".npy"), np.ascontiguousarray(arr))
        info[name] = {"train": int(len(ytr)), "test": int(len(yte)), "features": int(np.prod(xtr.shape[1:])),
                      "classes": int(max(ytr.max(), yte.max()) + 1)}
    print(json.dumps({"sets": info}))


if __name__ == "__main__":
    main()
