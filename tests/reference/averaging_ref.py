"""timm's ModelEmaV2 / ModelEmaV3 and torch.optim.swa_utils: the reference for glassbox's weight
averaging (train/averaging_test.cpp).

  averaging_ref.py IN.safetensors OUT.safetensors

IN holds a sequence of weights for Sequential(Linear(6, 8), BatchNorm1d(8), ReLU, Linear(8, 3)) as
"s<k>.<name>" (k = 0 .. K-1, every tensor of the state_dict) and a batch "bn_batch.<i>" list for
update_bn. The model starts at s0; each later snapshot is loaded and fed to ModelEmaV2(decay 0.9),
ModelEmaV3(decay 0.999, use_warmup, step k) and AveragedModel.update_parameters; then update_bn runs
over the batches on the averaged model. OUT holds "ema2.<name>", "ema3.<name>", "swa.<name>".
"""
import sys

import torch
from safetensors.torch import load_file, save_file
from timm.utils.model_ema import ModelEmaV2, ModelEmaV3
from torch.optim.swa_utils import AveragedModel, update_bn


def main():
    data = load_file(sys.argv[1])
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    names = list(model.state_dict().keys())
    k_max = max(int(k.split(".")[0][1:]) for k in data if k.startswith("s"))

    def load(k):
        model.load_state_dict({n: data[f"s{k}.{n}"] for n in names})

    load(0)
    ema2 = ModelEmaV2(model, decay=0.9)
    ema3 = ModelEmaV3(model, decay=0.999, use_warmup=True)
    swa = AveragedModel(model)
    swa.update_parameters(model)
    for k in range(1, k_max + 1):
        load(k)
        ema2.update(model)
        ema3.update(model, step=k)
        swa.update_parameters(model)
    batches = [data[k] for k in sorted((k for k in data if k.startswith("bn_batch.")), key=lambda s: int(s.split(".")[1]))]
    update_bn(batches, swa)
    out = {}
    for n, v in ema2.module.state_dict().items():
        out[f"ema2.{n}"] = v.contiguous()
    for n, v in ema3.module.state_dict().items():
        out[f"ema3.{n}"] = v.contiguous()
    for n, v in swa.module.state_dict().items():
        out[f"swa.{n}"] = v.contiguous()
    save_file(out, sys.argv[2])


if __name__ == "__main__":
    main()
