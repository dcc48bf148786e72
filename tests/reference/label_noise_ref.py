"""Reference confident-learning figures (cleanlab) for glassbox's label-noise estimate.

    .venv/bin/python tests/reference/label_noise_ref.py --labels L.npy --probs P.npy
    .venv/bin/python tests/reference/label_noise_ref.py --make-digits OUT_DIR --noise 0.2

With --labels/--probs (L.npy: int64 [N] given labels; P.npy: float64 [N, K] out-of-sample
probabilities) it prints one JSON object:

  versions                {cleanlab, numpy}
  thresholds              [K]      cleanlab.count.get_confident_thresholds
  confident_joint         [K][K]   compute_confident_joint(calibrate=False)
  calibrated_joint        [K][K]   compute_confident_joint(calibrate=True)
  off_diagonal            [..]     indices from compute_confident_joint(return_indices_of_off_diagonals=True)
  num_issues_calibrated   int      num_label_issues(estimation_method="off_diagonal_calibrated")
  noise_rate              float    1 - trace(estimate_joint(...))

With --make-digits it writes L.npy and P.npy for scikit-learn's bundled digits, with a share
`--noise` of the labels moved to another class (seed 0), and P the 5-fold cross-validated
probabilities of a logistic regression on the noisy labels; it prints {"flipped": [...]}.
"""
import argparse
import json

import numpy as np


def make_digits(out, noise):
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_predict

    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    flipped = np.sort(rng.choice(len(y), int(noise * len(y)), replace=False))
    noisy = y.copy()
    noisy[flipped] = (y[flipped] + rng.integers(1, 10, len(flipped))) % 10
    model = LogisticRegression(max_iter=2000)
    p = cross_val_predict(model, x / 16.0, noisy, cv=5, method="predict_proba")
    np.save(f"{out}/y.npy", noisy.astype(np.int64))
    np.save(f"{out}/p.npy", p.astype(np.float64))
    print(json.dumps({"flipped": flipped.tolist()}))


def reference(labels_path, probs_path):
    import cleanlab
    from cleanlab.count import compute_confident_joint, estimate_joint, get_confident_thresholds, num_label_issues

    y = np.load(labels_path)
    p = np.load(probs_path)
    cj, off = compute_confident_joint(y, p, calibrate=False, return_indices_of_off_diagonals=True)
    cal = compute_confident_joint(y, p, calibrate=True)
    joint = estimate_joint(y, p, confident_joint=compute_confident_joint(y, p, calibrate=False))
    print(json.dumps({
        "versions": {"cleanlab": cleanlab.__version__, "numpy": np.__version__},
        "thresholds": get_confident_thresholds(y, p).tolist(),
        "confident_joint": cj.tolist(),
        "calibrated_joint": cal.tolist(),
        "off_diagonal": [int(i) for i in off],
        "num_issues_calibrated": int(num_label_issues(y, p, estimation_method="off_diagonal_calibrated")),
        "noise_rate": float(1.0 - np.trace(joint)),
    }))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--labels")
    ap.add_argument("--probs")
    ap.add_argument("--make-digits")
    ap.add_argument("--noise", type=float, default=0.2)
    a = ap.parse_args()
    if a.make_digits:
        make_digits(a.make_digits, a.noise)
    else:
        reference(a.labels, a.probs)


if __name__ == "__main__":
    main()
