"""torchvision 0.24's (and timm's) models: the reference for glassbox's zoo (nn/zoo_test.cpp).

  zoo_ref.py DIR CASE...     # CASE: a name from CASES; writes DIR/<case>/weights.safetensors and io.safetensors

For each case the model is built by torchvision (or timm) with seeded, randomised weights (every
tensor, BatchNorm running statistics included, so that eval mode reads them) and saved with
safetensors.torch.save_file(model.state_dict()) — the file a user converts torchvision's weights
into. io.safetensors holds a seeded input batch x and labels y, the eval-mode logits, and, for one
training step (torch.manual_seed(SEED), train-mode forward, cross-entropy, backward, SGD lr 0.1),
the train-mode logits, the loss and every tensor of the state_dict afterwards ("after.<name>");
x.npy and y.npy hold the batch as a data set.
Prints a JSON object {case: {"parameters": n, "tensors": n, "image": [C, H, W], "classes": k}}.
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torchvision
from safetensors.torch import save_file
from torchvision.models import vision_transformer as tv_vit

assert torchvision.__version__.startswith("0.24"), f"torchvision {torchvision.__version__}, the reference needs 0.24"

SEED = 1234
CLASSES = 10


def vit(**kw):
    return tv_vit.VisionTransformer(num_classes=CLASSES, **kw)


def timm_model(name, **kw):
    import timm
    return timm.create_model(name, pretrained=False, num_classes=CLASSES, **kw)


# name -> (builder, image shape [C, H, W])
CASES = {
    "resnet18": (lambda: torchvision.models.resnet18(num_classes=CLASSES), [3, 64, 64]),
    "resnet34": (lambda: torchvision.models.resnet34(num_classes=CLASSES), [3, 64, 64]),
    "resnet50": (lambda: torchvision.models.resnet50(num_classes=CLASSES), [3, 64, 64]),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(num_classes=CLASSES), [3, 64, 64]),
    "mobilenet_v3_large": (lambda: torchvision.models.mobilenet_v3_large(num_classes=CLASSES), [3, 64, 64]),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(num_classes=CLASSES), [3, 64, 64]),
    "efficientnet_b1": (lambda: torchvision.models.efficientnet_b1(num_classes=CLASSES), [3, 64, 64]),
    "efficientnet_b2": (lambda: torchvision.models.efficientnet_b2(num_classes=CLASSES), [3, 64, 64]),
    "efficientnet_b3": (lambda: torchvision.models.efficientnet_b3(num_classes=CLASSES), [3, 64, 64]),
    "vit_b_16": (lambda: torchvision.models.vit_b_16(num_classes=CLASSES), [3, 224, 224]),
    "vit_small": (lambda: vit(image_size=32, patch_size=4, num_layers=6, num_heads=3, hidden_dim=192, mlp_dim=768),
                  [3, 32, 32]),
    "vit_hybrid": (lambda: vit(image_size=32, patch_size=4, num_layers=6, num_heads=3, hidden_dim=192, mlp_dim=768,
                               conv_stem_configs=[tv_vit.ConvStemConfig(64, 3, 2), tv_vit.ConvStemConfig(128, 3, 2)]),
                   [3, 32, 32]),
    # timm's names, mapped by glassbox to torchvision's
    # without dropout and drop path (timm draws them in another order)
    "timm_efficientnet_b0": (lambda: timm_model("efficientnet_b0", drop_rate=0.0, drop_path_rate=0.0), [3, 64, 64]),
    "timm_vit_small": (lambda: timm_model("vit_tiny_patch16_224", img_size=32, patch_size=4, depth=6, num_heads=3,
                                          embed_dim=192), [3, 32, 32]),
}


def randomise(model, gen):
    """Every floating tensor away from its (often zero or one) initialisation."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if not t.is_floating_point():
                continue
            if name.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=gen) + 0.5)
            elif name.endswith("running_mean") or name.endswith(".bias"):
                t.copy_(0.1 * torch.randn(t.shape, generator=gen))
            elif t.dim() == 1:  # norm weights
                t.copy_(1 + 0.1 * torch.randn(t.shape, generator=gen))
            else:
                fan_in = max(1, t[0].numel()) if t.dim() > 1 else 1
                t.copy_(torch.randn(t.shape, generator=gen) / fan_in ** 0.5)


def run(case, out):
    builder, shape = CASES[case]
    torch.manual_seed(0)
    model = builder()
    gen = torch.Generator().manual_seed(7)
    randomise(model, gen)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.clone().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / "weights.safetensors"))
    x = torch.randn([4] + shape, generator=gen)
    y = torch.randint(0, CLASSES, (4,), generator=gen)
    io = {"x": x, "y": y}
    model.eval()
    with torch.no_grad():
        io["eval_out"] = model(x)
    model.train()
    torch.manual_seed(SEED)
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    io["train_out"] = logits.detach()
    io["loss"] = loss.detach().reshape(1)
    for k, v in model.state_dict().items():
        io["after." + k] = v.clone().contiguous()
    save_file(io, str(out / "io.safetensors"))
    np.save(out / "x.npy", x.numpy())  # the same batch as a data set, for configs
    np.save(out / "y.npy", y.numpy())
    return {"parameters": sum(p.numel() for p in model.parameters()), "tensors": len(state), "image": shape,
            "classes": CLASSES}


def main():
    out = Path(sys.argv[1])
    torch.set_num_threads(2)
    report = {case: run(case, out / case) for case in sys.argv[2:]}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
