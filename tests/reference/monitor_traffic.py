"""Served traffic for the monitoring end-to-end test: Fashion-MNIST test images sent to a running
`glassbox serve` through tritonclient (binary tensors), preprocessed as the model's contract says,
first in distribution, then with each shift a monitor must catch. After every window it reads
GET /v2/models/NAME/monitor, and after every phase the Prometheus text on /metrics.

Prints one JSON object: {"phases": [{"name", "windows": [{"index", "alarms": [kinds]}],
"metrics_alarms": {kind: value}, "monitor": <the last /monitor body>}]}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
import urllib.request

import numpy as np
import tritonclient.http as httpclient


def read_idx(path: str) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read().decode()


def metrics_alarms(text: str, model: str) -> dict:
    out = {}
    for m in re.finditer(r'^glassbox_monitor_alarm\{model="([^"]*)",version="[^"]*",kind="([^"]*)"\} (\S+)$', text,
                         re.M):
        if m.group(1) == model:
            out[m.group(2)] = float(m.group(3))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True, help="host:port of the KServe v2 endpoint")
    ap.add_argument("--metrics", required=True, help="URL of /metrics")
    ap.add_argument("--model", required=True)
    ap.add_argument("--contract", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--window", type=int, default=500)
    ap.add_argument("--quiet-windows", type=int, default=20)
    ap.add_argument("--shift-windows", type=int, default=2)
    ap.add_argument("--batch", type=int, default=50)
    args = ap.parse_args()

    contract = json.load(open(args.contract))
    pre = contract["preprocessing"]
    mean = np.float32(pre["mean"][0])
    std = np.float32(pre["std"][0])
    scale = np.float32(pre["scale"])
    images = read_idx(args.images).astype(np.float32)  # [N, 28, 28] 0..255
    labels = read_idx(args.labels)
    rng = np.random.default_rng(5)
    client = httpclient.InferenceServerClient(args.http)
    monitor_url = f"http://{args.http}/v2/models/{args.model}/monitor"
    cursor = [0]

    def next_images(n: int, classes=None) -> np.ndarray:
        if classes is None:
            idx = (np.arange(n) + cursor[0]) % len(images)
            cursor[0] += n
        else:
            pool = np.flatnonzero(np.isin(labels, classes))
            idx = rng.choice(pool, size=n)
        return images[idx]

    def pixels(raw: np.ndarray) -> np.ndarray:  # the contract's [0, 1] space
        return raw * scale

    def send(x01: np.ndarray, forget_scale: bool = False) -> None:
        x = ((x01 / scale if forget_scale else x01) - mean) / std
        x = x.astype(np.float32)[:, None, :, :]
        for i in range(0, len(x), args.batch):
            part = x[i : i + args.batch]
            inp = httpclient.InferInput("INPUT__0", list(part.shape), "FP32")
            inp.set_data_from_numpy(part, binary_data=True)
            client.infer(args.model, [inp], outputs=[httpclient.InferRequestedOutput("OUTPUT__0", binary_data=True)])

    def windows_done() -> int:
        return json.loads(get(monitor_url))["totals"]["windows"]

    def run_window(make) -> dict:
        before = windows_done()
        make()
        deadline = time.time() + 120
        while windows_done() < before + 1 and time.time() < deadline:
            time.sleep(0.05)
        body = json.loads(get(monitor_url))
        return {"index": body["totals"]["windows"], "alarms": sorted(a["kind"] for a in body["alarms"]), "body": body}

    shifts = {
        "in_distribution": lambda: send(pixels(next_images(args.window))),
        "brightness": lambda: send(np.clip(pixels(next_images(args.window)) + 0.3, 0, 1)),
        "noise": lambda: send(
            np.clip(pixels(next_images(args.window)) + rng.normal(0, 0.1, (args.window, 28, 28)), 0, 1)),
        "raw_0_255": lambda: send(pixels(next_images(args.window)), forget_scale=True),
        "class_mix": lambda: send(pixels(next_images(args.window, classes=[1, 5, 8]))),
    }
    phases = []
    plan = [("in_distribution", args.quiet_windows)]
    for name in ["brightness", "noise", "raw_0_255", "class_mix"]:
        plan.append((name, args.shift_windows))
        plan.append(("in_distribution", 2))  # back to normal: the alarms clear
    for name, count in plan:
        windows = [run_window(shifts[name]) for _ in range(count)]
        last = windows[-1].pop("body")
        for w in windows:
            w.pop("body", None)
        phases.append({"name": name, "windows": windows, "metrics_alarms": metrics_alarms(get(args.metrics),
                                                                                          args.model),
                       "monitor": last})
    print(json.dumps({"phases": phases}))


if __name__ == "__main__":
    main()
