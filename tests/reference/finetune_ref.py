"""PyTorch Lightning's BackboneFinetuning on a small model: the learning rate of every optimiser
group at the start of each epoch, as the LightningModule sees it (after the callback ran).

    finetune_ref.py
Prints JSON: {"cases": [{epochs, unfreeze_at, ratio, multiplier, align, lr,
                         "lrs": [[group lrs at epoch 0], [epoch 1], ...]}, ...]} for CASES, with SGD.
"""
import json
import logging
import warnings

import torch
from torch import nn

import pytorch_lightning as pl
from pytorch_lightning.callbacks import BackboneFinetuning


class Model(pl.LightningModule):
    def __init__(self, lr):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)
        self.lr = lr
        self.seen = []

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def on_train_epoch_start(self):
        self.seen.append([g["lr"] for g in self.trainer.optimizers[0].param_groups])

    def configure_optimizers(self):
        return torch.optim.SGD(filter(lambda p: p.requires_grad, self.parameters()), lr=self.lr)


CASES = [  # (epochs, unfreeze at, ratio, multiplier, align)
    (6, 2, 0.1, 1.5, True),
    (6, 1, 0.5, 1.5, True),   # reaches the first group's lr: aligned from epoch 3
    (5, 1, 0.5, 1.5, False),  # not aligned: grows past it
]


def run(epochs, unfreeze_at, ratio, multiplier, align, lr=0.1):
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randint(0, 4, (64,)))
    model = Model(lr)
    cb = BackboneFinetuning(unfreeze_backbone_at_epoch=unfreeze_at, lambda_func=lambda _: multiplier,
                            backbone_initial_ratio_lr=ratio, should_align=align, verbose=False)
    trainer = pl.Trainer(max_epochs=epochs, callbacks=[cb], accelerator="cpu", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=16))
    return model.seen


def main():
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    out = []
    for epochs, at, ratio, mult, align in CASES:
        out.append({"epochs": epochs, "unfreeze_at": at, "ratio": ratio, "multiplier": mult, "align": align,
                    "lr": 0.1, "lrs": run(epochs, at, ratio, mult, align)})
    print(json.dumps({"cases": out}))


if __name__ == "__main__":
    main()
