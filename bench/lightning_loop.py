"""Anchor for `glassbox bench train`: the same loop under PyTorch Lightning's Trainer.

Logging, checkpointing, progress bar and model summary are off (Lightning's barebones-like
setup), so the figure is Lightning's own loop overhead on top of PyTorch. Prints {"sps": ...}.
Takes python_loop.py's options (--model, --input, --samples, --fused; not --compile or --repeats).
"""
import json
import logging
import time
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import pytorch_lightning as pl

from python_loop import build_model, make_optimizer, parse_args, synthetic


class Task(pl.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.model = build_model(args.model, args.input_shape)
        self.fused = args.fused
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(self, batch, batch_idx):
        xb, yb = batch
        return self.loss_fn(self.model(xb), yb)

    def configure_optimizers(self):
        return make_optimizer(self.parameters(), self.fused)


class Clock(pl.Callback):
    def __init__(self, warmup):
        self.warmup, self.t0, self.count = warmup, None, 0

    def on_train_batch_end(self, trainer, *args):
        self.count += 1
        if self.count == self.warmup:
            self.t0 = time.perf_counter()


def main():
    args = parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.set_num_threads(args.threads)
    x, y = synthetic(args)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True, num_workers=0)
    clock = Clock(args.warmup)
    trainer = pl.Trainer(max_steps=args.warmup + args.steps, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0, callbacks=[clock])
    trainer.fit(Task(args), loader)
    dt = time.perf_counter() - clock.t0
    steps = clock.count - args.warmup
    print(json.dumps({"sps": steps * args.batch_size / dt, "seconds": dt, "lightning": pl.__version__}))


if __name__ == "__main__":
    main()
