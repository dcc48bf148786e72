#!/usr/bin/env python3
"""glassbox serve against the framing rules of RFC 9110/9112 over raw sockets: for each rule the
status, whether the connection stays open (then a good request on the same connection) or is
closed, and a good inference on a new connection, checked against Python torch, after every case.
Also: a request-smuggling attempt executes nothing, slow clients are cut off at their deadline
while other clients are served without a failure, Triton's version and statistics semantics, and
error bodies that stay valid UTF-8 JSON whatever bytes the request carried.

    http_framing_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Prints one line per case; exits 0 when every case holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
MIN_RATE = 100  # bytes per second


@dataclass
class Reply:
    status: int
    headers: dict
    body: bytes
    version: str = "HTTP/1.1"


class Conn:
    """One raw connection: send bytes, read responses (Content-Length framed), see if it closed."""

    def __init__(self, port: int, timeout: float = 20):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, data: bytes) -> bool:
        try:
            self.s.sendall(data)
            return True
        except OSError:
            return False

    def _fill(self) -> bool:
        try:
            chunk = self.s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            return False
        self.buf += chunk
        return bool(chunk)

    def read(self) -> Reply | None:
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                return None
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        version = lines[0].split()[0]
        if status == 100:
            return Reply(status, headers, b"", version)
        while len(self.buf) < n:
            if not self._fill():
                return None
        body, self.buf = self.buf[:n], self.buf[n:]
        return Reply(status, headers, body, version)

    def closed(self, wait: float = 5) -> bool:
        """True when the server closes the connection within `wait` seconds (bytes read meanwhile
        are discarded: a closing server sends nothing more)."""
        self.s.settimeout(wait)
        try:
            while True:
                chunk = self.s.recv(65536)
                if not chunk:
                    return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        finally:
            self.s.settimeout(20)

    def close(self) -> None:
        self.s.close()


def http(method: str, target: str, headers: dict | None = None, body: bytes = b"", version: str = "1.1",
         host: str | None = "127.0.0.1") -> bytes:
    h = {} if host is None else {"Host": host}
    h.update(headers or {})
    if body and "Content-Length" not in h and "Transfer-Encoding" not in h:
        h["Content-Length"] = str(len(body))
    head = f"{method} {target} HTTP/{version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode("latin-1") + body


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-serve-framing-")
    c = sc.Checks("http_framing_test")
    repo = sc.build_repository(work / "repo", models=["fp32", "int64"])
    probe_body, probe_x = sc.fp32_request(batch=2, seed=7)
    probe_want = sc.reference("fp32", [probe_x], repo)[0]
    probe = json.dumps(probe_body).encode()
    live = http("GET", "/v2/health/live")

    def good_inference(port: int) -> str | None:
        status, _, body = sc.request(port, "POST", "/v2/models/fp32/infer", probe, {"Content-Type": "application/json"})
        if status != 200:
            return f"the next good inference failed: {status} {body[:200]!r}"
        out = json.loads(body)["outputs"][0]
        same, detail = sc.close_enough(np.array(out["data"], np.float32).reshape(out["shape"]), probe_want)
        return None if same else f"the next good inference differs from Python torch: {detail}"

    def inference_count(port: int) -> int:
        status, stats = sc.get_json(port, "/v2/models/fp32/stats")
        return stats["model_stats"][0]["inference_count"] if status == 200 else -1

    serve_args = ["--model-control-mode", "explicit", "--load-model", "fp32",
                  "--request-header-timeout", HEADER_TIMEOUT_S, "--request-body-timeout", BODY_TIMEOUT_S,
                  "--min-request-rate", MIN_RATE]
    with sc.ServeProcess(args.glassbox, repo, work, serve_args, name="serve-framing") as srv:
        port = srv.port

        def case(name: str, data: bytes, status: int, closes: bool, needle: str = "",
                 check=None) -> None:
            problems = []
            conn = Conn(port)
            try:
                conn.send(data)
                r = conn.read()
                if r is None:
                    problems.append("no response")
                else:
                    if r.status != status:
                        problems.append(f"status {r.status} (expected {status}): {r.body[:200]!r}")
                    if r.status >= 400:
                        try:
                            message = json.loads(r.body.decode("utf-8"))["error"]  # strict UTF-8
                            if needle and needle.lower() not in message.lower():
                                problems.append(f"message {message!r} lacks {needle!r}")
                        except (ValueError, KeyError, UnicodeDecodeError) as e:
                            problems.append(f"error body is not UTF-8 JSON {{\"error\": ...}}: {r.body[:200]!r} ({e})")
                    if check:
                        problems.extend(check(r))
                    if closes:
                        # HTTP/1.0 answers close unless they say keep-alive; HTTP/1.1 ones must say close.
                        if r.version != "HTTP/1.0" and r.headers.get("connection", "").lower() != "close":
                            problems.append("no 'Connection: close' on an answer that closes")
                        if not conn.closed():
                            problems.append("the connection stayed open")
                    else:
                        conn.send(live)
                        again = conn.read()
                        if again is None or again.status != 200:
                            problems.append("the connection did not serve the next request")
            finally:
                conn.close()
            err = good_inference(port)
            if err:
                problems.append(err)
            c.check(not problems, f"{name}: {'; '.join(problems)}")
            if not problems:
                print(f"ok   {status} {'closed' if closes else 'open  '} {name}", flush=True)

        # --- Transfer-Encoding and Content-Length (RFC 9112 §6) -----------------------------
        before = inference_count(port)
        smuggled = http("POST", "/v2/models/fp32/infer", {"Content-Type": "application/json"}, probe)
        case("unknown transfer coding (a request hidden in the body)",
             http("POST", "/v2/health/live", {"Transfer-Encoding": "gzip"}) + smuggled, 501, True, "Transfer-Encoding")
        c.check(inference_count(port) == before + 2,  # the probe inference only, not the hidden request
                f"a request smuggled behind Transfer-Encoding: gzip was executed "
                f"(inference count {before} -> {inference_count(port)})")
        case("codings gzip, chunked", http("POST", "/v2/models/fp32/infer", {"Transfer-Encoding": "gzip, chunked"})
             + b"0\r\n\r\n", 501, True, "chunked")
        case("chunked then Content-Length",
             http("POST", "/v2/models/fp32/infer", {"Transfer-Encoding": "chunked", "Content-Length": "5"})
             + b"0\r\n\r\n", 400, True, "both Transfer-Encoding and Content-Length")
        case("Content-Length then an unknown coding",
             http("POST", "/v2/models/fp32/infer", {"Content-Length": "5", "Transfer-Encoding": "identity"})
             + b"hello", 400, True, "both Transfer-Encoding and Content-Length")
        case("chunked twice", http("POST", "/v2/models/fp32/infer", {"Transfer-Encoding": "chunked, chunked"})
             + b"0\r\n\r\n", 400, True, "more than once")
        case("Transfer-Encoding in HTTP/1.0", http("POST", "/v2/models/fp32/infer", {"Transfer-Encoding": "chunked"},
                                                   version="1.0", host=None) + b"0\r\n\r\n", 400, True, "HTTP/1.0")
        case("two different Content-Lengths", http("POST", "/v2/models/fp32/infer", {"Content-Length": "2"})
             .replace(b"\r\n\r\n", b"\r\nContent-Length: 3\r\n\r\n") + b"abc", 400, True, "Content-Length")
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(probe[i:i + 100]), probe[i:i + 100]) for i in range(0, len(probe), 100))
        case("a chunked body is served",
             http("POST", "/v2/models/fp32/infer", {"Transfer-Encoding": "chunked"}) + chunks + b"0\r\n\r\n", 200,
             False)

        # --- Host, request targets, methods, versions (RFC 9112 §3) -------------------------
        case("HTTP/1.1 without Host", http("GET", "/v2/health/live", host=None), 400, True, "Host")
        case("two Host fields", http("GET", "/v2/health/live", {"Host": "a"}).replace(b"\r\n\r\n", b"\r\nHost: b\r\n\r\n"),
             400, True, "more than one Host")
        case("an invalid Host", http("GET", "/v2/health/live", host="a b"), 400, True, "Host")
        case("HTTP/1.0 without Host is fine", http("GET", "/v2/health/live", version="1.0", host=None)
             .replace(b"\r\n\r\n", b"\r\nConnection: keep-alive\r\n\r\n"), 200, False)

        def metadata_ok(r: Reply) -> list[str]:
            return [] if json.loads(r.body).get("name") == "fp32" else [f"metadata {r.body[:120]!r}"]

        case("absolute-form target", http("GET", f"http://127.0.0.1:{port}/v2/models/fp32"), 200, False,
             check=metadata_ok)
        case("a target that is neither a path nor a URI", http("GET", "v2/health/live"), 400, True, "path")
        case("an unknown method", http("BREW", "/v2/health/live"), 501, True, "not implemented")
        case("a known method on a GET route", http("DELETE", "/v2/health/live"), 405, False, "not allowed")
        case("HTTP/2.0 on an HTTP/1 connection", http("GET", "/v2/health/live", version="2.0"), 505, True, "version")
        case("Expect other than 100-continue", http("POST", "/v2/models/fp32/infer", {"Expect": "tea"}, probe), 417,
             True, "Expect")

        def continue_then_200() -> None:
            conn = Conn(port)
            try:
                conn.send(http("POST", "/v2/models/fp32/infer",
                               {"Expect": "100-continue", "Content-Length": str(len(probe))}))
                interim = conn.read()
                conn.send(probe)
                final = conn.read()
                c.check(interim is not None and interim.status == 100 and final is not None and final.status == 200,
                        f"Expect: 100-continue: {interim and interim.status} then {final and final.status}")
            finally:
                conn.close()
        continue_then_200()

        # --- limits ----------------------------------------------------------------------------
        many = {f"X-F{i}": "v" * 50 for i in range(1300)}  # each field small, the head ~76 KiB
        case("a head over 64 KiB in small fields", http("GET", "/v2/health/live", many), 431, True, "head")
        case("one field over 64 KiB", http("GET", "/v2/health/live", {"X-Big": "a" * 70000}), 431, True, "head")

        def accept_encoding(r: Reply) -> list[str]:
            got = r.headers.get("accept-encoding", "")
            return [] if "gzip" in got else [f"Accept-Encoding {got!r} on a 415"]

        case("unknown Content-Encoding", http("POST", "/v2/models/fp32/infer", {"Content-Encoding": "br"}, probe), 415,
             False, "Content-Encoding", check=accept_encoding)

        # --- Triton's version and statistics semantics ---------------------------------------
        case("versions/0", http("GET", "/v2/models/fp32/versions/0"), 404, False, "version 0 is not found")
        case("infer on versions/0", http("POST", "/v2/models/fp32/versions/0/infer", {}, probe), 404, False,
             "version 0")
        case("versions/0 of an unknown model", http("GET", "/v2/models/nope/versions/0"), 400, False,
             "unknown model")
        case("versions/1 is served", http("GET", "/v2/models/fp32/versions/1"), 200, False, check=metadata_ok)
        case("statistics of an unloaded model", http("GET", "/v2/models/int64/stats"), 400, False,
             "no available versions")
        case("statistics of an unknown model", http("GET", "/v2/models/nope/stats"), 400, False, "unknown model")

        # --- error bodies are valid UTF-8 JSON whatever the request's bytes ------------------
        case("invalid UTF-8 in a model name", b"GET /v2/models/\xff\xfe/ready HTTP/1.1\r\nHost: h\r\n\r\n", 400, False,
             "\\xff")
        case("invalid UTF-8 in a version", b"GET /v2/models/fp32/versions/\xc3\x28 HTTP/1.1\r\nHost: h\r\n\r\n", 400,
             False, "\\xc3")
        bad_json = probe.replace(b'"INPUT__0"', b'"INPUT\xed\xa0\x80"')
        case("invalid UTF-8 in an input name", http("POST", "/v2/models/fp32/infer", {}, bad_json), 400, False)
        case("invalid UTF-8 in a Content-Encoding",
             http("POST", "/v2/models/fp32/infer", {}, probe).replace(b"Host:", b"Content-Encoding: \xe9t\xe9\r\nHost:"),
             415, False, "\\xe9")

        # --- slow clients ------------------------------------------------------------------------
        stop = threading.Event()
        served, failed = [0], []

        def steady_client() -> None:
            while not stop.is_set():
                err = good_inference(port)
                if err:
                    failed.append(err)
                else:
                    served[0] += 1

        def slow_head(results: list) -> None:
            conn = Conn(port)
            t0 = time.monotonic()
            conn.send(b"GET /v2/health/live HTTP/1.1\r\nHost: h\r\n")
            while time.monotonic() - t0 < 10:
                time.sleep(0.25)
                if not conn.send(b"X: y\r\n"):  # 24 bytes a second, under the 100 required
                    break
                conn.s.setblocking(False)
                try:
                    peek = conn.s.recv(1, socket.MSG_PEEK)
                except BlockingIOError:
                    peek = None
                except OSError:
                    peek = b""
                conn.s.setblocking(True)
                conn.s.settimeout(20)
                if peek is not None:
                    break  # the server answered or closed
            r = conn.read()
            results.append((r.status if r else None, time.monotonic() - t0))
            conn.close()

        def slow_body(results: list) -> None:
            conn = Conn(port)
            t0 = time.monotonic()
            conn.send(http("POST", "/v2/models/fp32/infer", {"Content-Length": str(len(probe))}) + probe[:10])
            r = conn.read()  # the rest never comes
            results.append((r.status if r else None, time.monotonic() - t0))
            conn.close()

        steady = threading.Thread(target=steady_client)
        steady.start()
        results: list = []
        slow = [threading.Thread(target=slow_head, args=(results,)) for _ in range(8)]
        slow += [threading.Thread(target=slow_body, args=(results,)) for _ in range(8)]
        for t in slow:
            t.start()
        for t in slow:
            t.join()
        stop.set()
        steady.join()
        cap = 2 * HEADER_TIMEOUT_S + 2.5  # the head's cap, the sweeper's period, a loaded machine
        c.check(all(s == 408 for s, _ in results), f"slow clients: statuses {[s for s, _ in results]} (expected 408)")
        c.check(all(t < cap for _, t in results),
                f"slow clients: cut off after {max(t for _, t in results):.2f} s (expected under {cap} s)")
        c.check(not failed and served[0] > 0,
                f"a steady client beside 16 slow ones: {served[0]} served, failures {failed[:3]}")
        print(f"ok   slow clients: 16 cut off with 408 after {min(t for _, t in results):.2f}.."
              f"{max(t for _, t in results):.2f} s; a steady client served {served[0]} inferences meanwhile", flush=True)
        err = good_inference(port)
        c.check(err is None, f"after the slow clients: {err}")

        status = srv.stop()
        c.check(status == 0, f"glassbox serve exited {status} after SIGTERM")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
