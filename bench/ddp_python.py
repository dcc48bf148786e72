"""The anchor of `glassbox bench ddp`: PyTorch's DistributedDataParallel on Gloo, under torchrun.

    python -m torch.distributed.run --standalone --nproc-per-node 2 bench/ddp_python.py \
        --model mobilenet_v3_small --batch-size 32 --steps 40 --warmup 5 --input 3x64x64 --samples 1024

--model cnn: the zoo's CNN (per stage two conv3x3-BatchNorm-ReLU and a 2x2 max-pool, 32-64-128
channels; flatten, Linear 128, ReLU, dropout 0.25, Linear 10); --model mobilenet_v3_small:
torchvision's (10 classes). AdamW(lr 1e-3, weight decay 0.01, fused=True),
cross-entropy, one intra-op thread per process, synthetic data made from seed 0 (the same on
every rank) and sharded by DistributedSampler (shuffled, whole batches). DDP's defaults: 25 MiB
buckets, buffers broadcast every forward. Rank 0 prints one JSON line: {"sps": global samples/s
at the median step time of the steps after the warm-up, "sps_mean": the same over their total
time}.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler


def build(name, shape):
    if name == "mobilenet_v3_small":
        return torchvision.models.mobilenet_v3_small(num_classes=10)
    layers, prev, h, w = [], shape[0], shape[1], shape[2]
    for out in (32, 64, 128):
        for _ in range(2):
            layers += [torch.nn.Conv2d(prev, out, 3, padding=1, bias=False), torch.nn.BatchNorm2d(out),
                       torch.nn.ReLU(inplace=True)]
            prev = out
        layers.append(torch.nn.MaxPool2d(2))
        h, w = h // 2, w // 2
    layers += [torch.nn.Flatten(), torch.nn.Linear(prev * h * w, 128), torch.nn.ReLU(inplace=True),
               torch.nn.Dropout(0.25), torch.nn.Linear(128, 10)]
    return torch.nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mobilenet_v3_small", choices=["cnn", "mobilenet_v3_small"])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--input", default="3x64x64")
    ap.add_argument("--samples", type=int, default=1024)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    shape = [int(d) for d in args.input.split("x")]
    torch.manual_seed(0)
    x = torch.randn(args.samples, *shape)
    y = torch.randint(0, 10, (args.samples,))
    model = DistributedDataParallel(build(args.model, shape))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(args.samples), num_replicas=world, rank=rank, shuffle=True, seed=0)
    model.train()
    step, epoch, last, times = 0, 0, None, []
    total = args.warmup + args.steps
    while step < total:
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler))
        for b in range(len(order) // args.batch_size):
            idx = order[b * args.batch_size:(b + 1) * args.batch_size]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x.index_select(0, idx)), y.index_select(0, idx))
            loss.backward()
            opt.step()
            step += 1
            now = time.perf_counter()
            if step > args.warmup:
                times.append(now - last)
            last = now
            if step == total:
                break
        epoch += 1
    if rank == 0:
        global_batch = args.batch_size * world
        print(json.dumps({"sps": global_batch / statistics.median(times),
                          "sps_mean": global_batch * len(times) / sum(times), "world_size": world,
                          "params": sum(p.numel() for p in model.parameters())}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
