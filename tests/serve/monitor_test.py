#!/usr/bin/env python3
"""Monitoring end to end on the quickstart's model: trained (one short epoch), exported as a model
repository with its reference profile, served with windows of 500 predictions, and fed Fashion-MNIST
test images through tritonclient (binary tensors, preprocessed as the contract says): 20 windows
in distribution must raise no alarm; then each shift must raise its alarm within 2 windows, seen
at GET /v2/models/NAME/monitor and as glassbox_monitor_alarm on /metrics, and clear once the
traffic is back to normal:

    brightness +0.3 -> input_drift (brightness)    Gaussian noise (sigma 0.1) -> input_drift
    pixels sent as 0..255 -> out_of_range           three classes only -> class_mix

The server also writes a payload log (1 MiB segments under a 4 MiB cap): every request is counted,
the newest are on disk with their ids, and numpy reads the tensors.

    monitor_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Exits 0 when every check holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FASHION = Path("/usr/share/datasets/fashion-mnist")
WINDOW = 500
EXPECTED = {"brightness": "input_drift", "noise": "input_drift", "raw_0_255": "out_of_range", "class_mix": "class_mix"}


def read_idx(path: Path) -> np.ndarray:
    data = gzip.open(path, "rb").read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def metrics_values(text: str, family: str, model: str) -> dict[str, float]:
    """label 'kind' (or the only extra label) -> value, for the model's samples of a family; model ""
    reads a family without labels."""
    if not model:
        m = re.search("^" + family + r" (\S+)$", text, re.M)
        return {"": float(m.group(1))} if m else {}
    out = {}
    for m in re.finditer(r"^" + family + r'\{model="([^"]*)",version="[^"]*"(?:,(\w+)="([^"]*)")?\} (\S+)$', text,
                         re.M):
        if m.group(1) == model:
            out[m.group(3) or ""] = float(m.group(4))
    return out


def prepare(gb: str, work: Path, checks: sc.Checks) -> Path:
    """The quickstart's model trained for one short epoch and exported with its profile (and a copy
    without one, 'plain') into WORK/repo."""
    for d in ("run", "repo"):
        shutil.rmtree(work / d, ignore_errors=True)

    def run(cmd: list[str], what: str) -> str:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not checks.check(p.returncode == 0, f"{what} exits 0:\n{p.stdout}\n{p.stderr}"):
            raise SystemExit(checks.summary())
        return p.stdout

    run([gb, "train", str(ROOT / "configs" / "quickstart.toml"), "--run-dir", str(work / "run"), "--set",
         "trainer.max_epochs=1", "--set", "data.limit_train=20000", "--set", "trainer.enable_progress_bar=false",
         "--set", "diagnostics.tensorboard=false"], "glassbox train (quickstart, one short epoch)")
    ckpt = str(work / "run" / "checkpoints" / "last.ckpt")
    out = run([gb, "export", "--checkpoint", ckpt, "--format", "repository", "--out", str(work / "repo"), "--name",
               "quickstart"], "glassbox export --format repository")
    checks.check("profile:    5000 validation samples" in out, f"export names the profile it wrote:\n{out}")
    run([gb, "export", "--checkpoint", ckpt, "--format", "repository", "--out", str(work / "repo"), "--name",
         "plain", "--no-profile"], "glassbox export --no-profile")
    return work / "repo"


class Traffic:
    """Fashion-MNIST test images for the quickstart model served at PORT, preprocessed as the
    contract says: in distribution, or shifted."""

    def __init__(self, repo: Path, port: int, window: int):
        contract = json.loads((repo / "quickstart" / "contract.json").read_text())
        pre = contract["preprocessing"]
        self.mean, self.std = np.float32(pre["mean"][0]), np.float32(pre["std"][0])
        self.scale = np.float32(pre["scale"])
        self.images = read_idx(FASHION / "t10k-images-idx3-ubyte.gz").astype(np.float32)
        self.labels = read_idx(FASHION / "t10k-labels-idx1-ubyte.gz")
        self.rng = np.random.default_rng(5)
        self.cursor = 0
        self.window = window
        self.client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        self.sent = 0  # requests, each with the id "r<n>"
        self.model = "quickstart"

    def images01(self, n: int, classes=None) -> np.ndarray:
        if classes is None:
            idx = (np.arange(n) + self.cursor) % len(self.images)
            self.cursor += n
        else:
            idx = self.rng.choice(np.flatnonzero(np.isin(self.labels, classes)), size=n)
        return self.images[idx] * self.scale

    def send(self, x01: np.ndarray, forget_scale: bool = False) -> None:
        x = (((x01 / self.scale if forget_scale else x01) - self.mean) / self.std).astype(np.float32)[:, None]
        for i in range(0, len(x), 50):
            inp = httpclient.InferInput("INPUT__0", list(x[i:i + 50].shape), "FP32")
            inp.set_data_from_numpy(x[i:i + 50], binary_data=True)
            self.client.infer(self.model, [inp], request_id=f"r{self.sent}")
            self.sent += 1

    def window_of(self, shift: str) -> None:
        n = self.window
        if shift == "in_distribution":
            self.send(self.images01(n))
        elif shift == "brightness":
            self.send(np.clip(self.images01(n) + 0.3, 0, 1))
        elif shift == "noise":
            self.send(np.clip(self.images01(n) + self.rng.normal(0, 0.1, (n, 28, 28)), 0, 1))
        elif shift == "raw_0_255":
            self.send(self.images01(n), forget_scale=True)
        elif shift == "class_mix":
            self.send(self.images01(n, classes=[1, 5, 8]))
        else:
            raise ValueError(shift)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-monitor-")
    checks = sc.Checks("monitor")
    gb = args.glassbox
    repo = prepare(gb, work, checks)
    version_dir = repo / "quickstart" / "1"
    checks.check((version_dir / "profile.json").exists() and (version_dir / "profile.npy").exists(),
                 "profile.json and profile.npy are in the version folder")
    profile = json.loads((version_dir / "profile.json").read_text())
    checks.check([f["name"] for f in profile["features"]] == ["brightness", "contrast", "gradient"],
                 f"a gray image is profiled by brightness, contrast and gradient: {profile['features']}")
    npy = np.load(version_dir / "profile.npy")
    checks.check(npy.shape[0] == sum(f["size"] for f in profile["features"]) + profile["confidence"]["size"] +
                 profile["entropy"]["size"], "numpy reads profile.npy, sized as profile.json says")

    payloads = work / "payloads"
    shutil.rmtree(payloads, ignore_errors=True)
    with sc.ServeProcess(gb, repo, work, ["--monitor-window", WINDOW, "--payload-log", payloads,
                                          "--payload-log-segment-mib", 1, "--payload-log-max-mib", 4]) as server:
        checks.check("monitoring quickstart version 1: 3 features" in server.output(),
                     f"serve says what it monitors:\n{server.output()}")
        traffic = Traffic(repo, server.port, WINDOW)

        def monitor() -> dict:
            status, body = sc.get_json(server.port, "/v2/models/quickstart/monitor")
            assert status == 200, body
            return body

        def window(shift: str) -> dict:
            before = monitor()["totals"]["windows"]
            traffic.window_of(shift)
            deadline = time.monotonic() + 120
            body = monitor()
            while body["totals"]["windows"] < before + 1 and time.monotonic() < deadline:
                time.sleep(0.05)
                body = monitor()
            return body

        def metrics() -> str:
            return sc.request(server.metrics_port, "GET", "/metrics")[2].decode()

        quiet = [window("in_distribution") for _ in range(20)]
        noisy = [(b["totals"]["windows"], [a["kind"] for a in b["alarms"]]) for b in quiet if b["alarms"]]
        checks.check(not noisy, f"20 windows in distribution raise no alarm: {noisy}")
        last = quiet[-1]
        checks.check(last["totals"]["windows"] == 20 and last["totals"]["predictions"] == 20 * WINDOW,
                     f"20 windows of {WINDOW} predictions: {last['totals']}")
        checks.check(last["totals"]["dropped"] == 0 and last["totals"]["out_of_range"] == 0,
                     f"nothing dropped, nothing out of range: {last['totals']}")
        text = metrics()
        on = {k: v for k, v in metrics_values(text, "glassbox_monitor_alarm", "quickstart").items() if v}
        checks.check(len(metrics_values(text, "glassbox_monitor_alarm", "quickstart")) == 7 and not on,
                     f"/metrics: every alarm kind at 0: {on}")
        checks.check(metrics_values(text, "glassbox_monitor_predictions_total", "quickstart").get("") == 20 * WINDOW,
                     "/metrics counts the observed predictions")
        if shutil.which("promtool"):
            p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
            checks.check(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
                         f"promtool check metrics accepts the monitor's families: {p.stdout}{p.stderr}")

        for shift, kind in EXPECTED.items():
            seen = []
            for _ in range(2):
                body = window(shift)
                seen.append([a["kind"] for a in body["alarms"]])
                if kind in seen[-1]:
                    break
            checks.check(kind in seen[-1], f"{shift}: {kind} within 2 windows (alarms per window: {seen})")
            alarm = next((a for a in body["alarms"] if a["kind"] == kind), None)
            if alarm:
                checks.check(set(alarm) == {"kind", "since", "value", "threshold"} and alarm["since"] > 1.7e9,
                             f"{shift}: the alarm has kind, since (Unix time), value, threshold: {alarm}")
            if shift == "brightness":
                top = body["windows"][-1]["features"][0]
                checks.check(top["name"] == "brightness" and top["drifted"],
                             f"brightness: the most drifted feature is brightness: {top}")
            if shift == "raw_0_255":
                checks.check(body["windows"][-1]["out_of_range"] > 0.3 * WINDOW * 784,
                             f"0..255: the out-of-range values are counted: {body['windows'][-1]['out_of_range']}")
            m = metrics_values(metrics(), "glassbox_monitor_alarm", "quickstart")
            checks.check(m.get(kind) == 1.0, f"{shift}: /metrics shows glassbox_monitor_alarm{{kind=\"{kind}\"}} 1: {m}")
            back = [window("in_distribution") for _ in range(2)]
            checks.check(kind not in [a["kind"] for a in back[-1]["alarms"]],
                         f"{shift}: {kind} clears once the traffic is back to normal: {back[-1]['alarms']}")

        same = sc.get_json(server.port, "/v2/models/quickstart/versions/1/monitor")
        checks.check(same[0] == 200 and same[1]["version"] == "1", "GET .../versions/1/monitor answers")
        status, body = sc.get_json(server.port, "/v2/models/plain/monitor")
        checks.check(status == 400 and "not monitored" in body.get("error", "") and "profile" in body["error"],
                     f"a model exported without a profile: 400 naming why: {status} {body}")
        status, body = sc.get_json(server.port, "/v2/models/nope/monitor")
        checks.check(status == 400 and "unknown model" in body.get("error", ""), f"unknown model: {status} {body}")
        status, _ = sc.get_json(server.port, "/v2/models/quickstart/versions/7/monitor")
        checks.check(status == 404, f"unknown version: 404, got {status}")

        # Sampling changed while serving: 0 pauses the monitor, 1 observes every request again.
        sampling = "/v2/models/quickstart/monitor/sampling"
        status, _, body = sc.post_json(server.port, sampling, {"sample_rate": 0})
        checks.check(status == 200 and body.get("sample_rate") == 0, f"POST sampling 0: {status} {body}")
        seen = monitor()["totals"]["predictions"]
        traffic.send(traffic.images01(100))
        time.sleep(0.5)  # the monitor takes its queue every 10 ms
        checks.check(monitor()["totals"]["predictions"] == seen, "paused: the requests are not observed")
        status, _, body = sc.post_json(server.port, sampling, {"sample_rate": 1.0})
        checks.check(status == 200 and body.get("sample_rate") == 1, f"POST sampling 1: {status} {body}")
        traffic.send(traffic.images01(100))
        deadline = time.monotonic() + 30
        while monitor()["totals"]["predictions"] < seen + 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        checks.check(monitor()["totals"]["predictions"] == seen + 100, "sampling 1: every request observed again")
        checks.check(monitor()["options"]["sample_rate"] == 1, "GET .../monitor shows the sample rate in force")
        for bad in ({"sample_rate": 1.5}, {"sample_rate": "all"}, {"rate": 1}, [1]):
            status, _, body = sc.post_json(server.port, sampling, bad)
            checks.check(status == 400 and "sample_rate" in json.dumps(body),
                         f"POST sampling {bad}: 400 naming sample_rate: {status} {body}")
        status, _, body = sc.post_json(server.port, "/v2/models/plain/monitor/sampling", {"sample_rate": 1})
        checks.check(status == 400 and "not monitored" in body.get("error", ""),
                     f"sampling a model without a profile: 400 naming why: {status} {body}")
        status, _ = sc.get_json(server.port, sampling)
        checks.check(status == 405, f"GET .../monitor/sampling: 405, got {status}")

        # The payload log: rotated into segments under its 4 MiB cap, the newest requests kept with
        # their ids, each tensor file read by numpy with the rows records.jsonl gives.
        deadline = time.monotonic() + 60
        text = metrics()
        while metrics_values(text, "glassbox_payload_log_records_total", "").get("") != traffic.sent and \
                time.monotonic() < deadline:
            time.sleep(0.2)
            text = metrics()
        records = re.search(r"^glassbox_payload_log_records_total (\S+)$", text, re.M)
        dropped = re.findall(r'^glassbox_payload_log_dropped_total\{reason="(\w+)"\} (\S+)$', text, re.M)
        checks.check(records is not None and float(records.group(1)) == traffic.sent,
                     f"/metrics: every request written to the payload log ({traffic.sent}): {records and records.group(0)}")
        checks.check(dropped and all(float(v) == 0 for _, v in dropped), f"/metrics: no payload dropped: {dropped}")
        segs = sorted((payloads / "quickstart" / "1").iterdir())
        on_disk = sum(f.stat().st_size for s in segs for f in s.iterdir())
        checks.check(len(segs) >= 2 and on_disk <= 4 << 20, f"payload log rotated under 4 MiB: {len(segs)} segments, "
                                                            f"{on_disk} bytes")
        lines = [json.loads(x) for x in (segs[-1] / "records.jsonl").read_text().splitlines()]
        checks.check(lines and lines[-1]["id"] == f"r{traffic.sent - 1}", f"the newest request is logged with its id: "
                                                                         f"{lines[-1]['id'] if lines else None}")
        x = np.load(segs[-1] / "INPUT__0.npy")
        y = np.load(segs[-1] / "OUTPUT__0.npy")
        checks.check(x.shape == (lines[-1]["inputs"][0]["rows"][1], 1, 28, 28) and y.shape[1] == 10 and
                     y.shape[0] == x.shape[0], f"numpy reads the segment's tensors: {x.shape} {y.shape}")
    # Offline: the payload log against the profile, as the served traffic was seen.
    p = subprocess.run([gb, "monitor", "compare", "--reference", str(repo / "quickstart" / "1"), "--current",
                        str(payloads), "--out", str(work / "compare"), "--json"], capture_output=True, text=True)
    if checks.check(p.returncode == 0, f"monitor compare of the payload log: {p.stdout[-500:]}{p.stderr[-500:]}"):
        report = json.loads(p.stdout)
        names = [c["name"] for c in report["columns"]]
        checks.check(names == ["brightness", "contrast", "gradient", "confidence", "entropy"] and
                     report["current"]["kind"] == "payload_log" and report["current"]["rows"] > 0 and
                     (work / "compare" / "drift.html").exists(),
                     f"the payload log is compared feature by feature with the profile: {names} {report['current']}")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
