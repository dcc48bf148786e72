"""A TorchServe anchor for `glassbox bench serve`: TorchServe serving a TorchScript file on the KServe v2
infer route with the binary tensor extension, deployed for throughput the way TorchServe documents.

    .venv/bin/python bench/torchserve_server.py --model-file repo/mlp/1/model.pt --name mlp \
        --threads 1 --port 0
    # prints: serving: http://127.0.0.1:PORT (torchserve 0.12.0, torch ..., workers 1, batch 32/2 ms, threads 1, started in ... s)

In a temporary directory it archives the TorchScript file with torch-model-archiver into NAME.mar
(handler: bench/torchserve_handler.py, which reads and writes KServe v2 bodies, binary tensors
included; model-config.yaml: minWorkers = maxWorkers = --workers, batchSize, maxBatchDelay, the
handler's intra-op thread count), writes config.properties and a log4j2 configuration there, and
starts `torchserve --start --foreground` (the Java frontend, which starts the Python worker
processes) in a process group of its own, with its working directory, java.io.tmpdir (the unpacked
model, the worker sockets), TorchServe's pid file and any log files inside the temporary directory,
never in the caller's working directory or /tmp itself. Clients send POST /v2/models/NAME/infer, as
to the other servers of the benchmark (TorchServe's frontend routes it to the handler;
/predictions/NAME takes the same body). The body must be sent as application/octet-stream or
application/json: TorchServe splits an application/x-www-form-urlencoded body (curl -d's default)
into form fields.

Dynamic batching is on (batchSize 32, maxBatchDelay 2 ms): TorchServe's frontend gathers the queued
requests into one message to the worker, so the per-request hop to the Python worker is shared,
which for a small model is most of the cost (on an MLP it about tripled throughput at concurrency 32
and 128; at concurrency 1 each request waits up to the delay instead). One worker process with
--threads intra-op threads: a second worker did not raise throughput on 2 cores.

config.properties: inference API on --host:--port (0: a free port), management API on a free
127.0.0.1 port (the launcher reads the worker state there), no metrics API and no system metrics,
no token authorization, no model control API, no config snapshots, asynchronous logging, request
bodies handed to the handler undecoded (JSON too), a job queue deeper than any benchmark
concurrency. Logging is warnings only, on stderr (no access log, no metrics logs). The ready line
is printed once the model's workers are READY and GET /ping says Healthy. SIGTERM or SIGINT stops
the whole process group (SIGTERM, then SIGKILL after --stop-timeout seconds), reaps it, removes the
temporary directory and exits 0; a small watchdog process does the same if the launcher itself
dies without that chance.
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from importlib.metadata import version

HERE = os.path.dirname(os.path.abspath(__file__))
PR_SET_CHILD_SUBREAPER = 36

LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration>
  <Appenders>
    <Console name="STDERR" target="SYSTEM_ERR">
      <PatternLayout pattern="%d{ISO8601} [%-5p] %c - %m%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="ACCESS_LOG" level="off"/>
    <Logger name="MODEL_METRICS" level="off"/>
    <Logger name="TS_METRICS" level="off"/>
    <Logger name="io.netty" level="error"/>
    <Logger name="org.apache" level="off"/>
    <Root level="warn">
      <AppenderRef ref="STDERR"/>
    </Root>
  </Loggers>
</Configuration>
"""

# Runs as a separate process that outlives the launcher: when the launcher's end of its stdin
# closes (the launcher exited, however it ended), it stops what is left of the TorchServe process
# group and removes the temporary directory.
WATCHDOG = r"""
import os, shutil, signal, sys, time
pgid, tmp = int(sys.argv[1]), sys.argv[2]
sys.stdin.buffer.read()
def alive():
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
if alive():
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive():
        os.killpg(pgid, signal.SIGKILL)
shutil.rmtree(tmp, ignore_errors=True)
"""


def free_port(host):
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def url_of(host, port):
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def tool(name):
    """A console script of this interpreter's environment (the venv's bin/), else from PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.path.exists(local) else (shutil.which(name) or name)


def archive(tmp, a):
    """NAME.mar in tmp/model_store: the TorchScript file, the handler and model-config.yaml."""
    store = os.path.join(tmp, "model_store")
    os.makedirs(store)
    config = os.path.join(tmp, "model-config.yaml")
    with open(config, "w") as f:
        f.write(f"minWorkers: {a.workers}\nmaxWorkers: {a.workers}\n"
                f"batchSize: {a.batch_size}\nmaxBatchDelay: {a.max_batch_delay_ms}\n"
                f"responseTimeout: 120\nstartupTimeout: 300\n"
                f"handler:\n  threads: {a.threads}\n")
    subprocess.run([tool("torch-model-archiver"), "--model-name", a.name, "--version", "1",
                    "--serialized-file", os.path.abspath(a.model_file),
                    "--handler", os.path.join(HERE, "torchserve_handler.py"),
                    "--config-file", config, "--export-path", store], check=True, cwd=tmp, stdout=sys.stderr)
    return store


def write_config(tmp, a, store, port, management_port):
    path = os.path.join(tmp, "config.properties")
    props = {
        "inference_address": url_of(a.host, port),
        "management_address": url_of("127.0.0.1", management_port),
        "enable_metrics_api": "false",
        "disable_system_metrics": "true",
        "disable_token_authorization": "true",
        "enable_model_api": "false",
        "model_store": store,
        "load_models": f"{a.name}={a.name}.mar",
        "async_logging": "true",
        "decode_input_request": "false",
        "job_queue_size": "1024",
        "install_py_dep_per_model": "false",
    }
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in props.items())
    with open(os.path.join(tmp, "log4j2.xml"), "w") as f:
        f.write(LOG4J2)
    return path


def get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def model_ready(management, name):
    try:
        status, body = get(f"{management}/models/{name}")
    except (OSError, urllib.error.URLError):
        return False
    if status != 200:
        return False
    workers = [w for m in json.loads(body) for w in m.get("workers", [])]
    return bool(workers) and all(w.get("status") == "READY" for w in workers)


def pinged(inference):
    try:
        status, body = get(f"{inference}/ping")
        return status == 200 and json.loads(body).get("status") == "Healthy"
    except (OSError, ValueError, urllib.error.URLError):
        return False


class Group:
    """The TorchServe process group: the torchserve CLI, the Java frontend and the Python workers."""

    def __init__(self, argv, env, cwd):
        self.cli = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=sys.stderr,
                                    start_new_session=True)
        self.pgid = self.cli.pid

    def alive(self):
        self.reap()
        try:
            os.killpg(self.pgid, 0)
            return True
        except ProcessLookupError:
            return False

    def reap(self):
        # The launcher is a child subreaper: the Java frontend and its workers become its children
        # when the CLI exits, and are reaped here instead of staying zombies in the group.
        self.cli.poll()
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def stop(self, timeout):
        if not self.alive():
            return
        os.killpg(self.pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive():
            os.killpg(self.pgid, signal.SIGKILL)
            while self.alive():
                time.sleep(0.05)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-file", required=True, help="TorchScript file (model.pt)")
    p.add_argument("--name", required=True, help="model name in the route")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in each worker")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    p.add_argument("--workers", type=int, default=1, help="Python worker processes (minWorkers = maxWorkers)")
    p.add_argument("--batch-size", type=int, default=32, help="batchSize (1: no batching)")
    p.add_argument("--max-batch-delay-ms", type=int, default=2, help="maxBatchDelay, in milliseconds")
    p.add_argument("--startup-timeout", type=float, default=300, help="seconds to wait for the model's workers")
    p.add_argument("--stop-timeout", type=float, default=8, help="seconds from SIGTERM to SIGKILL on shutdown")
    a = p.parse_args()
    if not os.path.isfile(a.model_file):
        p.error(f"no such file: {a.model_file}")
    t0 = time.monotonic()

    stop = threading.Event()

    def on_signal(_signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    tmp = tempfile.mkdtemp(prefix="torchserve-anchor-")
    group = None
    watchdog = None
    code = 0
    try:
        store = archive(tmp, a)
        port = a.port or free_port(a.host)
        management_port = free_port("127.0.0.1")
        config = write_config(tmp, a, store, port, management_port)
        logs = os.path.join(tmp, "logs")
        os.makedirs(logs)
        env = dict(os.environ, TEMP=tmp, TMPDIR=tmp, LOG_LOCATION=logs, METRICS_LOCATION=logs)
        group = Group([tool("torchserve"), "--start", "--foreground", "--ncs", "--disable-token-auth",
                       "--ts-config", config, "--model-store", store,
                       "--log-config", os.path.join(tmp, "log4j2.xml")], env, tmp)
        watchdog = subprocess.Popen([sys.executable, "-c", WATCHDOG, str(group.pgid), tmp], stdin=subprocess.PIPE,
                                    start_new_session=True)
        inference, management = url_of(a.host, port), url_of("127.0.0.1", management_port)
        deadline = time.monotonic() + a.startup_timeout
        while not stop.is_set():
            if group.cli.poll() is not None:
                print(f"torchserve_server: torchserve exited with status {group.cli.returncode} before the model "
                      "was ready", file=sys.stderr, flush=True)
                code = 1
                break
            if model_ready(management, a.name) and pinged(inference):
                batch = f"batch {a.batch_size}/{a.max_batch_delay_ms} ms" if a.batch_size > 1 else "no batching"
                print(f"serving: {inference} (torchserve {version('torchserve')}, torch {version('torch')}, "
                      f"workers {a.workers}, {batch}, threads {a.threads}, "
                      f"started in {time.monotonic() - t0:.1f} s)", flush=True)
                break
            if time.monotonic() > deadline:
                print(f"torchserve_server: the model was not ready after {a.startup_timeout:g} s", file=sys.stderr,
                      flush=True)
                code = 1
                break
            stop.wait(0.1)
        while code == 0 and not stop.is_set():
            if group.cli.poll() is not None:
                print(f"torchserve_server: torchserve exited with status {group.cli.returncode}", file=sys.stderr,
                      flush=True)
                code = 1
                break
            stop.wait(0.5)
    except subprocess.CalledProcessError as e:
        print(f"torchserve_server: {e}", file=sys.stderr, flush=True)
        code = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if group is not None:
            group.stop(a.stop_timeout)
        shutil.rmtree(tmp, ignore_errors=True)
        if watchdog is not None:
            watchdog.stdin.close()
            watchdog.wait()
    return code


if __name__ == "__main__":
    sys.exit(main())
