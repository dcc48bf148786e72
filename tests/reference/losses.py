"""Reference values for glassbox's losses, computed with Python PyTorch.

Prints JSON: the inputs (logits, targets) and, for each case, the options and PyTorch's loss.
The focal loss is the usual definition written with torch.nn.functional; the soft-target
(MixUp/CutMix) values are timm's; "real" holds the regression and multi-label losses.
"""
import json

import torch
import torch.nn.functional as F

torch.manual_seed(0)
logits = (torch.randn(13, 5, dtype=torch.float64) * 3).float()
targets = torch.randint(0, 5, (13,))
weights = [0.5, 2.0, 1.0, 3.0, 0.25]


def focal(x, y, alpha, gamma, reduction):
    ce = F.cross_entropy(x, y, reduction="none")
    pt = torch.exp(-ce)
    loss = alpha * (1 - pt) ** gamma * ce
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


cases = []
for ls in (0.0, 0.1):
    for w in (None, weights):
        for red in ("mean", "sum", "none"):
            v = F.cross_entropy(logits, targets, weight=None if w is None else torch.tensor(w), label_smoothing=ls, reduction=red)
            cases.append({"name": "cross_entropy", "label_smoothing": ls, "class_weights": w or [], "reduction": red,
                          "value": v.reshape(-1).tolist()})
for alpha, gamma in ((1.0, 2.0), (0.75, 2.0), (0.25, 0.0), (1.0, 3.5)):
    for red in ("mean", "sum", "none"):
        v = focal(logits, targets, alpha, gamma, red)
        cases.append({"name": "focal", "alpha": alpha, "gamma": gamma, "reduction": red, "value": v.reshape(-1).tolist()})

# MixUp/CutMix batches: timm's soft targets (mixup_target, smoothing 0.1) and its
# SoftTargetCrossEntropy; focal on the soft cross-entropy.
from timm.data.mixup import mixup_target  # noqa: E402
from timm.loss import SoftTargetCrossEntropy  # noqa: E402

lam = torch.linspace(0.05, 1.0, 13, dtype=torch.float32)
soft = mixup_target(targets, 5, lam.unsqueeze(1), 0.1)
soft_ce = SoftTargetCrossEntropy()(logits, soft)
ce_rows = torch.sum(-soft * F.log_softmax(logits, dim=-1), dim=-1)
soft_focal = (0.75 * (1 - torch.exp(-ce_rows)) ** 2.0 * ce_rows).mean()
mixed = {"lam": lam.tolist(), "smoothing": 0.1, "soft_targets": soft.tolist(), "cross_entropy": soft_ce.item(),
         "focal_alpha_0.75_gamma_2": soft_focal.item()}

# Regression and multi-label: F.mse_loss, F.l1_loss, F.huber_loss and
# F.binary_cross_entropy_with_logits on [13, 3] outputs.
outputs = (torch.randn(13, 3, dtype=torch.float64) * 2).float()
values = (torch.randn(13, 3, dtype=torch.float64) * 2).float()
bits = (torch.rand(13, 3) < 0.4).float()
real = []
for red in ("mean", "sum", "none"):
    real.append({"name": "mse", "reduction": red, "targets": "values",
                 "value": F.mse_loss(outputs, values, reduction=red).reshape(-1).tolist()})
    real.append({"name": "mae", "reduction": red, "targets": "values",
                 "value": F.l1_loss(outputs, values, reduction=red).reshape(-1).tolist()})
    for delta in (1.0, 0.5):
        real.append({"name": "huber", "delta": delta, "reduction": red, "targets": "values",
                     "value": F.huber_loss(outputs, values, reduction=red, delta=delta).reshape(-1).tolist()})
    for pw in (None, [0.5, 2.0, 3.0]):
        v = F.binary_cross_entropy_with_logits(outputs, bits, reduction=red,
                                               pos_weight=None if pw is None else torch.tensor(pw))
        real.append({"name": "bce", "pos_weight": pw or [], "reduction": red, "targets": "bits",
                     "value": v.reshape(-1).tolist()})

print(json.dumps({"logits": logits.tolist(), "targets": targets.tolist(), "cases": cases, "mixed": mixed,
                  "real": {"outputs": outputs.tolist(), "values": values.tolist(), "bits": bits.tolist(),
                           "cases": real}}))
