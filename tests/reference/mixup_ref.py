"""timm 1.0.31's Mixup / CutMix: the reference for glassbox's data/mixup (mixup_test.cpp, nn_test.cpp).

  mixup_ref.py parity DIR    # DIR/cases.json + DIR/<id>_x.npy -> DIR/<id>_out.npy, DIR/<id>_target.npy
  mixup_ref.py beta DIR      # DIR/beta_<alpha>.npy (glassbox's draws) -> KS p-values vs numpy's beta, JSON
  mixup_ref.py targets DIR   # DIR/targets.json -> timm's mixup_target for each case, JSON

parity replays glassbox's draws through timm: numpy's rand/beta/randint are replaced by functions
returning what glassbox drew (the prob and switch tests as 0 or 0.999999, the Beta draws, the
CutMix box draws), then timm's Mixup(...)(x, target) runs unchanged; its mixed batch and soft
targets are written for the C++ side to compare.
"""
import json
import sys
from pathlib import Path

import numpy as np
import scipy.stats
import torch

import timm
from timm.data import mixup as tm

assert timm.__version__ == "1.0.31", f"timm {timm.__version__}, the reference needs 1.0.31"

PASS, FAIL = 0.0, 0.999999


class Replay:
    """Stands in for np.random inside timm.data.mixup, answering with glassbox's draws."""

    def __init__(self, case):
        self.case = case
        self.draws = case["draws"]
        self.mode = case["mode"]
        self.both = case["kwargs"].get("mixup_alpha", 1.0) > 0 and (
            case["kwargs"].get("cutmix_alpha", 0.0) > 0 or case["kwargs"].get("cutmix_minmax") is not None)
        self.rand_calls = 0
        self.box = [v for d in self.draws if d["mixed"] and d["cutmix"] for v in d["box_draws"]]

    def rand(self, size=None):
        if self.mode == "batch":
            d = self.draws[0]
            # first call: the prob test; second (both enabled): the switch test
            k = self.rand_calls
            self.rand_calls += 1
            if k == 0:
                return PASS if d["mixed"] else FAIL
            return PASS if d["cutmix"] else FAIL
        # elem / pair: rand(n) for the switch (when both), then rand(n) for the prob test
        k = self.rand_calls
        self.rand_calls += 1
        if self.both and k == 0:
            return np.array([PASS if d["cutmix"] else FAIL for d in self.draws])
        return np.array([PASS if d["mixed"] else FAIL for d in self.draws])

    def beta(self, a, b, size=None):
        if size is None:
            return self.draws[0]["lam"]
        return np.array([d["lam"] for d in self.draws])

    def randint(self, low, high=None, size=None):
        v = self.box.pop(0)
        assert low <= v < high, (low, v, high)
        return v


def parity(d):
    cases = json.loads((d / "cases.json").read_text())
    for case in cases:
        x = torch.from_numpy(np.load(d / f"{case['id']}_x.npy"))
        target = torch.tensor(case["targets"])
        kwargs = dict(case["kwargs"])
        mixer = tm.Mixup(mode=case["mode"], label_smoothing=case["smoothing"], num_classes=case["num_classes"],
                         **kwargs)
        replay = Replay(case)
        saved = tm.np.random
        tm.np.random = replay
        try:
            out, soft = mixer(x.clone(), target)
        finally:
            tm.np.random = saved
        np.save(d / f"{case['id']}_out.npy", out.numpy())
        np.save(d / f"{case['id']}_target.npy", soft.numpy())


def beta(d):
    out = {}
    rng = np.random.default_rng(3)
    for f in sorted(d.glob("beta_*.npy")):
        alpha = float(f.stem.split("_")[1])
        ours = np.load(f)
        ref = rng.beta(alpha, alpha, size=len(ours))
        out[f.stem] = scipy.stats.ks_2samp(ours, ref).pvalue
    return out


def targets(d):
    out = []
    for case in json.loads((d / "targets.json").read_text()):
        t = torch.tensor(case["targets"])
        lam = torch.tensor(case["lam"], dtype=torch.float32).unsqueeze(1) if isinstance(case["lam"], list) else case["lam"]
        out.append(tm.mixup_target(t, case["num_classes"], lam, case["smoothing"]).tolist())
    return out


def main():
    cmd, d = sys.argv[1], Path(sys.argv[2])
    if cmd == "parity":
        parity(d)
    elif cmd == "beta":
        json.dump(beta(d), sys.stdout)
    elif cmd == "targets":
        json.dump(targets(d), sys.stdout)
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
