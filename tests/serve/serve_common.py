"""Shared by the glassbox serve integration and reference tests: the test model repository (built
with Python torch.jit.script + Triton config.pbtxt text), Python torch reference outputs, a server
process on ephemeral ports, raw HTTP requests and a check collector.

    repo = build_repository(workdir / "repo")                     # the models below
    with ServeProcess(glassbox, repo, workdir) as srv:             # --http-port 0 --metrics-port 0
        status, headers, body = request(srv.port, "GET", "/v2/health/ready")
        want = reference("fp32", [x], repo)                       # torch.jit.load in Python

Models (every one a TorchScript file saved by Python, INPUT__i / OUTPUT__i by position):
  fp32         FP32 [1,8,8] -> FP32 [5]: conv 3x3 (4 ch) + ReLU + linear, seeded weights; mbs 8
  int64        INT64 [3] -> INT64 [3]: x * 3 + 1; mbs 8
  uint8        UINT8 [4] -> UINT8 [4]: 255 - x; mbs 8
  bool         BOOL [4] -> BOOL [4]: not x; mbs 8
  bytes        BYTES [1] (List[str]) -> BYTES [1] upper-cased, INT64 [1] lengths; mbs 8
  two_outputs  FP32 [4] -> FP32 [4] (2x), FP32 [1] (row sum); mbs 8
  nobatch      FP32 [2,3] -> FP32 [3] (column sums / 2); max_batch_size 0
  slow         FP32 [64] -> FP32 [1]: tanh MLP 64-2048-2048-2048-1 (8 M multiply-adds per sample,
               about 1 ms on one core); mbs 16, dynamic batching with a 20 ms queue delay (batches form
               even when Python clients send slowly)
  broken       (include_broken=True) config declares two inputs, the model takes one: must be
               UNAVAILABLE with a reason while the others serve
Standard library + numpy + torch (the project's .venv).
"""

from __future__ import annotations

import http.client as httplib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SKIP = 77  # CTest SKIP_RETURN_CODE

# ---------------------------------------------------------------------------------------------
# The model repository


def _model_sources() -> str:
    """TorchScript-able modules, as source text, so torch.jit.script can read them from a file."""
    return '''
from typing import List, Tuple
import torch


class Fp32Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1234)
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4 * 8 * 8, 5)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).flatten(1))


class Int64Affine(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 3 + 1


class Uint8Invert(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 255 - x


class BoolNot(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logical_not(x)


class BytesUpper(torch.nn.Module):
    def forward(self, x: List[str]) -> Tuple[List[str], torch.Tensor]:
        upper: List[str] = [s.upper() for s in x]
        lengths: List[int] = [len(s) for s in x]
        return upper, torch.tensor(lengths, dtype=torch.int64).reshape(-1, 1)


class TwoOutputs(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return x * 2.0, x.sum(1, keepdim=True)


class NoBatch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(0) * 0.5


class Slow(torch.nn.Module):
    # Two 2048 x 2048 matmuls per sample (8 M multiply-adds) and no Python loop: TorchScript's
    # profiling executor re-specialises loops for each new batch size (seconds), matmuls it does not.
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.w_in = torch.nn.Parameter(torch.randn(64, 2048, generator=g) / 8, requires_grad=False)
        self.m1 = torch.nn.Parameter(torch.randn(2048, 2048, generator=g) / 45.3, requires_grad=False)
        self.m2 = torch.nn.Parameter(torch.randn(2048, 2048, generator=g) / 45.3, requires_grad=False)
        self.w_out = torch.nn.Parameter(torch.randn(2048, 1, generator=g) / 45.3, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x @ self.w_in)
        h = torch.tanh(h @ self.m1)
        h = torch.tanh(h @ self.m2)
        return h @ self.w_out


class Broken(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1.0
'''


def _io(name: str, dtype: str, dims: list[int]) -> str:
    return f'  {{ name: "{name}" data_type: {dtype} dims: [ {", ".join(map(str, dims))} ] }}'


def _config(name: str, mbs: int, inputs: list[tuple[str, str, list[int]]],
            outputs: list[tuple[str, str, list[int]]], extra: str = "") -> str:
    ins = ",\n".join(_io(n, t, d) for n, t, d in inputs)
    outs = ",\n".join(_io(n, t, d) for n, t, d in outputs)
    return (f'name: "{name}"\nplatform: "pytorch_libtorch"\nmax_batch_size: {mbs}\n'
            f"input [\n{ins}\n]\noutput [\n{outs}\n]\n{extra}")


BATCHING = "dynamic_batching { max_queue_delay_microseconds: 200 }\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n"

# name -> (module class, max_batch_size, inputs, outputs, extra config text)
MODELS: dict[str, tuple] = {
    "fp32": ("Fp32Cnn", 8, [("INPUT__0", "TYPE_FP32", [1, 8, 8])], [("OUTPUT__0", "TYPE_FP32", [5])], BATCHING),
    "int64": ("Int64Affine", 8, [("INPUT__0", "TYPE_INT64", [3])], [("OUTPUT__0", "TYPE_INT64", [3])], BATCHING),
    "uint8": ("Uint8Invert", 8, [("INPUT__0", "TYPE_UINT8", [4])], [("OUTPUT__0", "TYPE_UINT8", [4])], BATCHING),
    "bool": ("BoolNot", 8, [("INPUT__0", "TYPE_BOOL", [4])], [("OUTPUT__0", "TYPE_BOOL", [4])], BATCHING),
    "bytes": ("BytesUpper", 8, [("INPUT__0", "TYPE_STRING", [1])],
              [("OUTPUT__0", "TYPE_STRING", [1]), ("OUTPUT__1", "TYPE_INT64", [1])], BATCHING),
    "two_outputs": ("TwoOutputs", 8, [("INPUT__0", "TYPE_FP32", [4])],
                    [("OUTPUT__0", "TYPE_FP32", [4]), ("OUTPUT__1", "TYPE_FP32", [1])], BATCHING),
    "nobatch": ("NoBatch", 0, [("INPUT__0", "TYPE_FP32", [2, 3])], [("OUTPUT__0", "TYPE_FP32", [3])], ""),
    "slow": ("Slow", 16, [("INPUT__0", "TYPE_FP32", [64])], [("OUTPUT__0", "TYPE_FP32", [1])],
             "dynamic_batching { max_queue_delay_microseconds: 20000 }\n"
             "instance_group [ { count: 1 kind: KIND_CPU } ]\n"),
}
BROKEN = ("Broken", 8, [("INPUT__0", "TYPE_FP32", [4]), ("INPUT__1", "TYPE_FP32", [4])],
          [("OUTPUT__0", "TYPE_FP32", [4])],
          'model_warmup [ { name: "zeros" batch_size: 1 inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 '
          'dims: [ 4 ] zero_data: true } } inputs { key: "INPUT__1" value: { data_type: TYPE_FP32 dims: [ 4 ] '
          'zero_data: true } } } ]\n')

# Label files (output label_filename): the classification extension's labels.
LABELS: dict[str, list[str]] = {"fp32": ["ankle boot", "bag", "coat", "dress", "shirt"]}

# KServe datatype of each config type.
KSERVE = {"TYPE_FP32": "FP32", "TYPE_INT64": "INT64", "TYPE_UINT8": "UINT8", "TYPE_BOOL": "BOOL",
          "TYPE_STRING": "BYTES"}


def build_repository(root: Path, include_broken: bool = False, models: list[str] | None = None) -> Path:
    """Writes ROOT/NAME/config.pbtxt + ROOT/NAME/1/model.pt for each model (all by default)."""
    import importlib.util

    import torch

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    src = root.parent / "_serve_test_models.py"
    src.write_text(_model_sources(), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("_serve_test_models", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    table = dict(MODELS) if models is None else {m: MODELS[m] for m in models}
    if include_broken:
        table["broken"] = BROKEN
    for name, (cls, mbs, ins, outs, extra) in table.items():
        (root / name / "1").mkdir(parents=True, exist_ok=True)
        scripted = torch.jit.script(getattr(mod, cls)().eval())
        torch.jit.save(scripted, str(root / name / "1" / "model.pt"))
        config = _config(name, mbs, ins, outs, extra)
        if name in LABELS:
            (root / name / "labels.txt").write_text("\n".join(LABELS[name]) + "\n", encoding="utf-8")
            first_output = config.index("output [") + len("output [\n")
            close = config.index("}", first_output)
            config = config[:close] + 'label_filename: "labels.txt" ' + config[close:]
        (root / name / "config.pbtxt").write_text(config, encoding="utf-8")
    return root


def model_spec(name: str) -> dict:
    cls, mbs, ins, outs, _ = BROKEN if name == "broken" else MODELS[name]
    return {"max_batch_size": mbs,
            "inputs": [(n, KSERVE[t], d) for n, t, d in ins],
            "outputs": [(n, KSERVE[t], d) for n, t, d in outs]}


_loaded: dict[str, object] = {}


def reference(model: str, inputs: list, repo: Path) -> list[np.ndarray]:
    """The outputs Python torch computes with the same TorchScript file on the same inputs.

    inputs: one numpy array per model input (BYTES: an object array of bytes or str). Returns one
    numpy array per output, in config order (BYTES outputs as an object array of bytes)."""
    import torch

    path = str(Path(repo) / model / "1" / "model.pt")
    if path not in _loaded:
        _loaded[path] = torch.jit.load(path)
    m = _loaded[path]
    args = []
    for a in inputs:
        a = np.asarray(a)
        if a.dtype == object or a.dtype.kind in "SU":
            flat = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in a.reshape(-1)]
            args.append(flat)
        else:
            args.append(torch.from_numpy(np.ascontiguousarray(a)))
    with torch.no_grad():
        out = m(*args)
    outs = list(out) if isinstance(out, (tuple, list)) and not (out and isinstance(out[0], str)) else [out]
    result = []
    for i, o in enumerate(outs):
        if isinstance(o, list):
            shape = np.asarray(inputs[0]).shape
            result.append(np.array([s.encode("utf-8") for s in o], dtype=object).reshape(shape))
        else:
            result.append(o.numpy())
    return result


# ---------------------------------------------------------------------------------------------
# The server process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


GRPC_LINE = re.compile(r"^grpc: \[?([^\]\s]+?)\]?:(\d+)$", re.M)
SERVING = re.compile(r"serving: http://\[?([^\]\s]+?)\]?:(\d+) \(metrics (?:http://\[?[^\]\s]+?\]?:(\d+)/metrics|off)\)")


class ServeProcess:
    """`glassbox serve` on ephemeral ports; output goes to WORKDIR/NAME.log.

    start() waits for the `serving:` line (and /v2/health/live); port / metrics_port / grpc_port
    are then set (grpc_port 0 when `args` turn gRPC off with --grpc-port -1).
    stop() sends a signal and waits; the exit status is returned (and kept in .returncode)."""

    def __init__(self, glassbox: str, repo: Path, workdir: Path, args: list[str] | tuple = (), name: str = "serve"):
        self.cmd = [str(glassbox), "serve", "--model-repository", str(repo), "--address", "127.0.0.1",
                    "--http-port", "0", "--metrics-port", "0",
                    *([] if "--grpc-port" in map(str, args) else ["--grpc-port", "0"]), *map(str, args)]
        self.log_path = Path(workdir) / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.metrics_port = 0
        self.grpc_port = 0
        self.returncode: int | None = None

    def start(self, timeout: float = 180) -> "ServeProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.output()
            m = SERVING.search(text)
            if m:
                self.port = int(m.group(2))
                self.metrics_port = int(m.group(3) or 0)
                g = GRPC_LINE.search(text)
                self.grpc_port = int(g.group(2)) if g else 0
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"glassbox serve exited {self.proc.returncode} before serving:\n{text}")
            time.sleep(0.05)
        else:
            self.kill()
            raise RuntimeError(f"glassbox serve printed no 'serving:' line in {timeout} s:\n{self.output()}")
        while time.monotonic() < deadline:
            try:
                if request(self.port, "GET", "/v2/health/live", timeout=5)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"/v2/health/live never answered 200:\n{self.output()}")

    def output(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS line")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.returncode = self.proc.returncode
        self._log.close()
        return self.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "ServeProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------
# HTTP


def request(port: int, method: str, path: str, body: bytes | str | None = None, headers: dict | None = None,
         timeout: float = 60, host: str = "127.0.0.1") -> tuple[int, dict, bytes]:
    """One request on a fresh connection: (status, lower-cased headers, body)."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    conn = httplib.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def post_json(port: int, path: str, obj, headers: dict | None = None) -> tuple[int, dict, object]:
    status, h, body = request(port, "POST", path, json.dumps(obj), {"Content-Type": "application/json", **(headers or {})})
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = body
    return status, h, parsed


def get_json(port: int, path: str, headers: dict | None = None) -> tuple[int, object]:
    status, _, body = request(port, "GET", path, headers=headers)
    try:
        return status, (json.loads(body) if body else None)
    except ValueError:
        return status, body


def fp32_request(batch: int = 1, seed: int = 0) -> tuple[dict, np.ndarray]:
    """A JSON inference body for the fp32 model and its input."""
    x = np.random.default_rng(seed).standard_normal((batch, 1, 8, 8)).astype(np.float32)
    body = {"inputs": [{"name": "INPUT__0", "shape": list(x.shape), "datatype": "FP32", "data": x.reshape(-1).tolist()}]}
    return body, x


# ---------------------------------------------------------------------------------------------
# Checks


class Checks:
    """Collects failures; print_summary() prints them and returns the exit status."""

    def __init__(self, name: str):
        self.name = name
        self.failures: list[str] = []
        self.passed = 0

    def check(self, cond: bool, what: str) -> bool:
        if cond:
            self.passed += 1
        else:
            self.failures.append(what)
            print(f"FAIL: {what}", flush=True)
        return bool(cond)

    def ok(self, what: str) -> None:
        print(f"ok: {what}", flush=True)

    def summary(self) -> int:
        print(f"{self.name}: {self.passed} checks passed, {len(self.failures)} failed")
        for f in self.failures:
            print("  FAIL:", f)
        return 1 if self.failures else 0


def close_enough(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> tuple[bool, str]:
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return False, f"shape {list(got.shape)} != {list(want.shape)}"
    if want.dtype == object or got.dtype == object:
        same = [bytes(a) if not isinstance(a, str) else a.encode() for a in got.reshape(-1)] == \
               [bytes(b) if not isinstance(b, str) else b.encode() for b in want.reshape(-1)]
        return same, f"{got.reshape(-1).tolist()} vs {want.reshape(-1).tolist()}"
    if want.dtype.kind in "biu":
        same = np.array_equal(got.astype(want.dtype), want)
        return same, f"max |d| {np.max(np.abs(got.astype(np.int64) - want.astype(np.int64))) if got.size else 0}"
    d = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
    return bool(np.allclose(got, want, rtol=rtol, atol=atol)), f"max |d| {d:.3g}"


def workdir_arg(value: str | None, prefix: str) -> Path:
    import tempfile

    if value:
        p = Path(value)
        p.mkdir(parents=True, exist_ok=True)
        return p
    return Path(tempfile.mkdtemp(prefix=prefix))


if __name__ == "__main__":  # build a repository for manual use: serve_common.py DIR [--broken]
    out = build_repository(Path(sys.argv[1]), include_broken="--broken" in sys.argv)
    print("wrote", out, sorted(os.listdir(out)))
