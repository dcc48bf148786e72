"""Anchor for `glassbox bench train`: a plain Python PyTorch training loop.

Same model (784-512-256-10 MLP with BatchNorm, ReLU, dropout 0.2), AdamW, batch size, thread
count and synthetic data as the C++ measurements. Prints {"sps": samples per second}.
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


def parse_args():
    """The options every anchor of `glassbox bench train` takes."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--samples", type=int, default=8192)
    return ap.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(args.samples, 1, 28, 28)
    y = torch.randint(0, 10, (args.samples,))
    model = build([512, 256], 10, 784)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    nb = args.samples // args.batch_size

    def run(steps):
        for s in range(steps):
            perm_i = s % nb
            xb = x[perm_i * args.batch_size:(perm_i + 1) * args.batch_size]
            yb = y[perm_i * args.batch_size:(perm_i + 1) * args.batch_size]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()

    run(args.warmup)
    t0 = time.perf_counter()
    run(args.steps)
    dt = time.perf_counter() - t0
    print(json.dumps({"sps": args.steps * args.batch_size / dt, "seconds": dt, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
