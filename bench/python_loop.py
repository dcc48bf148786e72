"""Anchors for `glassbox bench train`: Python PyTorch training loops.

Same model, AdamW (lr 1e-3, weight decay 0.01), batch size, thread count and synthetic data as
the C++ measurements. Prints one JSON line: {"sps": samples per second, ...}.

  python_loop.py                                   # the MLP, torch.optim.AdamW's default (for-loop) kernel
  python_loop.py --fused                           # AdamW(fused=True): the best eager Python
  python_loop.py --fused --compile                 # torch.compile(model) in the fused loop
  python_loop.py --model mobilenet_v3_small --input 3x64x64 --samples 1024 --fused

--model mlp is the quickstart MLP (784-512-256-10, BatchNorm, ReLU, dropout 0.2);
mobilenet_v3_small is torchvision.models.mobilenet_v3_small(num_classes=10). With --compile the
warm-up steps include the compilation (reported as compile_seconds, not in sps); when
torch.compile fails, sps is null and error says why (exit status 0).
"""
import argparse
import json
import time

import torch
from torch import nn


def build(hidden, classes, features):
    layers, prev = [nn.Flatten()], features
    for h in hidden:
        layers += [nn.Linear(prev, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Dropout(0.2)]
        prev = h
    layers.append(nn.Linear(prev, classes))
    return nn.Sequential(*layers)


def build_model(name, input_shape, classes=10):
    """The benchmark's model by name: "mlp" (the quickstart MLP) or "mobilenet_v3_small"."""
    if name == "mlp":
        features = 1
        for d in input_shape:
            features *= d
        return build([512, 256], classes, features)
    if name == "mobilenet_v3_small":
        import torchvision

        return torchvision.models.mobilenet_v3_small(num_classes=classes)
    raise SystemExit(f"unknown --model {name}")


def make_optimizer(params, fused):
    if fused:
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, fused=True)
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)


def parse_args():
    """The options every anchor of `glassbox bench train` takes."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--samples", type=int, default=8192)
    ap.add_argument("--model", default="mlp", choices=["mlp", "mobilenet_v3_small"])
    ap.add_argument("--input", default="1x28x28", help="one sample's shape, CxHxW")
    ap.add_argument("--fused", action="store_true", help="AdamW(fused=True)")
    ap.add_argument("--compile", action="store_true", help="torch.compile(model) (with --fused)")
    ap.add_argument("--repeats", type=int, default=1, help="best of N measured windows in this process")
    args = ap.parse_args()
    args.input_shape = [int(d) for d in args.input.split("x")]
    return args


def synthetic(args):
    torch.manual_seed(0)
    x = torch.randn(args.samples, *args.input_shape)
    y = torch.randint(0, 10, (args.samples,))
    return x, y


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    x, y = synthetic(args)
    torch.manual_seed(0)
    model = build_model(args.model, args.input_shape)
    params = sum(p.numel() for p in model.parameters())
    opt = make_optimizer(model.parameters(), args.fused)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    forward = model
    info = {"torch": torch.__version__, "params": params}
    if args.compile:
        # The generated kernels' OpenMP regions get --threads too: inductor's default is taken
        # where the graph is compiled, and a graph cached by a run with another thread count
        # would be reused (the cache key includes this setting, not torch.get_num_threads()).
        import torch._inductor.config as inductor_config

        inductor_config.cpp.threads = args.threads
        forward = torch.compile(model)
    nb = args.samples // args.batch_size

    def run(steps):
        for s in range(steps):
            perm_i = s % nb
            xb = x[perm_i * args.batch_size:(perm_i + 1) * args.batch_size]
            yb = y[perm_i * args.batch_size:(perm_i + 1) * args.batch_size]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(forward(xb), yb)
            loss.backward()
            opt.step()

    t0 = time.perf_counter()
    try:
        run(max(args.warmup, 1 if args.compile else 0))
    except Exception as e:  # torch.compile needs a working C++ toolchain (inductor)
        if not args.compile:
            raise
        msg = f"{type(e).__name__}: {e}".strip().splitlines()
        print(json.dumps({"sps": None, "error": "torch.compile failed: " + (msg[0] if msg else "?"), **info}))
        return
    if args.compile:
        info["compile_seconds"] = time.perf_counter() - t0
    best = 0.0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        run(args.steps)
        best = max(best, args.steps * args.batch_size / (time.perf_counter() - t0))
    print(json.dumps({"sps": best, "seconds": args.steps * args.batch_size / best, **info}))


if __name__ == "__main__":
    main()
