#!/usr/bin/env python3
"""Reference learning-rate sequences from torch.optim.lr_scheduler, for glassbox's scheduler test.

Each case is a set of glassbox SchedulerOptions (the TOML keys of docs/schedulers.md). This script
builds the PyTorch equivalent on an SGD optimizer with two param groups of different lrs, records
the lr (and momentum) of every group right after construction and after each scheduler.step(),
and prints one JSON document:

  {"torch": "2.9.1", "base_lrs": [...], "cases": [{"label", "options", "steps_per_epoch",
   "max_epochs", "steps", "metrics"?, "lrs": [[lr per group] per step 0..steps],
   "momentums": [[...]]}]}

glassbox/train/scheduler_test.cpp builds the same options with make_scheduler and compares.
Usage: python tests/reference/schedulers.py [--case LABEL]
"""
import argparse
import json
import math
import sys
import warnings

import torch
from torch.optim import SGD
from torch.optim import lr_scheduler as L

BASE_LRS = [0.1, 0.03]
MOMENTUM = 0.9


def optimizer():
    groups = [{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in BASE_LRS]
    return SGD(groups, lr=BASE_LRS[0], momentum=MOMENTUM)


def run_length(o, steps_per_epoch, max_epochs):
    per_epoch = steps_per_epoch if o.get("interval", "epoch") == "step" else 1
    return per_epoch * max_epochs


def main_scheduler(opt, o, steps_per_epoch, max_epochs):
    """The PyTorch scheduler for glassbox options `o` (without the warm-up)."""
    name = o.get("name", "none")
    gamma = o.get("gamma", 0.1)
    if name == "step":
        return L.StepLR(opt, step_size=o["step_size"], gamma=gamma)
    if name == "multistep":
        return L.MultiStepLR(opt, milestones=o["milestones"], gamma=gamma)
    if name == "exponential":
        return L.ExponentialLR(opt, gamma=gamma)
    if name == "cosine":
        t_max = o.get("t_max", 0) or run_length(o, steps_per_epoch, max_epochs) - o.get("warmup_steps", 0)
        return L.CosineAnnealingLR(opt, T_max=t_max, eta_min=o.get("eta_min", 0.0))
    if name == "cosine_warm_restarts":
        return L.CosineAnnealingWarmRestarts(opt, T_0=o["t_0"], T_mult=o.get("t_mult", 1), eta_min=o.get("eta_min", 0.0))
    if name == "linear":
        return L.LinearLR(opt, start_factor=o.get("start_factor", 1.0 / 3), end_factor=o.get("end_factor", 1.0),
                          total_iters=o.get("total_iters", 5))
    if name == "onecycle":
        max_lr = o.get("max_lr", [])
        if not max_lr:
            max_lr = list(BASE_LRS)
        elif len(max_lr) == 1:
            max_lr = max_lr[0]
        total = o.get("total_steps", 0) or run_length(o, steps_per_epoch, max_epochs)
        return L.OneCycleLR(opt, max_lr=max_lr, total_steps=total, pct_start=o.get("pct_start", 0.3),
                            anneal_strategy=o.get("anneal_strategy", "cos"),
                            cycle_momentum=o.get("cycle_momentum", True),
                            base_momentum=o.get("base_momentum", 0.85), max_momentum=o.get("max_momentum", 0.95),
                            div_factor=o.get("div_factor", 25.0), final_div_factor=o.get("final_div_factor", 1e4),
                            three_phase=o.get("three_phase", False))
    if name == "plateau":
        min_lr = o.get("min_lr", [0.0])
        return L.ReduceLROnPlateau(opt, mode=o.get("mode", "min"), factor=o.get("factor", 0.1),
                                   patience=o.get("patience", 10), threshold=o.get("threshold", 1e-4),
                                   threshold_mode=o.get("threshold_mode", "rel"), cooldown=o.get("cooldown", 0),
                                   min_lr=min_lr[0] if len(min_lr) == 1 else min_lr, eps=o.get("eps", 1e-8))
    return None  # "none"


def scheduler(opt, o, steps_per_epoch, max_epochs):
    warmup = o.get("warmup_steps", 0)
    start = o.get("warmup_start_factor", 1.0 / 3)
    if warmup == 0:
        return main_scheduler(opt, o, steps_per_epoch, max_epochs)
    linear = L.LinearLR(opt, start_factor=start, end_factor=1.0, total_iters=warmup)
    main = main_scheduler(opt, o, steps_per_epoch, max_epochs)
    if main is None:  # "none" + warm-up: the warm-up alone, then constant
        return linear
    return L.SequentialLR(opt, schedulers=[linear, main], milestones=[warmup])


def plateau_metrics(n):
    """A validation-loss-like sequence: falls, stalls, creeps up, with exact repeats and small wiggles."""
    out = []
    for k in range(n):
        v = 1.0 / (1.0 + k / 25.0) + 0.02 * math.sin(0.9 * k)
        if 60 <= k < 90:
            v = out[59] if out else v  # an exact plateau
        if 150 <= k < 200:
            v = 0.3 + 0.0005 * (k % 7)  # tiny changes: below a rel threshold, above an abs one
        out.append(round(v, 12))
    return out


def cases():
    n = 300
    m = plateau_metrics(n)
    m_max = [1.0 - x for x in m]  # an accuracy-like sequence for mode = "max"
    c = [
        ("onecycle_cos", {"name": "onecycle", "interval": "step", "total_steps": n}, 10, 30, n, None),
        ("onecycle_linear_derived", {"name": "onecycle", "interval": "step", "max_lr": [0.5], "pct_start": 0.25,
                                     "anneal_strategy": "linear", "div_factor": 10.0, "final_div_factor": 100.0},
         30, 10, n, None),
        ("onecycle_three_phase", {"name": "onecycle", "interval": "step", "max_lr": [0.4, 0.2], "total_steps": n,
                                  "three_phase": True, "base_momentum": 0.8, "max_momentum": 0.9}, 10, 30, n, None),
        ("onecycle_epoch_interval", {"name": "onecycle", "interval": "epoch", "pct_start": 0.4,
                                     "cycle_momentum": False}, 7, n, n, None),
        ("warm_restarts_mult1", {"name": "cosine_warm_restarts", "t_0": 50}, 1, n, n, None),
        ("warm_restarts_mult2_eta", {"name": "cosine_warm_restarts", "t_0": 10, "t_mult": 2, "eta_min": 1e-3},
         1, n, n, None),
        ("linear_warmup", {"name": "linear", "start_factor": 0.1, "end_factor": 1.0, "total_iters": 50}, 1, n, n, None),
        ("linear_decay", {"name": "linear", "start_factor": 1.0, "end_factor": 0.05, "total_iters": 200},
         1, n, n, None),
        ("warmup_only", {"name": "none", "warmup_steps": 20, "warmup_start_factor": 0.01}, 1, n, n, None),
        ("warmup_cosine_derived", {"name": "cosine", "interval": "step", "warmup_steps": 30,
                                   "warmup_start_factor": 0.05, "eta_min": 1e-4}, 25, 12, n, None),
        ("warmup_multistep", {"name": "multistep", "milestones": [40, 100], "gamma": 0.5, "warmup_steps": 10},
         1, n, n, None),
        ("warmup_exponential", {"name": "exponential", "gamma": 0.98, "warmup_steps": 15, "warmup_start_factor": 0.2},
         1, n, n, None),
        ("warmup_warm_restarts", {"name": "cosine_warm_restarts", "t_0": 40, "t_mult": 2, "warmup_steps": 5},
         1, n, n, None),
        ("step", {"name": "step", "step_size": 30, "gamma": 0.5}, 1, n, n, None),
        ("multistep", {"name": "multistep", "milestones": [50, 120, 200], "gamma": 0.3}, 1, n, n, None),
        ("exponential", {"name": "exponential", "gamma": 0.99}, 1, n, n, None),
        ("cosine_past_t_max", {"name": "cosine", "t_max": 70, "eta_min": 1e-3}, 1, n, n, None),
        ("cosine_to_zero", {"name": "cosine", "t_max": n}, 1, n, n, None),
        ("cosine_long", {"name": "cosine", "t_max": 10000, "eta_min": 1e-5}, 1, 10000, 10000, None),
        ("plateau_min_rel", {"name": "plateau", "patience": 5}, 1, n, n, m),
        ("plateau_min_abs_cooldown", {"name": "plateau", "threshold_mode": "abs", "threshold": 1e-4, "patience": 3,
                                      "cooldown": 4, "factor": 0.5, "min_lr": [1e-3]}, 1, n, n, m),
        ("plateau_max_rel", {"name": "plateau", "mode": "max", "patience": 4, "threshold": 1e-2, "factor": 0.7,
                             "min_lr": [0.02, 0.01]}, 1, n, n, m_max),
        ("plateau_max_abs", {"name": "plateau", "mode": "max", "threshold_mode": "abs", "threshold": 0.001,
                             "patience": 0, "cooldown": 2, "factor": 0.9, "eps": 1e-3}, 1, n, n, m_max),
    ]
    return [dict(label=a, options=b, steps_per_epoch=s, max_epochs=e, steps=k, metrics=mm) for a, b, s, e, k, mm in c]


def record(opt):
    return [g["lr"] for g in opt.param_groups], [g["momentum"] for g in opt.param_groups]


def run_case(case):
    opt = optimizer()
    sched = scheduler(opt, case["options"], case["steps_per_epoch"], case["max_epochs"])
    lrs, moms = [], []
    lr, mom = record(opt)
    lrs.append(lr)
    moms.append(mom)
    for k in range(case["steps"]):
        # No opt.step(): the schedules do not depend on it (PyTorch only warns about the order).
        if sched is not None:
            if case["metrics"] is not None:
                sched.step(case["metrics"][k])
            else:
                sched.step()
        lr, mom = record(opt)
        lrs.append(lr)
        moms.append(mom)
    out = dict(case)
    if out["metrics"] is None:
        del out["metrics"]
    out["lrs"] = lrs
    out["momentums"] = moms
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", help="only this case")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    selected = [c for c in cases() if args.case in (None, c["label"])]
    if not selected:
        sys.exit(f"no case {args.case!r}")
    doc = {"torch": torch.__version__, "base_lrs": BASE_LRS, "cases": [run_case(c) for c in selected]}
    json.dump(doc, sys.stdout, allow_nan=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
