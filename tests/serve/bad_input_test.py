#!/usr/bin/env python3
"""glassbox serve under bad input: raw HTTP requests (a socket, no client library) that a KServe v2
server must refuse with the right status and a message naming the input, the model, the expected
and the received value; each followed by a good inference that must still succeed. A few valid
but unusual requests (chunked, gzip, deflate, the C++ client's header on a JSON body) must work.

    bad_input_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Prints a table of cases; exits 0 when every case holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import select
import socket
import struct
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

MAX_BODY_MIB = 1
# What a message about unparsable JSON must say (one of).
MALFORMED = ("malformed", "invalid json", "not valid json", "parse", "syntax", "unexpected", "incomplete", "truncated",
             "cut short", "ends early", "unterminated", "unclosed")


def raw(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None,
        chunked: bool = False, timeout: float = 60) -> tuple[int, dict, bytes]:
    """Sends one request byte for byte; stops sending early if the server answers first."""
    headers = dict(headers or {})
    if chunked:
        headers["Transfer-Encoding"] = "chunked"
        pieces = [body[i:i + 997] for i in range(0, len(body), 997)]
        body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    elif "Content-Length" not in headers and (body or method in ("POST", "PUT")):
        headers["Content-Length"] = str(len(body))
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        data = head.encode("latin-1") + body
        try:
            for i in range(0, len(data), 65536):
                if select.select([s], [], [], 0)[0]:
                    break  # the server answered before the body ended (413, 400 ...)
                s.sendall(data[i:i + 65536])
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = http.client.HTTPResponse(s, method=method)
        r.begin()
        payload = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, payload
    finally:
        s.close()


def _json(body: bytes):
    try:
        return json.loads(body)
    except ValueError:
        return None


def fp32_body(shape=(1, 1, 8, 8), data=None, datatype="FP32", name="INPUT__0", extra: dict | None = None) -> dict:
    n = 64
    if all(isinstance(d, int) and 0 <= d < 4096 for d in shape):
        n = int(np.prod(shape))
    inp = {"name": name, "shape": list(shape), "datatype": datatype,
           "data": data if data is not None else [0.5] * n}
    body = {"inputs": [inp]}
    body.update(extra or {})
    return body


def binary_body(json_obj: dict, blobs: list[bytes]) -> tuple[bytes, int]:
    j = json.dumps(json_obj).encode()
    return j + b"".join(blobs), len(j)


@dataclass
class Case:
    name: str
    method: str
    path: str
    body: bytes = b""
    headers: dict = field(default_factory=dict)
    status: int = 400
    needles: list = field(default_factory=list)  # each a string or a tuple of alternatives (case-insensitive)
    chunked: bool = False
    check_body: object = None  # callable(bytes) -> str | None (an error) for the successful cases


def J(obj) -> bytes:
    return json.dumps(obj).encode()


def cases(repo: Path) -> list[Case]:
    INFER = "/v2/models/fp32/infer"
    JH = {"Content-Type": "application/json"}
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 1, 8, 8)
    good = fp32_body(data=x.reshape(-1).tolist())
    want = sc.reference("fp32", [x], repo)[0]

    def fp32_ok(body: bytes) -> str | None:
        try:
            out = json.loads(body)["outputs"][0]
        except Exception as e:  # noqa: BLE001
            return f"unparsable response {body[:200]!r} ({e})"
        same, detail = sc.close_enough(np.array(out["data"], np.float32).reshape(out["shape"]), want)
        return None if same else f"output differs from Python torch: {detail}"

    blob = x.tobytes()  # 256 bytes

    def binary_json(size: int) -> dict:
        return {"inputs": [{"name": "INPUT__0", "shape": [1, 1, 8, 8], "datatype": "FP32",
                            "parameters": {"binary_data_size": size}}]}

    def bh(n) -> dict:
        return {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(n)}

    bin_json = binary_json(len(blob))
    bin_ok_body, bin_len = binary_body(bin_json, [blob])
    mm_body, mm_len = binary_body(binary_json(100), [blob[:100]])
    trunc_body, trunc_len = binary_body(bin_json, [blob[:100]])
    left_body, left_len = binary_body(bin_json, [blob + b"0123456789"])

    deep = "1.0"
    for _ in range(150):
        deep = f"[{deep}]"
    deep_body = ('{"inputs":[{"name":"INPUT__0","shape":[1,1,8,8],"datatype":"FP32","data":' + deep + "}]}").encode()

    # A BYTES tensor whose element length runs past the end.
    bad_bytes = struct.pack("<I", 50) + b"short"
    bytes_json = {"inputs": [{"name": "INPUT__0", "shape": [1, 1], "datatype": "BYTES",
                              "parameters": {"binary_data_size": len(bad_bytes)}}]}
    bytes_body, bytes_len = binary_body(bytes_json, [bad_bytes])

    big = J(fp32_body(shape=(8, 1, 8, 8), data=[0.25] * 512)) + b" " * ((MAX_BODY_MIB << 20) + 4096)
    bomb = gzip.compress(J(good)[:-1] + b" " * ((MAX_BODY_MIB << 20) + 4096) + b"}")

    uint8 = lambda data: J({"inputs": [{"name": "INPUT__0", "shape": [1, 4], "datatype": "UINT8", "data": data}]})  # noqa: E731

    return [
        # JSON structure
        Case("malformed JSON (cut short)", "POST", INFER, b'{"inputs": [', JH, 400, ["fp32", MALFORMED]),
        Case("malformed JSON (syntax)", "POST", INFER, b'{"inputs": [}', JH, 400, ["fp32", MALFORMED]),
        Case("JSON then garbage, no binary", "POST", INFER, J(good) + b"xyz", JH, 400, ["fp32", ("after", "trailing")]),
        Case("body not an object", "POST", INFER, b"[1, 2, 3]", JH, 400, ["object"]),
        Case("empty body", "POST", INFER, b"", JH, 400, ["fp32", ("empty", "no body", "0 bytes")]),
        Case("missing inputs", "POST", INFER, J({"id": "x"}), JH, 400, ["inputs"]),
        Case("inputs not a list", "POST", INFER, J({"inputs": good["inputs"][0]}), JH, 400, ["inputs"]),
        Case("input without name", "POST", INFER,
             J({"inputs": [{k: v for k, v in good["inputs"][0].items() if k != "name"}]}), JH, 400, ["name"]),
        Case("input without shape", "POST", INFER,
             J({"inputs": [{k: v for k, v in good["inputs"][0].items() if k != "shape"}]}), JH, 400, ["shape", "INPUT__0"]),
        Case("input without datatype", "POST", INFER,
             J({"inputs": [{k: v for k, v in good["inputs"][0].items() if k != "datatype"}]}), JH, 400,
             ["datatype", "INPUT__0"]),
        Case("input without data", "POST", INFER,
             J({"inputs": [{k: v for k, v in good["inputs"][0].items() if k != "data"}]}), JH, 400, ["data", "INPUT__0"]),
        Case("shape not integers", "POST", INFER, J(fp32_body(shape=(1, 1, 8, "8"))), JH, 400, ["shape", "INPUT__0"]),
        Case("id not a string", "POST", INFER, J({**good, "id": 5}), JH, 400, ["id"]),
        Case("outputs not a list", "POST", INFER, J({**good, "outputs": {"name": "OUTPUT__0"}}), JH, 400, ["outputs"]),
        Case("nesting depth 150", "POST", INFER, deep_body, JH, 400, [("depth", "nest", "deep")]),
        # names, datatypes
        Case("unknown datatype", "POST", INFER, J(fp32_body(datatype="FLOAT32")), JH, 400, ["FLOAT32", "INPUT__0"]),
        Case("unknown input name", "POST", INFER, J(fp32_body(name="INPUT__9")), JH, 400, ["INPUT__9", "fp32"]),
        Case("duplicate inputs", "POST", INFER, J({"inputs": good["inputs"] * 2}), JH, 400,
             ["INPUT__0", ("duplicate", "more than once", "twice", "repeated")]),
        Case("missing input (empty list)", "POST", INFER, J({"inputs": []}), JH, 400, ["INPUT__0", "fp32"]),
        Case("wrong datatype INT64 vs FP32", "POST", INFER, J(fp32_body(datatype="INT64", data=[1] * 64)), JH, 400,
             ["INPUT__0", "fp32", "FP32", "INT64"]),
        Case("FP16 as JSON", "POST", INFER, J(fp32_body(datatype="FP16")), JH, 400, ["FP16", "INPUT__0"]),
        Case("unknown output name", "POST", INFER, J({**good, "outputs": [{"name": "OUTPUT__7"}]}), JH, 400,
             ["OUTPUT__7", "fp32"]),
        Case("reserved parameter triton_x", "POST", INFER, J({**good, "parameters": {"triton_x": 1}}), JH, 400,
             ["triton_x"]),
        # shapes and element counts
        Case("wrong shape [1,1,8,9]", "POST", INFER, J(fp32_body(shape=(1, 1, 8, 9))), JH, 400,
             ["INPUT__0", "fp32", "[-1,1,8,8]", "[1,1,8,9]"]),
        Case("wrong rank [1,64]", "POST", INFER, J(fp32_body(shape=(1, 64))), JH, 400,
             ["INPUT__0", "fp32", "[-1,1,8,8]", "[1,64]"]),
        Case("too many elements (65 for 64)", "POST", INFER, J(fp32_body(data=[0.5] * 65)), JH, 400,
             ["INPUT__0", "64", "65"]),
        Case("too few elements (63 for 64)", "POST", INFER, J(fp32_body(data=[0.5] * 63)), JH, 400,
             ["INPUT__0", "64", "63"]),
        Case("negative dimension", "POST", INFER, J(fp32_body(shape=(1, 1, -8, 8))), JH, 400, ["INPUT__0", "-8"]),
        Case("-1 in a request shape", "POST", INFER, J(fp32_body(shape=(-1, 1, 8, 8))), JH, 400, ["INPUT__0", "-1"]),
        Case("shape overflowing int64", "POST", INFER, J(fp32_body(shape=(1, 1, 8, 2**62))), JH, 400, ["INPUT__0"]),
        Case("batch 9 > max_batch_size 8", "POST", INFER, J(fp32_body(shape=(9, 1, 8, 8), data=[0.5] * 576)), JH, 400,
             ["fp32", "8", "9"]),
        Case("batch axis on a max_batch_size 0 model", "POST", "/v2/models/nobatch/infer",
             J({"inputs": [{"name": "INPUT__0", "shape": [1, 2, 3], "datatype": "FP32", "data": [1.0] * 6}]}), JH, 400,
             ["INPUT__0", "nobatch", "[2,3]", "[1,2,3]"]),
        # values
        Case("UINT8 value 256", "POST", "/v2/models/uint8/infer", uint8([1, 2, 3, 256]), JH, 400, ["INPUT__0", "256"]),
        Case("UINT8 value -1", "POST", "/v2/models/uint8/infer", uint8([1, 2, 3, -1]), JH, 400, ["INPUT__0", "-1"]),
        Case("BOOL given numbers", "POST", "/v2/models/bool/infer",
             J({"inputs": [{"name": "INPUT__0", "shape": [1, 4], "datatype": "BOOL", "data": [1, 0, 1, 0]}]}), JH, 400,
             ["INPUT__0", "BOOL"]),
        Case("INT64 given 1.5", "POST", "/v2/models/int64/infer",
             J({"inputs": [{"name": "INPUT__0", "shape": [1, 3], "datatype": "INT64", "data": [1, 1.5, 2]}]}), JH, 400,
             ["INPUT__0"]),
        Case("FP32 given a string", "POST", INFER, J(fp32_body(data=["a"] + [0.5] * 63)), JH, 400, ["INPUT__0"]),
        # binary tensor extension
        Case("binary size mismatch (100 for 256)", "POST", INFER, mm_body, bh(mm_len), 400, ["INPUT__0", "256", "100"]),
        Case("truncated binary part", "POST", INFER, trunc_body, bh(trunc_len), 400, ["INPUT__0", ("256", "100")]),
        Case("leftover binary bytes", "POST", INFER, left_body, bh(left_len), 400,
             [("leftover", "left over", "unused", "extra", "trailing", "remain", "unexpected", "10 bytes")]),
        Case("binary without Inference-Header-Content-Length", "POST", INFER, bin_ok_body,
             {"Content-Type": "application/octet-stream"}, 400, [("inference-header-content-length", "json")]),
        Case("binary_data_size, no header, no bytes", "POST", INFER, J(bin_json), JH, 400,
             ["INPUT__0", ("binary", "inference-header-content-length")]),
        Case("non-numeric Inference-Header-Content-Length", "POST", INFER, bin_ok_body, bh("abc"), 400,
             ["inference-header-content-length"]),
        Case("negative Inference-Header-Content-Length", "POST", INFER, bin_ok_body, bh("-5"), 400,
             ["inference-header-content-length"]),
        Case("Inference-Header-Content-Length > body", "POST", INFER, bin_ok_body, bh(len(bin_ok_body) + 10), 400,
             ["inference-header-content-length"]),
        Case("BYTES element length past the end", "POST", "/v2/models/bytes/infer", bytes_body, bh(bytes_len), 400,
             ["INPUT__0"]),
        # transport
        Case("unknown Content-Encoding br", "POST", INFER, J(good), {**JH, "Content-Encoding": "br"}, 415, ["br"]),
        Case("gzip body that is not gzip", "POST", INFER, J(good), {**JH, "Content-Encoding": "gzip"}, 400,
             [("gzip", "decompress", "compress", "inflate", "encoding")]),
        Case(f"body over --max-body-mib {MAX_BODY_MIB}", "POST", INFER, big, JH, 413, [("limit", "large", "max")]),
        Case("gzip bomb over the limit", "POST", INFER, bomb, {**JH, "Content-Encoding": "gzip"}, 413,
             [("limit", "large", "max")]),
        # routes
        Case("unknown model", "POST", "/v2/models/no_such_model/infer", J(good), JH, 400, ["no_such_model"]),
        Case("unknown version 7", "POST", "/v2/models/fp32/versions/7/infer", J(good), JH, 404, ["fp32", "7"]),
        Case("non-numeric version", "POST", "/v2/models/fp32/versions/abc/infer", J(good), JH, 400, ["abc"]),
        Case("unknown model metadata", "GET", "/v2/models/no_such_model", b"", {}, 400, ["no_such_model"]),
        Case("unknown version metadata", "GET", "/v2/models/fp32/versions/9", b"", {}, 404, ["fp32", "9"]),
        Case("GET on infer", "GET", INFER, b"", {}, 405, []),
        Case("DELETE on infer", "DELETE", INFER, b"", {}, 405, []),
        Case("POST on health/live", "POST", "/v2/health/live", b"{}", JH, 405, []),
        Case("unknown route", "GET", "/v2/no/such/route", b"", {}, 404, ["Not Found"]),
        Case("unknown route (not v2)", "GET", "/v3/models", b"", {}, 404, ["Not Found"]),
        # valid but unusual: must work
        Case("chunked body", "POST", INFER, J(good), JH, 200, [], chunked=True, check_body=fp32_ok),
        Case("gzip body", "POST", INFER, gzip.compress(J(good)), {**JH, "Content-Encoding": "gzip"}, 200, [],
             check_body=fp32_ok),
        Case("deflate body", "POST", INFER, zlib.compress(J(good)), {**JH, "Content-Encoding": "deflate"}, 200, [],
             check_body=fp32_ok),
        Case("JSON body with Inference-Header-Content-Length = length", "POST", INFER, J(good), bh(len(J(good))), 200,
             [], check_body=fp32_ok),
        Case("binary input, JSON output", "POST", INFER, bin_ok_body, bh(bin_len), 200, [], check_body=fp32_ok),
        Case("nested data", "POST", INFER, J(fp32_body(data=x.tolist())), JH, 200, [], check_body=fp32_ok),
    ]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-serve-bad-input-")
    c = sc.Checks("bad_input_test")
    repo = sc.build_repository(work / "repo", models=["fp32", "int64", "uint8", "bool", "bytes", "nobatch"])
    table = cases(repo)
    probe_body, probe_x = sc.fp32_request(batch=2, seed=5)
    probe_want = sc.reference("fp32", [probe_x], repo)[0]
    rows = []
    t0 = time.monotonic()
    with sc.ServeProcess(args.glassbox, repo, work, ["--max-body-mib", MAX_BODY_MIB], name="serve-bad-input") as srv:
        for case in table:
            problems = []
            try:
                status, headers, body = raw(srv.port, case.method, case.path, case.body, case.headers, case.chunked)
            except Exception as e:  # noqa: BLE001 - no response is a failure of the case
                status, headers, body = -1, {}, f"{type(e).__name__}: {e}".encode()
                problems.append(f"no response ({type(e).__name__}: {e})")
            message = ""
            if status != case.status:
                problems.append(f"status {status} (expected {case.status})")
            if case.status >= 400 and status >= 400:
                try:
                    err = json.loads(body)
                    message = err.get("error", "") if isinstance(err, dict) else ""
                    if not isinstance(err, dict) or not isinstance(err.get("error"), str):
                        problems.append(f"body is not {{\"error\": str}}: {body[:120]!r}")
                except ValueError:
                    problems.append(f"body is not JSON: {body[:120]!r}")
                    message = body.decode("utf-8", "replace")
                if not headers.get("content-type", "").startswith("application/json"):
                    problems.append(f"Content-Type {headers.get('content-type')!r}")
                flat = message.lower().replace(" ", "")
                for needle in case.needles:
                    alts = needle if isinstance(needle, tuple) else (needle,)
                    if not any(a.lower().replace(" ", "") in flat for a in alts):
                        problems.append(f"message lacks {' | '.join(alts)!r}")
                if case.status == 404 and "route" in case.name and _json(body) != {"error": "Not Found"}:
                    problems.append(f"body {body!r} (expected {{\"error\":\"Not Found\"}})")
            elif case.check_body is not None and status == 200:
                err = case.check_body(body)
                if err:
                    problems.append(err)
                message = "(output matches Python torch)" if not err else ""
            # The server still serves.
            try:
                s2, _, b2 = raw(srv.port, "POST", "/v2/models/fp32/infer", json.dumps(probe_body).encode(),
                                {"Content-Type": "application/json"})
                out = json.loads(b2)["outputs"][0] if s2 == 200 else None
                same = out is not None and sc.close_enough(
                    np.array(out["data"], np.float32).reshape(out["shape"]), probe_want)[0]
                if not same:
                    problems.append(f"the next good inference failed: {s2} {b2[:200]!r}")
            except Exception as e:  # noqa: BLE001
                problems.append(f"the next good inference failed: {type(e).__name__}: {e}")
            c.check(not problems, f"{case.name}: {'; '.join(problems)} [message: {message!r}]")
            rows.append((case.name, case.status, status, "ok" if not problems else "FAIL", message))
        print(f"{'case':<52} {'want':>4} {'got':>4}  result  message")
        for name, want, got, res, msg in rows:
            print(f"{name:<52} {want:>4} {got:>4}  {res:<6}  {msg[:150]}")
    c.check(srv.returncode == 0, f"server exited {srv.returncode} on SIGTERM")
    c.check(len(table) >= 35, f"only {len(table)} cases")
    print(f"{len(table)} cases in {time.monotonic() - t0:.1f} s")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
