"""Reference Grad-CAM / Grad-CAM++ maps from pytorch-grad-cam for glassbox's zoo models.

    .venv/bin/python tests/reference/gradcam_ref.py --arch cnn|resnet18 --model-json M.json \
        --weights model.safetensors --inputs X.npy [--targets T.npy] --method gradcam|gradcam++|scorecam \
        --layer NAME --out cams.npy [--raw] [--logits-out Y.npy] [--weights-out W.npy] [--no-clone]

M.json: {"input_shape": [C, H, W], "num_classes": K, ...the arch's options}, the options under the
keys of glassbox's [model.cnn] / [model.resnet18] sections, either flat or nested under "cnn" /
"resnet18" (or "model": {"cnn": {...}}); missing options take glassbox's defaults:
  cnn:      channels [32, 64], convs_per_stage 2, kernel_size 3, norm "batchnorm"|"groupnorm"|"none",
            groups 8, bn_momentum 0.1, hidden 128, dropout 0.25
  resnet18: stem "small"|"imagenet", width 64, zero_init_residual, bn_momentum 0.1
The model mirrors glassbox/nn/cnn.cpp and resnet.cpp with the same parameter and buffer names, and
the weights load with load_state_dict(safetensors.torch.load_file(path), strict=True).
  cnn:      features = Sequential(conv{s}_{c}, bn{s}_{c} | gn{s}_{c}, relu{s}_{c}, ..., pool{s}, ...),
            classifier = Sequential(flatten, [fc, relu], [drop], out)
  resnet18: torchvision.models.resnet18(num_classes=K) with conv1 = Conv2d(C, 64, 3, 1, 1) and
            maxpool = Identity for stem "small" (Conv2d(C, 64, 7, 2, 3) + torchvision's maxpool for
            "imagenet"); for width != 64 the same layout is built from torchvision's BasicBlock.
X.npy: float32 [N, C, H, W]; T.npy: int [N] target class per sample (ClassifierOutputTarget(t));
without --targets pytorch-grad-cam takes the argmax logit of each sample. NAME: a module path
resolved with model.get_submodule, e.g. "features.relu1_1", "layer4", "layer4.1", "layer3.0.conv2".
--out: float32 [N, H, W], what GradCAM(...)(x, targets) returns. --raw: float32 [N, h, w] at the
layer's resolution, the map after ReLU and ONE min-max normalisation, before any resize
(computed by running the library's own pieces — ActivationsAndGradients, get_cam_image,
scale_cam_image — in BaseCAM.forward's order, stopping before the resize). --logits-out: float32
[N, K] model outputs; --weights-out: float32 [N, C_layer] channel weights of the method.
Prints a JSON summary (shapes, layer, targets used, output paths). CPU, float32, like glassbox.

What pytorch-grad-cam 1.5.7 does (read from its source, base_cam.py, grad_cam.py,
grad_cam_plusplus.py, activations_and_gradients.py, utils/image.py):
 1. BaseCAM.__init__ calls model.eval() (BatchNorm uses running statistics, Dropout is off) and
    registers two forward hooks on each target layer: one stores output.cpu().detach() (on CPU a
    view of the SAME storage), one registers a tensor hook on the output that stores dy/d(output).
 2. forward(x, targets): one forward pass of the whole batch; targets None -> argmax of each output
    row; model.zero_grad(); loss = Σ_i target_i(outputs[i]) where ClassifierOutputTarget(c) returns
    the raw logit outputs[i, c] (no softmax); loss.backward(retain_graph=True). In eval mode the
    samples are independent, so the batch gives each sample's own ∂y_{i,t_i}/∂A_i.
 3. A (activations) and G (gradients) become numpy float32 [N, C, h, w]; all later arithmetic is
    numpy float32 (Python-float epsilons do not promote under NumPy 2 rules).
      Grad-CAM:   w[n,c] = mean_{i,j} G[n,c,i,j]                         (np.mean over axes 2,3)
      Grad-CAM++: g2 = G**2; g3 = g2*G; S[n,c] = Σ_{i,j} A[n,c,i,j]   (the sum of the ACTIVATIONS)
                  a = g2 / (2*g2 + S*g3 + 1e-6);  a = where(G != 0, a, 0)
                  w[n,c] = Σ_{i,j} max(G, 0) * a
    cam[n] = Σ_c w[n,c] * A[n,c]  ((weights[:, :, None, None] * A).sum(axis=1)),  cam = max(cam, 0).
 4. scale_cam_image(cam, (W, H)), per image: cam -= cam.min(); cam /= (1e-7 + cam.max());
    then cv2.resize(np.float32(cam), (W, H)) with OpenCV's default INTER_LINEAR on float32:
    bilinear with half-pixel centres, src = (dst + 0.5)·(in/out) − 0.5 clamped at the border, no
    antialiasing — numerically torch.nn.functional.interpolate(mode="bilinear",
    align_corners=False) (checked: max difference ~2e-7 for 7→28, 4→28, 4→32, 3x5→17x23, 8→4).
 5. aggregate_multi_layers: stack the layers' maps (one here), max(., 0), mean over layers, then
    scale_cam_image(result) AGAIN without a size: per image a SECOND min-max normalisation
    (−min, /(1e-7 + max)) of the resized map. Bilinear upsampling lowers the peak and raises the
    floor, so this second pass changes values by up to ~(1 − resized max); a reimplementation must
    do: ReLU -> min-max -> bilinear resize -> min-max (each with eps 1e-7 added to the max).
    An all-zero map stays 0 (0 / 1e-7).
 Result: float32 [N, H, W] in [0, 1). No smoothing (aug_smooth/eigen_smooth off).

In-place operations after the target layer (glassbox's cnn uses ReLU(inplace) after each conv/norm;
torchvision's BasicBlock does `out += identity` and in-place ReLU) would overwrite the stored
activation (a view of the live tensor) — e.g. a target "features.bn0_0" would be read after its
ReLU. To record the target layer's true output, this script registers, AFTER the CAM's own hooks, a
forward hook on the target layer that returns output.clone(): the CAM keeps the original tensor, the
rest of the network continues on the clone (gradients flow back through the clone unchanged).
Without it (--no-clone, the plain library) a target followed by an in-place op gives a different map
(in the tests: up to 1.0 apart for "features.bn1_1", "features.conv1_1" with norm "none",
"layer4.1.bn2"); targets whose output is not modified in place ("features.relu*", "features.pool*",
"layerN", "layerN.i", "layerN.i.conv*") give identical maps either way.
"""
import argparse
import json
from collections import OrderedDict

import numpy as np
import safetensors.torch
import torch
import torchvision
from pytorch_grad_cam import GradCAM, GradCAMPlusPlus, ScoreCAM
from pytorch_grad_cam.utils.image import scale_cam_image
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget
from torch import nn
from torchvision.models.resnet import BasicBlock

CNN_DEFAULTS = {"channels": [32, 64], "convs_per_stage": 2, "kernel_size": 3, "norm": "batchnorm", "groups": 8,
                "bn_momentum": 0.1, "hidden": 128, "dropout": 0.25}
RESNET_DEFAULTS = {"stem": "small", "width": 64, "zero_init_residual": False, "bn_momentum": 0.1}


def options(spec, arch, defaults):
    """The arch's options from M.json: flat, under spec[arch], or under spec["model"][arch]."""
    o = dict(defaults)
    for src in (spec, spec.get(arch, {}), spec.get("model", {}).get(arch, {})):
        for k in defaults:
            if isinstance(src, dict) and k in src:
                o[k] = src[k]
    return o


class Cnn(nn.Module):
    """glassbox/nn/cnn.cpp: stages of [conv - norm - relu] x convs_per_stage + 2x2 max-pool, then the head."""

    def __init__(self, o, shape, num_classes):
        super().__init__()
        cin, h, w = shape
        feats = OrderedDict()
        k = o["kernel_size"]
        for s, cout in enumerate(o["channels"]):
            for c in range(o["convs_per_stage"]):
                p = f"{s}_{c}"
                feats["conv" + p] = nn.Conv2d(cin, cout, k, padding=k // 2, bias=o["norm"] == "none")
                if o["norm"] == "batchnorm":
                    feats["bn" + p] = nn.BatchNorm2d(cout, momentum=o["bn_momentum"])
                elif o["norm"] == "groupnorm":
                    feats["gn" + p] = nn.GroupNorm(o["groups"], cout)
                elif o["norm"] != "none":
                    raise ValueError(f"unknown norm {o['norm']!r}")
                feats["relu" + p] = nn.ReLU(inplace=True)
                cin = cout
            feats[f"pool{s}"] = nn.MaxPool2d(2)
            h //= 2
            w //= 2
        self.features = nn.Sequential(feats)
        head = OrderedDict(flatten=nn.Flatten())
        flat = cin * h * w
        if o["hidden"] > 0:
            head["fc"] = nn.Linear(flat, o["hidden"])
            head["relu"] = nn.ReLU(inplace=True)
            flat = o["hidden"]
        if o["dropout"] > 0:
            head["drop"] = nn.Dropout(o["dropout"])
        head["out"] = nn.Linear(flat, num_classes)
        self.classifier = nn.Sequential(head)

    def forward(self, x):
        return self.classifier(self.features(x))


class ResNet18Width(nn.Module):
    """torchvision's ResNet-18 layout (same attribute names) with first-stage width `width`."""

    def __init__(self, width, in_channels, num_classes, small_stem):
        super().__init__()
        w = width
        if small_stem:
            self.conv1 = nn.Conv2d(in_channels, w, 3, 1, 1, bias=False)
            self.maxpool = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(in_channels, w, 7, 2, 3, bias=False)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(w)
        self.relu = nn.ReLU(inplace=True)

        def layer(cin, cout, stride):
            down = None
            if stride != 1 or cin != cout:
                down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            return nn.Sequential(BasicBlock(cin, cout, stride, down), BasicBlock(cout, cout))

        self.layer1 = layer(w, w, 1)
        self.layer2 = layer(w, 2 * w, 2)
        self.layer3 = layer(2 * w, 4 * w, 2)
        self.layer4 = layer(4 * w, 8 * w, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * w, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(arch, spec):
    shape = [int(v) for v in spec["input_shape"]]
    k = int(spec["num_classes"])
    if arch == "cnn":
        return Cnn(options(spec, "cnn", CNN_DEFAULTS), shape, k)
    o = options(spec, "resnet18", RESNET_DEFAULTS)
    small = o["stem"] == "small"
    if o["stem"] not in ("small", "imagenet"):
        raise ValueError(f"unknown stem {o['stem']!r}")
    if int(o["width"]) != 64:
        m = ResNet18Width(int(o["width"]), shape[0], k, small)
    else:
        m = torchvision.models.resnet18(weights=None, num_classes=k)
        if small:
            m.conv1 = nn.Conv2d(shape[0], 64, 3, 1, 1, bias=False)
            m.maxpool = nn.Identity()
        elif shape[0] != 3:
            m.conv1 = nn.Conv2d(shape[0], 64, 7, 2, 3, bias=False)
    for mod in m.modules():  # momentum only matters in training; set it as glassbox does anyway
        if isinstance(mod, nn.BatchNorm2d):
            mod.momentum = o["bn_momentum"]
    return m


def raw_cam(cam, x, targets, layer):
    """BaseCAM.forward + compute_cam_per_layer up to (not including) the resize, with the library's parts."""
    outputs = cam.activations_and_grads(x)
    if targets is None:
        targets = [ClassifierOutputTarget(c) for c in np.argmax(outputs.cpu().data.numpy(), axis=-1)]
    cam.model.zero_grad()
    loss = sum(t(o) for t, o in zip(targets, outputs))
    loss.backward(retain_graph=True)
    acts = cam.activations_and_grads.activations[0].cpu().data.numpy()
    grads = cam.activations_and_grads.gradients[0].cpu().data.numpy()
    m = cam.get_cam_image(x, layer, targets, acts, grads, False)
    return scale_cam_image(np.maximum(m, 0)), outputs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", required=True, choices=["cnn", "resnet18"])
    ap.add_argument("--model-json", required=True)
    ap.add_argument("--weights", required=True, help="safetensors file of the model's state (glassbox's names)")
    ap.add_argument("--inputs", required=True, help="float32 [N, C, H, W] .npy")
    ap.add_argument("--targets", help="int [N] .npy; omitted: the argmax class of each sample")
    ap.add_argument("--method", required=True, choices=["gradcam", "gradcam++", "scorecam"])
    ap.add_argument("--layer", required=True, help='module path, e.g. "features.relu1_1" or "layer4"')
    ap.add_argument("--out", required=True)
    ap.add_argument("--raw", action="store_true", help="save the map at the layer's resolution, before resizing")
    ap.add_argument("--logits-out", help="also save the model outputs [N, K] float32")
    ap.add_argument("--weights-out", help="also save the channel weights [N, C_layer] float32")
    ap.add_argument("--no-clone", action="store_true",
                    help="leave in-place ops after the layer alone (the plain library's behaviour; see the docstring)")
    a = ap.parse_args()

    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    with open(a.model_json) as f:
        spec = json.load(f)
    model = build(a.arch, spec)
    state = safetensors.torch.load_file(a.weights)
    model.load_state_dict(state, strict=True)
    model.eval()
    x = torch.from_numpy(np.load(a.inputs).astype(np.float32, copy=False))
    assert x.ndim == 4 and list(x.shape[1:]) == [int(v) for v in spec["input_shape"]], \
        f"inputs must be [N, {spec['input_shape']}], got {list(x.shape)}"
    targets = None
    t = None
    if a.targets:
        t = np.load(a.targets).reshape(-1).astype(np.int64)
        assert t.shape[0] == x.shape[0], "one target per input"
        targets = [ClassifierOutputTarget(int(c)) for c in t]
    layer = model.get_submodule(a.layer)
    cls = {"gradcam": GradCAM, "gradcam++": GradCAMPlusPlus, "scorecam": ScoreCAM}[a.method]
    cam = cls(model=model, target_layers=[layer])
    # after the CAM's hooks: the network continues on a copy, so in-place ops downstream cannot
    # overwrite the activation the CAM stored (see the docstring)
    clone_hook = None if a.no_clone else layer.register_forward_hook(lambda mod, inp, out: out.clone())
    captured = {}
    weights_fn = cam.get_cam_weights

    def keep_weights(*args, **kwargs):
        w = weights_fn(*args, **kwargs)
        captured["w"] = w
        return w

    cam.get_cam_weights = keep_weights
    if a.raw:
        maps, outputs = raw_cam(cam, x, targets, layer)
    else:
        maps = cam(input_tensor=x, targets=targets)
        outputs = cam.outputs
    if clone_hook is not None:
        clone_hook.remove()
    cam.activations_and_grads.release()
    maps = np.asarray(maps, dtype=np.float32)
    np.save(a.out, maps)
    logits = outputs.detach().cpu().numpy().astype(np.float32)
    if a.logits_out:
        np.save(a.logits_out, logits)
    if a.weights_out:
        np.save(a.weights_out, np.asarray(captured["w"], dtype=np.float32))
    used = t if t is not None else logits.argmax(axis=1)
    print(json.dumps({"arch": a.arch, "method": a.method, "layer": a.layer, "raw": a.raw, "out": a.out,
                      "shape": list(maps.shape), "targets": [int(v) for v in used],
                      "min": float(maps.min()), "max": float(maps.max()),
                      "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__}}))


if __name__ == "__main__":
    main()
