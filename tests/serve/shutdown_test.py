#!/usr/bin/env python3
"""glassbox serve's graceful shutdown under load. Client threads send batches of 16 to the slow
model in a loop on keep-alive connections; a monitor polls /v2/health/ready and /live on fresh
connections; then the server gets SIGTERM (again with SIGINT, and with --exit-timeout 0).

Asserted, per scenario:
  - every request sent before the signal gets a complete response: 200 (outputs equal Python
    torch's) or 503 with {"error": ...}; never a reset, an empty or a truncated response;
  - requests sent after the signal get 200 or 503 until the listener closes (then: refused, or no
    response on a connection the server closed at exit, provided no request begun on a fresh
    connection after it was written was answered);
    at least one gets 503 (unless
    --exit-timeout is 0: then the requests still queued get 503 and the listener closes at once);
  - readiness turns 400 (or refused once it exits) and never returns to 200; liveness is 200 until
    the listener closes (never 400);
  - the process exits 0 within --exit-timeout + a margin.
Counts and orderings only, no timing thresholds.

    shutdown_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

CLIENTS = 8
BATCH = 16
MARGIN_S = 30  # beyond --exit-timeout for the process to exit
GONE = ("refused", "reset")  # a health probe once the listener has closed


class Client(threading.Thread):
    def __init__(self, port: int, idx: int, repo: Path, signalled: threading.Event):
        super().__init__(daemon=True)
        self.port = port
        x = np.random.default_rng(idx).standard_normal((BATCH, 64)).astype(np.float32)
        self.body = json.dumps({"inputs": [{"name": "INPUT__0", "shape": [BATCH, 64], "datatype": "FP32",
                                            "data": x.reshape(-1).tolist()}]}).encode()
        self.want = sc.reference("slow", [x], repo)[0]
        self.signalled = signalled
        self.outcomes: list[tuple[bool, str, str]] = []  # (sent after the signal?, kind, detail)
        # (started, written, answered, on a fresh connection?), time.monotonic(); `written` is when
        # the request's bytes were handed to the kernel (loopback: in the server's receive queue), or
        # when the write failed
        self.times: list[tuple[float, float, float, bool]] = []
        self.written = 0.0
        self.first_done = threading.Event()

    def one(self, conn: http.client.HTTPConnection) -> tuple[str, str]:
        try:
            conn.request("POST", "/v2/models/slow/infer", body=self.body, headers={"Content-Type": "application/json"})
        except ConnectionRefusedError:
            return "refused", ""
        except (BrokenPipeError, ConnectionResetError) as e:
            return "no-response", type(e).__name__
        finally:
            self.written = time.monotonic()
        try:
            r = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
            return "no-response", type(e).__name__
        except socket.timeout:
            return "timeout", "no response in 120 s"
        except http.client.HTTPException as e:
            return "broken", f"{type(e).__name__}: {e}"
        try:
            data = r.read()
        except (http.client.IncompleteRead, ConnectionResetError, socket.timeout) as e:
            return "broken", f"status {r.status}, body cut: {type(e).__name__}: {e}"
        if r.status == 200:
            try:
                out = json.loads(data)["outputs"][0]
                got = np.array(out["data"], np.float32).reshape(out["shape"])
            except Exception as e:  # noqa: BLE001
                return "broken", f"200 with an unreadable body ({e}): {data[:120]!r}"
            same, detail = sc.close_enough(got, self.want)
            return ("200", "") if same else ("wrong", detail)
        if r.status == 503:
            try:
                msg = json.loads(data)["error"]
            except Exception:  # noqa: BLE001
                return "broken", f"503 without a JSON error: {data[:120]!r}"
            return "503", msg
        return "other", f"status {r.status}: {data[:200]!r}"

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        for _ in range(100000):
            after = self.signalled.is_set()
            t = time.monotonic()
            fresh = conn.sock is None  # http.client connects on the first request
            kind, detail = self.one(conn)
            self.outcomes.append((after, kind, detail))
            self.times.append((t, self.written, time.monotonic(), fresh))
            self.first_done.set()
            if kind in ("refused", "timeout") or (kind == "no-response" and not after):
                break
            if kind != "200":
                conn.close()  # a fresh connection next (the server may have closed this one)
                time.sleep(0.01)
        conn.close()


class Monitor(threading.Thread):
    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port = port
        self.stop_flag = threading.Event()
        self.ready: list[tuple[float, str]] = []
        self.live: list[tuple[float, str]] = []

    def probe(self, path: str) -> str:
        try:
            status, _, _ = sc.request(self.port, "GET", path, timeout=30)
            return str(status)
        except ConnectionRefusedError:
            return "refused"
        except (ConnectionResetError, http.client.RemoteDisconnected):
            return "reset"  # the listener closed between the kernel's accept and ours: exiting
        except OSError as e:
            return f"error:{type(e).__name__}"

    def run(self) -> None:
        while not self.stop_flag.is_set():
            t = time.monotonic()
            self.ready.append((t, self.probe("/v2/health/ready")))
            self.live.append((t, self.probe("/v2/health/live")))
            if self.ready[-1][1] == "refused" and self.live[-1][1] == "refused":
                break
            time.sleep(0.005)


def collapse(series: list[tuple[float, str]]) -> str:
    """'200 x12 -> 400 x5 -> refused x1'."""
    out = []
    for _, s in series:
        if out and out[-1][0] == s:
            out[-1][1] += 1
        else:
            out.append([s, 1])
    return " -> ".join(f"{s} x{n}" for s, n in out)


def scenario(args, c: sc.Checks, repo: Path, work: Path, sig: int, exit_timeout: float) -> None:
    name = f"{signal.Signals(sig).name} --exit-timeout {exit_timeout:g}"
    srv = sc.ServeProcess(args.glassbox, repo, work, ["--exit-timeout", exit_timeout],
                          name=f"serve-shutdown-{signal.Signals(sig).name}-{exit_timeout:g}").start()
    try:
        signalled = threading.Event()
        clients = [Client(srv.port, i, repo, signalled) for i in range(CLIENTS)]
        monitor = Monitor(srv.port)
        monitor.start()
        for cl in clients:
            cl.start()
        # Load first: every client has had one answer and another request is on its way.
        for cl in clients:
            cl.first_done.wait(120)
        before = sum(len(cl.outcomes) for cl in clients)
        while sum(len(cl.outcomes) for cl in clients) < before + CLIENTS:
            time.sleep(0.01)
        signalled.set()
        t_signal = time.monotonic()
        srv.proc.send_signal(sig)
        try:
            rc = srv.proc.wait(exit_timeout + MARGIN_S)
        except subprocess.TimeoutExpired:
            rc = None
        for cl in clients:
            cl.join(60)
        monitor.stop_flag.set()
        monitor.join(60)
    finally:
        srv.stop(signal.SIGKILL if srv.proc.poll() is None else sig)

    c.check(rc == 0, f"{name}: exit status {rc} (expected 0 within {exit_timeout + MARGIN_S:g} s)")
    tally = Counter()
    for cl in clients:
        for after, kind, detail in cl.outcomes:
            tally[(after, kind)] += 1
            if not after:
                c.check(kind in ("200", "503"), f"{name}: a request sent before the signal got {kind} {detail}")
            else:
                c.check(kind in ("200", "503", "refused", "no-response"),
                        f"{name}: a request sent after the signal got {kind} {detail}")
    print(f"{name}: " + ", ".join(f"{'after' if a else 'before'} {k}: {n}" for (a, k), n in sorted(tally.items())))
    if exit_timeout > 0:  # with 0 the listener may close before any new request lands
        c.check(tally[(True, "503")] > 0, f"{name}: no request got 503 after the signal (tally {dict(tally)})")
    c.check(tally[(False, "200")] > 0, f"{name}: no successful request before the signal")
    # A request left without a response is the server closing an idle keep-alive connection (or the
    # listener) under it at exit. The server marks itself stopping before it closes any idle
    # connection, and from then on accepts no connection; so if a request begun on a fresh connection
    # after this one's bytes were written was answered, the server dropped a request while it was
    # still serving. (Requests on other keep-alive connections are no evidence: each connection
    # decides "idle or not" on its own thread, a moment apart. Nor is the start of a client's call:
    # its thread may wait for the GIL before it writes.)
    events = [(t, k, d) for cl in clients for (a, k, d), t in zip(cl.outcomes, cl.times) if a]
    for (started, written, ended, fresh), k, d in events:
        if k == "no-response":
            later = [t for t, k2, _ in events if k2 in ("200", "503") and t[3] and t[0] > written]
            print(f"{name}: no response ({d}) to a request written {written - t_signal:+.3f} s after the signal "
                  f"(started {started - t_signal:+.3f} s, failed {ended - t_signal:+.3f} s{', fresh' if fresh else ''}); "
                  f"{len(later)} requests "
                  f"started later on a fresh connection were answered "
                  f"{[(round(t[0] - t_signal, 3), round(t[1] - t_signal, 3), round(t[2] - t_signal, 3)) for t in later]}")
            c.check(not later, f"{name}: a request written {written - t_signal:+.3f} s after the signal got no "
                               f"response while {len(later)} started later on a fresh connection were answered")
    msgs = {d for cl in clients for a, k, d in cl.outcomes if k == "503"}
    print(f"{name}: 503 messages: {sorted(msgs)[:3]}")

    print(f"{name}: ready {collapse(monitor.ready)}")
    print(f"{name}: live  {collapse(monitor.live)}")
    ready = [s for _, s in monitor.ready]
    live = [s for _, s in monitor.live]
    c.check(bool(ready) and ready[0] == "200", f"{name}: ready was not 200 under load before the signal")
    first_not = next((i for i, s in enumerate(ready) if s != "200"), None)
    c.check(first_not is not None, f"{name}: readiness never went false")
    if first_not is not None:
        tail = ready[first_not:]
        gone = next((i for i, s in enumerate(tail) if s in GONE), len(tail))
        c.check(all(s == "400" for s in tail[:gone]) and all(s in GONE for s in tail[gone:]),
                f"{name}: readiness after it went false: {collapse(monitor.ready[first_not:])} "
                "(expected 400, then refused once the listener closes)")
        if exit_timeout > 0:  # with 0 the drain may end before a probe lands
            c.check("400" in tail, f"{name}: readiness never answered 400 during the drain ({collapse(monitor.ready)})")
    first_gone = next((i for i, s in enumerate(live) if s in GONE), len(live))
    c.check(all(s == "200" for s in live[:first_gone]), f"{name}: liveness before exit: {collapse(monitor.live)}")
    c.check(all(s in GONE for s in live[first_gone:]), f"{name}: liveness came back after the listener closed")
    log = srv.output()
    print(f"{name}: server log tail: {log.strip().splitlines()[-2:]}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-serve-shutdown-")
    c = sc.Checks("shutdown_test")
    repo = sc.build_repository(work / "repo", models=["slow"])
    for sig, timeout in ((signal.SIGTERM, 20.0), (signal.SIGINT, 20.0), (signal.SIGTERM, 0.0)):
        t = time.monotonic()
        try:
            scenario(args, c, repo, work, sig, timeout)
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            c.check(False, f"{signal.Signals(sig).name}: {type(e).__name__}: {e}")
        print(f"scenario {signal.Signals(sig).name} --exit-timeout {timeout:g}: {time.monotonic() - t:.1f} s")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
