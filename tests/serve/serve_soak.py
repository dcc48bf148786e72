#!/usr/bin/env python3
"""Soak: glassbox serve at saturation for --seconds (10 minutes by default) with several client
threads on the FP32 model (JSON and binary requests, batches of 1-4, keep-alive). Asserted: no
failed request (every answer 200 with outputs equal to Python torch's), and the server's resident
memory (/proc/PID/status VmRSS) grows by less than 5 % from the end of the warm-up to the end.
Prints the RSS series.

    serve_soak.py --glassbox build/glassbox/cli/glassbox [--seconds 600] [--warmup 60] [--clients 6]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402


class Client(threading.Thread):
    def __init__(self, port: int, idx: int, repo: Path, stop: threading.Event):
        super().__init__(daemon=True)
        self.port, self.stop = port, stop
        self.ok = 0
        self.failures: list[str] = []
        rng = np.random.default_rng(idx)
        self.requests = []
        for k in range(4):
            b = 1 + (idx + k) % 4
            x = rng.standard_normal((b, 1, 8, 8)).astype(np.float32)
            want = sc.reference("fp32", [x], repo)[0]
            if k % 2 == 0:
                body = json.dumps({"inputs": [{"name": "INPUT__0", "shape": list(x.shape), "datatype": "FP32",
                                               "data": x.reshape(-1).tolist()}]}).encode()
                headers = {"Content-Type": "application/json"}
            else:
                head = json.dumps({"inputs": [{"name": "INPUT__0", "shape": list(x.shape), "datatype": "FP32",
                                               "parameters": {"binary_data_size": x.nbytes}}],
                                   "outputs": [{"name": "OUTPUT__0", "parameters": {"binary_data": True}}]}).encode()
                body = head + x.tobytes()
                headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}
            self.requests.append((body, headers, want))

    def check(self, status: int, headers: dict, data: bytes, want: np.ndarray) -> str | None:
        if status != 200:
            return f"status {status}: {data[:200]!r}"
        n = headers.get("inference-header-content-length")
        if n is not None:
            head = json.loads(data[:int(n)])
            got = np.frombuffer(data[int(n):], np.float32).reshape(head["outputs"][0]["shape"])
        else:
            out = json.loads(data)["outputs"][0]
            got = np.array(out["data"], np.float32).reshape(out["shape"])
        same, detail = sc.close_enough(got, want)
        return None if same else f"output differs from Python torch: {detail}"

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        i = 0
        while not self.stop.is_set():
            body, headers, want = self.requests[i % len(self.requests)]
            i += 1
            try:
                conn.request("POST", "/v2/models/fp32/infer", body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
                err = self.check(r.status, {k.lower(): v for k, v in r.getheaders()}, data, want)
            except Exception as e:  # noqa: BLE001 - any failure is counted
                err = f"{type(e).__name__}: {e}"
                conn.close()
            if err:
                self.failures.append(err)
            else:
                self.ok += 1
        conn.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--warmup", type=float, default=60)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--sample-every", type=float, default=10)
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-serve-soak-")
    c = sc.Checks("serve_soak")
    repo = sc.build_repository(work / "repo", models=["fp32"])
    series: list[tuple[float, int, int]] = []  # (seconds, RSS KiB, requests so far)
    with sc.ServeProcess(args.glassbox, repo, work, name="serve-soak") as srv:
        stop = threading.Event()
        clients = [Client(srv.port, i, repo, stop) for i in range(args.clients)]
        t0 = time.monotonic()
        for cl in clients:
            cl.start()
        warm_rss = None
        while (t := time.monotonic() - t0) < args.seconds:
            rss = srv.rss_kib()
            done = sum(cl.ok + len(cl.failures) for cl in clients)
            series.append((t, rss, done))
            print(f"t={t:6.0f} s  RSS {rss / 1024:8.1f} MiB  requests {done}", flush=True)
            if warm_rss is None and t >= args.warmup:
                warm_rss = rss
            time.sleep(min(args.sample_every, max(0.1, args.seconds - t)))
        end_rss = srv.rss_kib()
        stop.set()
        for cl in clients:
            cl.join(120)
        total_ok = sum(cl.ok for cl in clients)
        failures = [f for cl in clients for f in cl.failures]
        status, stats = sc.get_json(srv.port, "/v2/models/fp32/stats")
    elapsed = time.monotonic() - t0
    series.append((elapsed, end_rss, total_ok + len(failures)))
    print(f"{total_ok} requests ok, {len(failures)} failed in {elapsed:.0f} s ({total_ok / elapsed:.0f}/s)")
    for f in failures[:10]:
        print("  failure:", f)
    c.check(not failures, f"{len(failures)} failed requests, first: {failures[:1]}")
    c.check(total_ok > 0, "no request succeeded")
    if warm_rss is None:
        warm_rss = series[0][1]
        print("(run shorter than the warm-up: growth measured from the first sample)")
    growth = (end_rss - warm_rss) / warm_rss
    print(f"RSS after warm-up {warm_rss / 1024:.1f} MiB, at the end {end_rss / 1024:.1f} MiB: growth {growth * 100:+.2f} %")
    print("RSS series (s, MiB):", ", ".join(f"{t:.0f}:{r / 1024:.1f}" for t, r, _ in series))
    c.check(growth < 0.05, f"RSS grew {growth * 100:.2f} % after warm-up (limit 5 %)")
    s = (stats or {}).get("model_stats", [{}])[0] if isinstance(stats, dict) else {}
    fails = int(s.get("inference_stats", {}).get("fail", {}).get("count", -1))
    c.check(fails == 0, f"server statistics count {fails} failures")
    c.check(srv.returncode == 0, f"server exited {srv.returncode} on SIGTERM")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
