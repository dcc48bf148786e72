"""PyTorch Lightning 2.6's learning-rate finder: the reference for glassbox's (train/lr_finder_test.cpp).

  lr_finder_ref.py FILE.json    # {"runs": [...], "suggest": [...], "smooth": [...]} -> the same keys, answered

runs: [{min_lr, max_lr, num, mode, threshold}] -> Tuner.lr_find on a small model: its lrs, losses, suggestion;
suggest: [{lrs, losses}] -> _LRFinder.suggestion()'s index for each;
smooth: [{raw, threshold}] -> _LRCallback's smoothed losses and the step it stopped at.

suggest and smooth feed Lightning's own code the same numbers glassbox sees: _LRFinder with its
results set, and _LRCallback's on_train_batch_end with a stand-in trainer (global_step,
accumulate_grad_batches 1, should_stop).
"""
import json
import math
import sys
import warnings
from types import SimpleNamespace

import torch

import pytorch_lightning as pl
from pytorch_lightning.tuner import Tuner
from pytorch_lightning.tuner.lr_finder import _LRCallback, _LRFinder

from ref_common import clean

assert pl.__version__.startswith("2.6"), f"pytorch_lightning {pl.__version__}, the reference needs 2.6"


class Small(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
        self.lr = 1e-3

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def run(min_lr, max_lr, num, mode, threshold):
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, max_epochs=100, default_root_dir="/tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = Tuner(trainer).lr_find(Small(), train_dataloaders=loader, min_lr=min_lr, max_lr=max_lr,
                                   num_training=num, mode=mode, early_stop_threshold=threshold)
    f.suggestion()
    return {"lrs": f.results["lr"], "losses": f.results["loss"], "suggestion": f._optimal_idx}


def suggest(cases):
    out = []
    for c in cases:
        f = _LRFinder("exponential", 1e-8, 1.0, len(c["lrs"]))
        f.results = {"lr": c["lrs"], "loss": [math.nan if v is None else v for v in c["losses"]]}
        f.suggestion()
        out.append(f._optimal_idx)
    return out


def smooth(cases):
    out = []
    for c in cases:
        cb = _LRCallback(num_training=len(c["raw"]), early_stop_threshold=c["threshold"])
        trainer = SimpleNamespace(fit_loop=SimpleNamespace(batch_idx=0), accumulate_grad_batches=1, global_step=0,
                                  should_stop=False, strategy=SimpleNamespace(broadcast=lambda v: v))
        stop = None
        for i, raw in enumerate(c["raw"]):
            trainer.global_step = i + 1
            cb.on_train_batch_end(trainer, None, torch.tensor(raw, dtype=torch.float64), None, i)
            if trainer.should_stop:
                stop = i
                break
        out.append({"smoothed": cb.losses, "stop": stop})
    return out


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    res = {
        "runs": [run(r["min_lr"], r["max_lr"], r["num"], r["mode"], r["threshold"]) for r in req.get("runs", [])],
        "suggest": suggest(req.get("suggest", [])),
        "smooth": smooth(req.get("smooth", [])),
    }
    print(json.dumps(clean(res)))


if __name__ == "__main__":
    main()
