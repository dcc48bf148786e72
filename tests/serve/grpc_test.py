#!/usr/bin/env python3
"""glassbox serve's gRPC front end against Triton's own clients: tritonclient.grpc (sync, async with
callbacks, the asyncio client, and the bidirectional stream), every answer cross-checked against
Python torch running the same TorchScript file and against the HTTP front end of the same server
(bitwise); statistics through gRPC equal those through HTTP; metadata, config, the repository index,
errors as gRPC status codes with HTTP's messages; a second server in explicit model-control mode
with an API key (load with a config override, unload; refused without the key); and perf_analyzer
-i grpc unchanged: synchronous, --async and --streaming.

    grpc_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR] [--perf-analyzer PATH]
Exits 0 when every check holds, 1 otherwise (each failure printed), 77 without tritonclient.grpc.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

try:
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError as e:  # pragma: no cover - the .venv has it
    print(f"skipped: tritonclient.grpc is not importable ({e})")
    sys.exit(sc.SKIP)

API_KEY = "glassbox-test-key-0123456789"
MODELS = ["fp32", "int64", "uint8", "bool", "bytes", "two_outputs", "nobatch"]


def sample_inputs(model: str, batch: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if model in ("fp32",):
        return [rng.standard_normal((batch, 1, 8, 8)).astype(np.float32)]
    if model == "int64":
        return [rng.integers(-(2**40), 2**40, size=(batch, 3), dtype=np.int64)]
    if model == "uint8":
        return [rng.integers(0, 256, size=(batch, 4), dtype=np.uint8)]
    if model == "bool":
        return [rng.integers(0, 2, size=(batch, 4)).astype(bool)]
    if model == "bytes":
        words = [b"glass", b"box", b"", "h\u00e9llo".encode(), b"a" * 300]
        return [np.array([[words[(seed + i) % len(words)]] for i in range(batch)], dtype=object)]
    if model == "two_outputs":
        return [rng.standard_normal((batch, 4)).astype(np.float32)]
    if model == "nobatch":
        return [rng.standard_normal((2, 3)).astype(np.float32)]
    raise KeyError(model)


def inputs_for(module, model: str, arrays: list[np.ndarray]) -> list:
    out = []
    for (name, dtype, _), a in zip(sc.model_spec(model)["inputs"], arrays):
        i = module.InferInput(name, list(a.shape), dtype)
        i.set_data_from_numpy(a)
        out.append(i)
    return out


def output_names(model: str) -> list[str]:
    return [n for n, _, _ in sc.model_spec(model)["outputs"]]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == object:
        return [bytes(x) for x in a.reshape(-1)] == [bytes(x) for x in b.reshape(-1)]
    return a.tobytes() == b.tobytes()


def check_result(c: sc.Checks, what: str, result, model: str, arrays: list[np.ndarray], repo: Path,
                 http_result=None, names: list[str] | None = None) -> None:
    want = sc.reference(model, arrays, repo)
    for (name, dtype, _), w in zip(sc.model_spec(model)["outputs"], want):
        if names is not None and name not in names:
            continue
        got = result.as_numpy(name)
        if not c.check(got is not None, f"{what}: output {name} missing"):
            continue
        same, detail = sc.close_enough(got, w)
        c.check(same, f"{what}: output {name} differs from Python torch ({detail})")
        meta = result.get_output(name)
        c.check(meta is not None and meta.datatype == dtype, f"{what}: output {name} datatype")
        if http_result is not None:
            c.check(same_bits(got, http_result.as_numpy(name)), f"{what}: output {name} differs from HTTP's (bitwise)")


def grpc_error(fn) -> InferenceServerException | None:
    try:
        fn()
    except InferenceServerException as e:
        return e
    return None


def http_stats(port: int) -> dict:
    status, stats = sc.get_json(port, "/v2/models/stats")
    return {s["name"]: s for s in stats["model_stats"]} if status == 200 else {}


def server_none(args, c: sc.Checks, repo: Path, work: Path) -> None:
    with sc.ServeProcess(args.glassbox, repo, work, name="serve-grpc") as srv:
        c.check(srv.grpc_port > 0, f"no 'grpc:' line in the server's output:\n{srv.output()[-2000:]}")
        url = f"127.0.0.1:{srv.grpc_port}"
        cl = grpcclient.InferenceServerClient(url)
        hc = httpclient.InferenceServerClient(f"127.0.0.1:{srv.port}")

        c.check(cl.is_server_live(), "is_server_live is False")
        c.check(cl.is_server_ready(), "is_server_ready is False")
        md = cl.get_server_metadata(as_json=True)
        c.check(md == hc.get_server_metadata(), f"server metadata differs from HTTP's: {md}")
        for model in MODELS:
            c.check(cl.is_model_ready(model), f"is_model_ready({model}) is False")
            gm = cl.get_model_metadata(model, as_json=True)
            hm = hc.get_model_metadata(model)
            for t in gm["inputs"] + gm["outputs"]:
                t["shape"] = [int(d) for d in t["shape"]]
            c.check({k: gm.get(k) for k in ("name", "versions", "platform", "inputs", "outputs")} ==
                    {k: hm.get(k) for k in ("name", "versions", "platform", "inputs", "outputs")},
                    f"metadata {model}: gRPC {gm} vs HTTP {hm}")
            gc = cl.get_model_config(model, as_json=True)["config"]
            hconf = hc.get_model_config(model)
            c.check(gc.get("name") == model and int(gc.get("max_batch_size", 0)) == hconf["max_batch_size"],
                    f"config {model}: gRPC {gc} vs HTTP max_batch_size {hconf['max_batch_size']}")
            c.check([i["name"] for i in gc.get("input", [])] == [i["name"] for i in hconf["input"]],
                    f"config {model}: inputs {gc.get('input')}")
        c.ok("health, metadata and config agree with HTTP")

        # Synchronous inference, each model, against torch and against HTTP.
        for model in MODELS:
            batch = 1 if model == "nobatch" else 3
            arrays = sample_inputs(model, batch, seed=7)
            r = cl.infer(model, inputs_for(grpcclient, model, arrays), request_id=f"sync-{model}")
            h = hc.infer(model, inputs_for(httpclient, model, arrays))
            check_result(c, f"sync {model}", r, model, arrays, repo, http_result=h)
            c.check(r.get_response().id == f"sync-{model}", f"sync {model}: id {r.get_response().id!r}")
            c.check(r.get_response().model_version == "1", f"sync {model}: version {r.get_response().model_version!r}")
        arrays = sample_inputs("two_outputs", 2, seed=3)
        r = cl.infer("two_outputs", inputs_for(grpcclient, "two_outputs", arrays),
                     outputs=[grpcclient.InferRequestedOutput("OUTPUT__1")])
        check_result(c, "requested output", r, "two_outputs", arrays, repo, names=["OUTPUT__1"])
        c.check(r.as_numpy("OUTPUT__0") is None, "requested output: OUTPUT__0 was not asked for")
        c.ok("synchronous inference equals torch and HTTP bitwise")

        # The classification extension, against torch and the label file, equal to HTTP's answer.
        arrays = sample_inputs("fp32", 2, seed=11)
        want = sc.reference("fp32", arrays, repo)[0]
        expected = [[f"{float(row[i]):f}:{i}:{sc.LABELS['fp32'][i]}".encode()
                     for i in sorted(range(len(row)), key=lambda i: (-row[i], i))[:3]] for row in want]
        r = cl.infer("fp32", inputs_for(grpcclient, "fp32", arrays),
                     outputs=[grpcclient.InferRequestedOutput("OUTPUT__0", class_count=3)])
        h = hc.infer("fp32", inputs_for(httpclient, "fp32", arrays),
                     outputs=[httpclient.InferRequestedOutput("OUTPUT__0", binary_data=True, class_count=3)])
        got = r.as_numpy("OUTPUT__0")
        c.check(got is not None and [[bytes(x) for x in g] for g in got] == expected,
                f"classification over gRPC: {got!r} != {expected!r}")
        c.check(got is not None and same_bits(got, h.as_numpy("OUTPUT__0")), "classification: gRPC != HTTP")

        # Versions are numbered from 1 (Triton): version 0 is not found, and not ready.
        e = grpc_error(lambda: cl.get_model_metadata("fp32", "0"))
        c.check(e is not None and e.status() == "StatusCode.NOT_FOUND" and "version 0" in e.message(),
                f"metadata of version 0: {e and (e.status(), e.message())}")
        e = grpc_error(lambda: cl.infer("fp32", inputs_for(grpcclient, "fp32", arrays), model_version="0"))
        c.check(e is not None and e.status() == "StatusCode.NOT_FOUND", f"infer on version 0: {e and e.status()}")
        c.check(not cl.is_model_ready("fp32", "0"), "version 0 is ready")

        # Errors: the HTTP message, as a gRPC status.
        e = grpc_error(lambda: cl.infer("nope", inputs_for(grpcclient, "fp32", sample_inputs("fp32", 1, 0))))
        c.check(e is not None and e.status() == "StatusCode.INVALID_ARGUMENT" and "nope" in e.message(),
                f"unknown model: {e and (e.status(), e.message())}")
        bad = [np.zeros((1, 64), np.float32)]
        bad_in = grpcclient.InferInput("INPUT__0", [1, 64], "FP32")
        bad_in.set_data_from_numpy(bad[0])
        e = grpc_error(lambda: cl.infer("fp32", [bad_in]))
        hin = httpclient.InferInput("INPUT__0", [1, 64], "FP32")
        hin.set_data_from_numpy(bad[0])
        he = grpc_error(lambda: hc.infer("fp32", [hin]))
        c.check(e is not None and e.status() == "StatusCode.INVALID_ARGUMENT", f"wrong shape: {e}")
        c.check(e is not None and he is not None and e.message() == he.message(),
                f"wrong shape: gRPC says {e and e.message()!r}, HTTP {he and he.message()!r}")
        c.ok(f"errors: {e and e.message()}")

        # Async with callbacks.
        done: dict[int, tuple] = {}
        lock = threading.Condition()
        sent = {}
        for i in range(24):
            arrays = sample_inputs("fp32", 1 + i % 4, seed=100 + i)
            sent[i] = arrays

            def cb(result, error, i=i):
                with lock:
                    done[i] = (result, error)
                    lock.notify_all()
            cl.async_infer("fp32", inputs_for(grpcclient, "fp32", arrays), cb, request_id=str(i))
        with lock:
            lock.wait_for(lambda: len(done) == 24, timeout=120)
        c.check(len(done) == 24, f"async_infer: {len(done)} of 24 callbacks")
        for i, (result, error) in sorted(done.items()):
            if c.check(error is None, f"async_infer {i}: {error}"):
                check_result(c, f"async_infer {i}", result, "fp32", sent[i], repo)
                c.check(result.get_response().id == str(i), f"async_infer {i}: id {result.get_response().id}")
        c.ok("async_infer with callbacks")

        # The asyncio client.
        try:
            import tritonclient.grpc.aio as aioclient
        except ImportError:
            aioclient = None
        if aioclient is not None:
            async def run_aio():
                ac = aioclient.InferenceServerClient(url)
                try:
                    jobs = [ac.infer("int64", inputs_for(aioclient, "int64", sample_inputs("int64", 2, 200 + k)),
                                     request_id=f"aio-{k}") for k in range(12)]
                    return await asyncio.gather(*jobs), await ac.is_server_ready()
                finally:
                    await ac.close()
            results, ready = asyncio.run(run_aio())
            c.check(ready, "aio: is_server_ready is False")
            for k, res in enumerate(results):
                check_result(c, f"aio {k}", res, "int64", sample_inputs("int64", 2, 200 + k), repo)
                c.check(res.get_response().id == f"aio-{k}", f"aio {k}: id")
            c.ok("tritonclient.grpc.aio")

        # The bidirectional stream: answers with ids, an in-band error, the stream goes on.
        got: dict[str, tuple] = {}
        stream_cv = threading.Condition()

        def on_stream(result, error):
            with stream_cv:
                key = result.get_response().id if result is not None else f"error-{len(got)}"
                got[key] = (result, error)
                stream_cv.notify_all()
        cl.start_stream(callback=on_stream)
        stream_sent = {}
        for i in range(16):
            if i == 5:
                cl.async_stream_infer("fp32", [bad_in], request_id="bad")
                continue
            arrays = sample_inputs("fp32", 2, seed=300 + i)
            stream_sent[f"s{i}"] = arrays
            cl.async_stream_infer("fp32", inputs_for(grpcclient, "fp32", arrays), request_id=f"s{i}")
        with stream_cv:
            stream_cv.wait_for(lambda: len(got) == 16, timeout=120)
        cl.stop_stream()
        errors = [e for r, e in got.values() if e is not None]
        c.check(len(got) == 16, f"stream: {len(got)} of 16 answers")
        c.check(len(errors) == 1 and "unexpected shape" in str(errors[0]), f"stream: errors {errors}")
        for key, arrays in stream_sent.items():
            if c.check(key in got and got[key][1] is None, f"stream {key}: no answer"):
                check_result(c, f"stream {key}", got[key][0], "fp32", arrays, repo)
        c.ok("streaming: 15 answers and one in-band error")

        # Statistics through gRPC equal those through HTTP (no traffic in between).
        gstats = {s["name"]: s for s in cl.get_inference_statistics(as_json=True)["model_stats"]}
        hstats = http_stats(srv.port)
        for model in MODELS:
            g, h = gstats.get(model, {}), hstats.get(model, {})
            gi, hi = g.get("inference_stats", {}), h.get("inference_stats", {})
            for k in ("success", "fail", "queue", "compute_infer"):
                c.check(int(gi.get(k, {}).get("count", 0)) == int(hi.get(k, {}).get("count", -1)),
                        f"stats {model}: {k} count gRPC {gi.get(k)} vs HTTP {hi.get(k)}")
            for k in ("inference_count", "execution_count", "last_inference"):
                c.check(int(g.get(k, 0)) == int(h.get(k, -1)), f"stats {model}: {k} gRPC {g.get(k)} vs HTTP {h.get(k)}")
        c.check(int(gstats["fp32"]["inference_stats"]["success"]["count"]) >= 24 + 15,
                f"stats fp32: success {gstats['fp32']['inference_stats']['success']}")
        one = cl.get_inference_statistics("int64", "1", as_json=True)["model_stats"]
        c.check(len(one) == 1 and one[0]["name"] == "int64" and one[0]["version"] == "1", f"stats int64 v1: {one}")
        c.ok("statistics agree between gRPC and HTTP")

        idx = cl.get_model_repository_index(as_json=True).get("models", [])
        c.check(sorted(m["name"] for m in idx) == sorted(sc.MODELS), f"repository index: {idx}")
        c.check(all(m.get("state") == "READY" for m in idx), f"repository index states: {idx}")
        perf_analyzer(args, c, srv, work)
        cl.close()
    c.check(srv.returncode == 0, f"server exited {srv.returncode} on SIGTERM")


def server_explicit(args, c: sc.Checks, repo: Path, work: Path) -> None:
    key_file = work / "api.key"
    key_file.write_text(API_KEY + "\n")
    with sc.ServeProcess(args.glassbox, repo, work, name="serve-grpc-explicit",
                         args=["--model-control-mode", "explicit", "--load-model", "fp32",
                               "--api-key-file", key_file]) as srv:
        cl = grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc_port}")
        e = grpc_error(lambda: cl.load_model("int64"))
        c.check(e is not None and e.status() == "StatusCode.UNAUTHENTICATED", f"load without key: {e}")
        e = grpc_error(lambda: cl.load_model("int64", headers={"authorization": "Bearer wrong-key-123"}))
        c.check(e is not None and e.status() == "StatusCode.PERMISSION_DENIED", f"load with a wrong key: {e}")
        e = grpc_error(lambda: cl.get_model_repository_index())
        c.check(e is not None and e.status() == "StatusCode.UNAUTHENTICATED", f"index without key: {e}")
        auth = {"authorization": f"Bearer {API_KEY}"}
        c.check(not cl.is_model_ready("int64"), "int64 ready before its load")
        cl.load_model("int64", headers=auth)
        c.check(cl.is_model_ready("int64"), "int64 not ready after load")
        arrays = sample_inputs("int64", 2, 1)
        check_result(c, "explicit int64", cl.infer("int64", inputs_for(grpcclient, "int64", arrays)), "int64", arrays,
                     repo)
        cfg = json.dumps({"max_batch_size": 4, "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [4]}],
                          "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [4]},
                                     {"name": "OUTPUT__1", "data_type": "TYPE_FP32", "dims": [1]}],
                          "platform": "pytorch_libtorch"})
        cl.load_model("two_outputs", config=cfg, headers={"x-api-key": API_KEY})
        got = cl.get_model_config("two_outputs", as_json=True)["config"]
        c.check(int(got.get("max_batch_size", 0)) == 4, f"config override: {got}")
        idx = cl.get_model_repository_index(headers=auth, as_json=True)["models"]
        c.check({m["name"] for m in idx if m.get("state") == "READY"} == {"fp32", "int64", "two_outputs"},
                f"index after loads: {idx}")
        cl.unload_model("int64", headers=auth)
        deadline = time.monotonic() + 30
        while cl.is_model_ready("int64") and time.monotonic() < deadline:
            time.sleep(0.1)
        c.check(not cl.is_model_ready("int64"), "int64 still ready after unload")
        e = grpc_error(lambda: cl.infer("int64", inputs_for(grpcclient, "int64", arrays)))
        c.check(e is not None, "inference on an unloaded model succeeded")
        c.ok(f"explicit mode over gRPC with the API key (after unload: {e and e.status()})")
        cl.close()
    c.check(srv.returncode == 0, f"explicit server exited {srv.returncode} on SIGTERM")


def perf_analyzer(args, c: sc.Checks, srv: sc.ServeProcess, work: Path) -> None:
    pa = args.perf_analyzer or str(Path(sys.executable).parent / "perf_analyzer")
    if not Path(pa).exists():
        print("perf_analyzer not installed: its runs are skipped")
        return
    sweep = ["--concurrency-range", "1:2", "--measurement-mode", "count_windows", "--measurement-request-count", "50",
             "--stability-percentage", "1000", "--max-trials", "20"]
    for what, extra in (("sync", []), ("async", ["--async"]), ("streaming", ["--streaming"])):
        before = http_stats(srv.port)["fp32"]["inference_stats"]
        cmd = [pa, "-m", "fp32", "-u", f"localhost:{srv.grpc_port}", "-i", "grpc", *sweep, *extra]
        t = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        after = http_stats(srv.port)["fp32"]["inference_stats"]
        print(f"--- perf_analyzer -i grpc {what}: exit {r.returncode} in {time.monotonic() - t:.1f} s\n$ {' '.join(cmd)}")
        print(r.stdout[-1500:])
        if r.stderr.strip():
            print("stderr:", r.stderr[-1500:])
        c.check(r.returncode == 0, f"perf_analyzer -i grpc {what}: exit {r.returncode}")
        ok = int(after["success"]["count"]) - int(before["success"]["count"])
        fail = int(after["fail"]["count"]) - int(before["fail"]["count"])
        c.check(ok >= 100 and fail == 0, f"perf_analyzer -i grpc {what}: the server counted {ok} successes, {fail} failures")
        c.check("Throughput:" in r.stdout, f"perf_analyzer -i grpc {what}: no throughput in its report")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--perf-analyzer")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-serve-grpc-")
    c = sc.Checks("grpc_test")
    repo = sc.build_repository(work / "repo")
    server_none(args, c, repo, work)
    server_explicit(args, c, repo, work)
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
