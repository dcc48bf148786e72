"""Reference trajectories for glassbox's optimisers, computed with Python torch.optim.

Reads nothing; builds parameters and a fixed sequence of gradients from a seed, runs each
optimiser configuration for several steps (default foreach implementation) and prints JSON:
{"params": [...initial...], "grads": [[...step k...]], "cases": [{"options": ..., "final": [...]}]}
"""
import json

import torch

torch.manual_seed(3)
shapes = [(4, 3), (3,), (2, 2, 2)]
init = [torch.randn(s, dtype=torch.float32) for s in shapes]
steps = 6
grads = [[torch.randn(s, dtype=torch.float32) for s in shapes] for _ in range(steps)]

configs = [
    {"name": "sgd", "lr": 0.1},
    {"name": "sgd", "lr": 0.05, "momentum": 0.9},
    {"name": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
    {"name": "sgd", "lr": 0.05, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.1},
    {"name": "adam", "lr": 0.01},
    {"name": "adam", "lr": 0.01, "weight_decay": 0.05, "betas": [0.8, 0.99], "eps": 1e-6},
    {"name": "adam", "lr": 0.01, "amsgrad": True},
    {"name": "adamw", "lr": 0.01, "weight_decay": 0.1},
    {"name": "adamw", "lr": 0.02, "weight_decay": 0.01, "amsgrad": True},
]

cases = []
for cfg in configs:
    params = [p.clone().requires_grad_(True) for p in init]
    kw = {k: v for k, v in cfg.items() if k != "name"}
    if "betas" in kw:
        kw["betas"] = tuple(kw["betas"])
    opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[cfg["name"]](params, **kw)
    for k in range(steps):
        for p, g in zip(params, grads[k]):
            p.grad = g.clone()
        opt.step()
    cases.append({"options": cfg, "final": [p.detach().reshape(-1).tolist() for p in params]})

print(json.dumps({
    "shapes": shapes,
    "params": [p.reshape(-1).tolist() for p in init],
    "grads": [[g.reshape(-1).tolist() for g in gs] for gs in grads],
    "cases": cases,
}))
