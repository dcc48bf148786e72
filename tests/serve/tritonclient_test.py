#!/usr/bin/env python3
"""glassbox serve against Triton's own Python client (tritonclient.http, PyPI): health, server and
model metadata, model config, inference with JSON and with binary tensors for FP32, INT64, UINT8,
BOOL and BYTES (outputs cross-checked against Python torch running the same TorchScript file),
request ids, output selection, many async requests in flight, statistics, the repository index,
and a second server in explicit model-control mode with an API key (load, load with a config
override, unload; 403 without the key).

    tritonclient_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Exits 0 when every check holds, 1 otherwise (each failure printed), 77 without tritonclient.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

try:
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError as e:  # pragma: no cover - the .venv has it
    print(f"skipped: tritonclient is not importable ({e})")
    sys.exit(sc.SKIP)

API_KEY = "glassbox-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def sample_inputs(model: str, batch: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if model == "fp32":
        return [rng.standard_normal((batch, 1, 8, 8)).astype(np.float32)]
    if model == "int64":
        x = rng.integers(-(2**40), 2**40, size=(batch, 3), dtype=np.int64)
        return [x]
    if model == "uint8":
        x = rng.integers(0, 256, size=(batch, 4), dtype=np.uint8)
        x[0, :2] = [0, 255]
        return [x]
    if model == "bool":
        return [rng.integers(0, 2, size=(batch, 4)).astype(bool)]
    if model == "bytes":
        words = [b"glass", b"box", b"", "h\u00e9llo w\u00f6rld".encode(), b"Triton 2.x", b"a" * 300]
        return [np.array([[words[(seed + i) % len(words)]] for i in range(batch)], dtype=object)]
    if model == "two_outputs":
        return [rng.standard_normal((batch, 4)).astype(np.float32)]
    if model == "nobatch":
        return [rng.standard_normal((2, 3)).astype(np.float32)]
    if model == "slow":
        return [rng.standard_normal((batch, 64)).astype(np.float32)]
    raise KeyError(model)


def make_inputs(model: str, arrays: list[np.ndarray], binary: bool) -> list:
    spec = sc.model_spec(model)
    out = []
    for (name, dtype, _), a in zip(spec["inputs"], arrays):
        i = httpclient.InferInput(name, list(a.shape), dtype)
        i.set_data_from_numpy(a, binary_data=binary)
        out.append(i)
    return out


def compare(c: sc.Checks, what: str, result, model: str, arrays: list[np.ndarray], repo: Path,
            names: list[str] | None = None) -> None:
    spec = sc.model_spec(model)
    want = sc.reference(model, arrays, repo)
    for (name, dtype, _), w in zip(spec["outputs"], want):
        if names is not None and name not in names:
            continue
        got = result.as_numpy(name)
        if not c.check(got is not None, f"{what}: output {name} missing"):
            continue
        same, detail = sc.close_enough(got, w)
        c.check(same, f"{what}: output {name} differs from Python torch ({detail})")
        out_meta = result.get_output(name)
        c.check(out_meta is not None and out_meta.get("datatype") == dtype,
                f"{what}: output {name} datatype {out_meta and out_meta.get('datatype')} (expected {dtype})")


def stat_of(stats: dict, model: str) -> dict:
    for s in stats.get("model_stats", []):
        if s.get("name") == model:
            return s
    return {}


def count(s: dict, key: str) -> int:
    return int(s.get("inference_stats", {}).get(key, {}).get("count", 0))


def check_stats_consistency(c: sc.Checks, s: dict, model: str) -> None:
    inf = s.get("inference_stats", {})
    for k in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"):
        c.check(k in inf and "count" in inf[k] and "ns" in inf[k], f"stats {model}: inference_stats.{k} missing")
    q, ci, cf, co, ok = (count(s, k) for k in ("queue", "compute_input", "compute_infer", "compute_output", "success"))
    c.check(q == ci == cf == co == ok, f"stats {model}: queue {q}, compute_input {ci}, compute_infer {cf}, "
                                       f"compute_output {co}, success {ok} (expected all equal)")
    bs = s.get("batch_stats", [])
    elems = sum(int(b["batch_size"]) * int(b["compute_infer"]["count"]) for b in bs)
    execs = sum(int(b["compute_infer"]["count"]) for b in bs)
    c.check(elems == int(s.get("inference_count", -1)),
            f"stats {model}: sum(batch_size x count) over batch_stats {elems} != inference_count {s.get('inference_count')}")
    c.check(execs == int(s.get("execution_count", -1)),
            f"stats {model}: sum(count) over batch_stats {execs} != execution_count {s.get('execution_count')}")
    sizes = [int(b["batch_size"]) for b in bs]
    c.check(sizes == sorted(sizes), f"stats {model}: batch_stats not ascending: {sizes}")


def server_none(args, c: sc.Checks, repo: Path, work: Path) -> None:
    with sc.ServeProcess(args.glassbox, repo, work, name="serve-none") as srv:
        url = f"127.0.0.1:{srv.port}"
        cl = httpclient.InferenceServerClient(url, concurrency=16, network_timeout=120, connection_timeout=60)

        c.check(cl.is_server_live(), "is_server_live is False")
        c.check(cl.is_server_ready(), "is_server_ready is False")
        md = cl.get_server_metadata()
        print("server metadata:", json.dumps(md))
        c.check(isinstance(md.get("name"), str) and md["name"], f"server metadata name: {md.get('name')!r}")
        c.check(isinstance(md.get("version"), str) and md["version"], f"server metadata version: {md.get('version')!r}")
        ext = md.get("extensions")
        c.check(isinstance(ext, list), f"server metadata extensions is not a list: {ext!r}")
        ext = ext or []
        for e in ("binary_tensor_data", "statistics", "model_repository"):
            c.check(e in ext, f"extension {e!r} not advertised: {ext}")

        # Per-model readiness, metadata and config.
        for model in sc.MODELS:
            spec = sc.model_spec(model)
            c.check(cl.is_model_ready(model), f"is_model_ready({model}) is False")
            c.check(cl.is_model_ready(model, "1"), f"is_model_ready({model}, '1') is False")
            meta = cl.get_model_metadata(model)
            c.check(meta.get("name") == model, f"metadata {model}: name {meta.get('name')!r}")
            c.check("1" in meta.get("versions", []), f"metadata {model}: versions {meta.get('versions')}")
            c.check(meta.get("platform") == "pytorch_libtorch", f"metadata {model}: platform {meta.get('platform')!r}")
            lead = [-1] if spec["max_batch_size"] > 0 else []
            for kind in ("inputs", "outputs"):
                got = [(t.get("name"), t.get("datatype"), [int(d) for d in t.get("shape", [])]) for t in meta.get(kind, [])]
                want = [(n, dt, lead + d) for n, dt, d in spec[kind]]
                c.check(got == want, f"metadata {model}: {kind} {got} (expected {want})")
            cfg = cl.get_model_config(model)
            c.check(int(cfg.get("max_batch_size", 0)) == spec["max_batch_size"],
                    f"config {model}: max_batch_size {cfg.get('max_batch_size')} (expected {spec['max_batch_size']})")
            c.check([i.get("name") for i in cfg.get("input", [])] == [n for n, _, _ in spec["inputs"]],
                    f"config {model}: input names {[i.get('name') for i in cfg.get('input', [])]}")
            c.check([o.get("name") for o in cfg.get("output", [])] == [n for n, _, _ in spec["outputs"]],
                    f"config {model}: output names {[o.get('name') for o in cfg.get('output', [])]}")
            if spec["max_batch_size"] > 0:
                c.check("dynamic_batching" in cfg, f"config {model}: dynamic_batching missing")
            if "dynamic_batching" in cfg:
                c.check("decoupled" in cfg.get("model_transaction_policy", {}),
                        f"config {model}: model_transaction_policy.decoupled missing (perf_analyzer reads it)")
                c.check("enable" in cfg.get("response_cache", {}),
                        f"config {model}: response_cache.enable missing (perf_analyzer reads it)")
        c.ok(f"metadata and config of {len(sc.MODELS)} models")

        # Inference, JSON and binary, each datatype; outputs against Python torch.
        for model in ("fp32", "int64", "uint8", "bool", "bytes", "two_outputs", "nobatch"):
            for binary in (False, True):
                for batch in (1, 3):
                    arrays = sample_inputs(model, batch, seed=batch * 10 + binary)
                    spec = sc.model_spec(model)
                    outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n, _, _ in spec["outputs"]]
                    what = f"infer {model} {'binary' if binary else 'json'} batch {batch}"
                    try:
                        r = cl.infer(model, make_inputs(model, arrays, binary), outputs=outputs)
                    except InferenceServerException as e:
                        c.check(False, f"{what}: {e.status()} {e.message()}")
                        continue
                    compare(c, what, r, model, arrays, repo)
                    resp = r.get_response()
                    c.check(resp.get("model_name") == model and str(resp.get("model_version")) == "1",
                            f"{what}: model_name/model_version {resp.get('model_name')!r}/{resp.get('model_version')!r}")
                    for o in resp.get("outputs", []):
                        params = o.get("parameters", {})
                        c.check(("binary_data_size" in params) == binary and set(params) <= {"binary_data_size"},
                                f"{what}: output {o.get('name')} parameters {params}")
        c.ok("inference JSON + binary for FP32, INT64, UINT8, BOOL, BYTES, two outputs, max_batch_size 0")

        # Binary inputs with JSON outputs and the reverse; no outputs listed (all, binary by default?).
        arrays = sample_inputs("fp32", 2, seed=99)
        r = cl.infer("fp32", make_inputs("fp32", arrays, True),
                     outputs=[httpclient.InferRequestedOutput("OUTPUT__0", binary_data=False)])
        compare(c, "fp32 binary in, JSON out", r, "fp32", arrays, repo)
        r = cl.infer("fp32", make_inputs("fp32", arrays, False),
                     outputs=[httpclient.InferRequestedOutput("OUTPUT__0", binary_data=True)])
        compare(c, "fp32 JSON in, binary out", r, "fp32", arrays, repo)
        r = cl.infer("two_outputs", make_inputs("two_outputs", sample_inputs("two_outputs", 2, 5), False))
        compare(c, "two_outputs, outputs omitted", r, "two_outputs", sample_inputs("two_outputs", 2, 5), repo)

        # The classification extension: the top 3 of each item as "score:index:label", against torch.
        want = sc.reference("fp32", arrays, repo)[0]
        for binary in (False, True):
            r = cl.infer("fp32", make_inputs("fp32", arrays, binary),
                         outputs=[httpclient.InferRequestedOutput("OUTPUT__0", binary_data=binary, class_count=3)])
            got = r.as_numpy("OUTPUT__0")
            expected = [[f"{float(row[i]):f}:{i}:{sc.LABELS['fp32'][i]}".encode()
                         for i in sorted(range(len(row)), key=lambda i: (-row[i], i))[:3]] for row in want]
            c.check(got is not None and got.shape == (2, 3) and
                    [[x if isinstance(x, bytes) else str(x).encode() for x in g] for g in got] == expected,
                    f"classification ({'binary' if binary else 'json'}): {got!r} != {expected!r}")
        c.check("classification" in ext, f"extension 'classification' not advertised: {ext}")

        # Request id echo; one output of two.
        r = cl.infer("fp32", make_inputs("fp32", arrays, True), request_id="req-42/\u00e9")
        c.check(r.get_response().get("id") == "req-42/\u00e9", f"request id echo: {r.get_response().get('id')!r}")
        r = cl.infer("fp32", make_inputs("fp32", arrays, False))
        c.check("id" not in r.get_response() or r.get_response()["id"] == "",
                f"no request id: response id {r.get_response().get('id')!r}")
        arrays2 = sample_inputs("two_outputs", 3, seed=7)
        for binary in (False, True):
            r = cl.infer("two_outputs", make_inputs("two_outputs", arrays2, binary),
                         outputs=[httpclient.InferRequestedOutput("OUTPUT__1", binary_data=binary)])
            names = [o.get("name") for o in r.get_response().get("outputs", [])]
            c.check(names == ["OUTPUT__1"], f"two_outputs select OUTPUT__1 ({'binary' if binary else 'json'}): outputs {names}")
            compare(c, "two_outputs OUTPUT__1 only", r, "two_outputs", arrays2, repo, names=["OUTPUT__1"])
        # Explicit version 1.
        r = cl.infer("int64", make_inputs("int64", sample_inputs("int64", 2, 3), True), model_version="1")
        compare(c, "int64 version 1", r, "int64", sample_inputs("int64", 2, 3), repo)
        c.ok("request id echo, output selection, explicit version")

        # Statistics: sequential requests on int64.
        before = stat_of(cl.get_inference_statistics("int64"), "int64")
        sizes = [1, 2, 3, 1, 2]
        for i, b in enumerate(sizes):
            cl.infer("int64", make_inputs("int64", sample_inputs("int64", b, 100 + i), True))
        after = stat_of(cl.get_inference_statistics("int64"), "int64")
        print("int64 stats after:", json.dumps(after))
        c.check(count(after, "success") - count(before, "success") == len(sizes),
                f"stats int64: success grew {count(after, 'success') - count(before, 'success')} (expected {len(sizes)})")
        c.check(int(after.get("inference_count", 0)) - int(before.get("inference_count", 0)) == sum(sizes),
                f"stats int64: inference_count grew {int(after.get('inference_count', 0)) - int(before.get('inference_count', 0))}"
                f" (expected {sum(sizes)})")
        c.check(int(after.get("execution_count", 0)) - int(before.get("execution_count", 0)) == len(sizes),
                f"stats int64: execution_count grew {int(after.get('execution_count', 0)) - int(before.get('execution_count', 0))}"
                f" for {len(sizes)} sequential requests")
        c.check(str(after.get("version")) == "1", f"stats int64: version {after.get('version')!r}")
        now_ms = time.time() * 1000
        c.check(abs(int(after.get("last_inference", 0)) - now_ms) < 86_400_000,
                f"stats int64: last_inference {after.get('last_inference')} is not ms since the epoch")
        check_stats_consistency(c, after, "int64")
        try:
            cl.infer("int64", [httpclient.InferInput("INPUT__0", [1, 2], "INT64").set_data_from_numpy(
                np.zeros((1, 2), np.int64))])
            c.check(False, "int64 with shape [1,2] was accepted")
        except InferenceServerException as e:
            c.check(e.status() == "400", f"int64 wrong shape: status {e.status()} ({e.message()})")
        after_fail = stat_of(cl.get_inference_statistics("int64"), "int64")
        c.check(count(after_fail, "success") == count(after, "success"), "stats int64: a rejected request counted as success")

        # Many async requests in flight: fp32 (correctness) and slow (batching shows in the counts).
        pending = []
        for i in range(48):
            arrays = sample_inputs("fp32", 1 + i % 3, seed=1000 + i)
            pending.append((arrays, cl.async_infer("fp32", make_inputs("fp32", arrays, i % 2 == 0), request_id=f"a{i}")))
        bad = 0
        for i, (arrays, p) in enumerate(pending):
            r = p.get_result()
            want = sc.reference("fp32", arrays, repo)[0]
            same, detail = sc.close_enough(r.as_numpy("OUTPUT__0"), want)
            bad += (not same) or r.get_response().get("id") != f"a{i}"
        c.check(bad == 0, f"async fp32: {bad} of {len(pending)} responses wrong or with the wrong id")
        # Batching shows in the counts: 8 threads, each its own client, 6 requests each to the slow model.
        before = stat_of(cl.get_inference_statistics("slow"), "slow")
        bad = []

        def worker(k: int) -> None:
            own = httpclient.InferenceServerClient(url, network_timeout=120, connection_timeout=60)
            for j in range(6):
                arrays = sample_inputs("slow", 1, seed=2000 + 10 * k + j)
                try:
                    r = own.infer("slow", make_inputs("slow", arrays, True))
                    same, _ = sc.close_enough(r.as_numpy("OUTPUT__0"), sc.reference("slow", arrays, repo)[0])
                    if not same:
                        bad.append("differs from Python torch")
                except InferenceServerException as e:
                    bad.append(f"{e.status()} {e.message()}")
            own.close()

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        c.check(not bad, f"slow from 8 threads: {len(bad)} of 48 failed: {bad[:2]}")
        after = stat_of(cl.get_inference_statistics("slow"), "slow")
        d_inf = int(after.get("inference_count", 0)) - int(before.get("inference_count", 0))
        d_exec = int(after.get("execution_count", 0)) - int(before.get("execution_count", 0))
        print(f"slow: 48 requests from 8 threads -> inference_count +{d_inf}, execution_count +{d_exec}, "
              f"batch sizes {[(b['batch_size'], b['compute_infer']['count']) for b in after.get('batch_stats', [])]}")
        c.check(d_inf == 48, f"stats slow: inference_count grew {d_inf} (expected 48)")
        c.check(0 < d_exec < d_inf, f"stats slow: execution_count grew {d_exec} for {d_inf} inferences (no batching?)")
        check_stats_consistency(c, after, "slow")
        every = cl.get_inference_statistics()
        names = sorted(s.get("name") for s in every.get("model_stats", []))
        c.check(names == sorted(sc.MODELS), f"stats of every model: {names}")
        c.ok("statistics")

        # Repository index.
        index = cl.get_model_repository_index()
        print("index:", json.dumps(index))
        got = {(e.get("name"), str(e.get("version")), e.get("state")) for e in index}
        want = {(m, "1", "READY") for m in sc.MODELS}
        c.check(got == want, f"repository index {sorted(got)} (expected {sorted(want)})")

        # Model control is refused in mode none.
        try:
            cl.unload_model("fp32")
            c.check(False, "unload in --model-control-mode none succeeded")
        except InferenceServerException as e:
            c.check(e.status() in ("400", "403", "405", "501"), f"unload in mode none: status {e.status()} ({e.message()})")
            print(f"unload in mode none: {e.status()} {e.message()}")
        c.check(cl.is_model_ready("fp32"), "fp32 not ready after a refused unload")
        cl.close()
    c.check(srv.returncode == 0, f"server (mode none) exited {srv.returncode} on SIGTERM")


def server_explicit(args, c: sc.Checks, repo: Path, work: Path) -> None:
    key_file = work / "api_key.txt"
    key_file.write_text(API_KEY + "\n", encoding="utf-8")
    # broken is in the startup set: --exit-on-error=false serves fp32 beside it (Triton's flag).
    extra = ["--model-control-mode", "explicit", "--load-model", "fp32", "--load-model", "broken",
             "--api-key-file", str(key_file), "--exit-on-error=false"]
    with sc.ServeProcess(args.glassbox, repo, work, extra, name="serve-explicit") as srv:
        cl = httpclient.InferenceServerClient(f"127.0.0.1:{srv.port}", network_timeout=120, connection_timeout=60)
        # The broken model is UNAVAILABLE with a reason; fp32 serves; int64 is known but not loaded.
        index = cl.get_model_repository_index(headers=AUTH)
        print("explicit index:", json.dumps(index))
        by_name = {e.get("name"): e for e in index}
        b = by_name.get("broken", {})
        c.check(b.get("state") == "UNAVAILABLE" and len(b.get("reason", "")) > 10,
                f"broken model: index entry {b} (expected UNAVAILABLE with a reason)")
        c.check(by_name.get("fp32", {}).get("state") == "READY", f"fp32 index entry {by_name.get('fp32')}")
        c.check(set(sc.MODELS) <= set(by_name), f"index lacks models: {sorted(set(sc.MODELS) - set(by_name))}")
        c.check(by_name.get("int64", {}).get("state") != "READY", f"int64 READY before any load: {by_name.get('int64')}")
        c.check(not cl.is_model_ready("broken"), "broken model ready")
        arrays = sample_inputs("fp32", 2, 1)
        compare(c, "explicit: fp32 while broken is unavailable", cl.infer("fp32", make_inputs("fp32", arrays, True)),
                "fp32", arrays, repo)
        status, _, body = sc.request(srv.port, "POST", "/v2/repository/index", "{}")
        print(f"index without the key: {status} {body[:200]!r}")
        c.check(not cl.is_model_ready("int64"), "int64 ready before load")

        # Control without the key (or with a wrong one): 403; with it: works.
        for hdr, what in ((None, "no key"), ({"Authorization": "Bearer wrong-key-000000"}, "wrong key"),
                          ({"Authorization": API_KEY}, "key without Bearer")):
            try:
                cl.load_model("int64", headers=hdr)
                c.check(False, f"load without a valid key ({what}) succeeded")
            except InferenceServerException as e:
                c.check(e.status() == "403", f"load with {what}: status {e.status()} ({e.message()})")
        c.check(not cl.is_model_ready("int64"), "int64 ready after refused loads")
        cl.load_model("int64", headers=AUTH)
        c.check(cl.is_model_ready("int64"), "int64 not ready after load")
        arrays = sample_inputs("int64", 5, 9)
        compare(c, "explicit: int64 after load", cl.infer("int64", make_inputs("int64", arrays, True)), "int64", arrays, repo)

        # Load with a config override: max_batch_size 4.
        cfg = cl.get_model_config("int64")
        cfg["max_batch_size"] = 4
        cl.load_model("int64", headers=AUTH, config=json.dumps(cfg))
        cfg2 = cl.get_model_config("int64")
        c.check(int(cfg2.get("max_batch_size", 0)) == 4, f"config override: max_batch_size {cfg2.get('max_batch_size')}")
        meta = cl.get_model_metadata("int64")
        c.check([i.get("shape") for i in meta.get("inputs", [])] == [[-1, 3]], f"override: metadata inputs {meta.get('inputs')}")
        arrays = sample_inputs("int64", 4, 11)
        compare(c, "override: batch 4", cl.infer("int64", make_inputs("int64", arrays, False)), "int64", arrays, repo)
        try:
            cl.infer("int64", make_inputs("int64", sample_inputs("int64", 5, 12), False))
            c.check(False, "override: batch 5 > max_batch_size 4 accepted")
        except InferenceServerException as e:
            c.check(e.status() == "400" and "4" in e.message(), f"override: batch 5: {e.status()} {e.message()}")
        # An override that is not JSON: refused, model stays served.
        try:
            cl.load_model("int64", headers=AUTH, config="{not json")
            c.check(False, "load with a malformed config override succeeded")
        except InferenceServerException as e:
            c.check(e.status() == "400", f"malformed config override: status {e.status()} ({e.message()})")

        # Unload: 403 without the key; with it the model goes.
        try:
            cl.unload_model("int64")
            c.check(False, "unload without the key succeeded")
        except InferenceServerException as e:
            c.check(e.status() == "403", f"unload without key: status {e.status()} ({e.message()})")
        c.check(cl.is_model_ready("int64"), "int64 unloaded by a refused unload")
        cl.unload_model("int64", headers=AUTH)
        deadline = time.monotonic() + 30
        while cl.is_model_ready("int64") and time.monotonic() < deadline:
            time.sleep(0.1)
        c.check(not cl.is_model_ready("int64"), "int64 still ready after unload")
        try:
            cl.infer("int64", make_inputs("int64", sample_inputs("int64", 1, 1), False))
            c.check(False, "infer on an unloaded model succeeded")
        except InferenceServerException as e:
            c.check(e.status() in ("400", "404", "503"), f"infer after unload: {e.status()} {e.message()}")
            print(f"infer after unload: {e.status()} {e.message()}")
        # Loading the broken model fails with its reason; the index still says UNAVAILABLE.
        try:
            cl.load_model("broken", headers=AUTH)
            c.check(False, "loading the broken model succeeded")
        except InferenceServerException as e:
            print(f"load broken: {e.status()} {e.message()}")
            c.check(e.status() == "400" and "broken" in e.message(), f"load broken: {e.status()} {e.message()}")
        entry = {e.get("name"): e for e in cl.get_model_repository_index(headers=AUTH)}.get("broken", {})
        c.check(entry.get("state") == "UNAVAILABLE" and entry.get("reason"), f"broken after load attempt: {entry}")
        # Unknown model: load fails.
        try:
            cl.load_model("no_such_model", headers=AUTH)
            c.check(False, "loading an unknown model succeeded")
        except InferenceServerException as e:
            c.check(e.status() in ("400", "404") and "no_such_model" in e.message(), f"load unknown: {e.status()} {e.message()}")
        # Inference needs no key (no --protect-inference).
        c.check(sc.request(srv.port, "POST", "/v2/models/fp32/infer", json.dumps(sc.fp32_request()[0]))[0] == 200,
                "inference without the key refused")
        cl.close()
    c.check(srv.returncode == 0, f"server (explicit) exited {srv.returncode} on SIGTERM")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-serve-tritonclient-")
    c = sc.Checks("tritonclient_test")
    repo = sc.build_repository(work / "repo")
    repo_b = sc.build_repository(work / "repo_broken", include_broken=True)
    for part in (server_none, server_explicit):
        t = time.monotonic()
        try:
            part(args, c, repo if part is server_none else repo_b, work)
        except Exception as e:  # noqa: BLE001 - a client exception is a failed check
            import traceback

            traceback.print_exc()
            c.check(False, f"{part.__name__}: {type(e).__name__}: {e}")
        print(f"{part.__name__}: {time.monotonic() - t:.1f} s")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
