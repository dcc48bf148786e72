"""A LitServe anchor for `glassbox bench serve`: LitServe serving a TorchScript file on the KServe v2
infer route with the binary tensor extension, set up for throughput the way LitServe documents.

    .venv/bin/python bench/litserve_server.py --model-file repo/mlp/1/model.pt --name mlp \
        --threads 1 --port 0
    # prints: serving: http://127.0.0.1:PORT (litserve 0.2.19, ..., batch 32/2 ms, ..., queue zmq, threads 1)

LitServe runs an HTTP process (FastAPI + uvicorn) in front of an inference worker process; requests
reach the worker through a multiprocessing manager queue, responses come back through ZeroMQ
(fast_queue). The LitAPI here is mounted at /v2/models/NAME/infer (api_path) instead of LitServe's
/predict. LitServe hands decode_request a parsed JSON body when it is annotated with starlette's
Request, which a binary request is not, so its request annotation is a FastAPI dependency that
reads the raw body and the Inference-Header-Content-Length header; the body crosses to the worker
as bytes. There decode_request splits it into the JSON header and the raw little-endian tensors,
predict runs the model under torch.inference_mode() with torch.set_num_threads(THREADS), and
encode_response answers with outputs binary when asked for (or when binary_data_output is set),
JSON otherwise, as serving.md describes. With batching, batch concatenates the requests along
dimension 0, the model runs once, and each request gets its own rows back; a request the worker
cannot parse gets a 400 of its own without failing the rest of its batch.

Dynamic batching is on (max_batch_size 32, batch_timeout 2 ms). For a small model each request's
two hops through the manager process cost far more than the model, and batching does not remove
them, so it gains little: on an MLP at concurrency 32 it raised throughput by about 15% over no
batching (16 / 1 ms gained nothing), at 128 it made no difference, and at concurrency 1 each
request waits the whole timeout (LitServe's batch collection waits it out unless the batch fills,
polling the queue every millisecond, which also costs about a tenth of a core in the manager and in
the worker while idle). --max-batch-size 1 turns it off.

Other settings: one inference worker and one API server (the defaults, and one core each on a
2-core machine), fast_queue, no request timeout, no OpenAPI page, no client.py written to the
working directory, no access log; uvicorn picks uvloop and httptools (uvicorn[standard], a LitServe
dependency). LitServe takes no port 0, so --port 0 picks a free port first and passes it on. The
ready line is printed once GET /health answers 200 (the worker has loaded the model and the HTTP
server accepts connections). SIGTERM and SIGINT both run LitServe's own shutdown, which stops the
HTTP process, the inference worker and the queue processes; the exit status is then 0.
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
import warnings
from typing import Annotated

import fastapi
import litserve as ls
import numpy as np
import torch
import uvicorn
from fastapi import Depends, Request, Response

DTYPES = {"FP32": (np.float32, 4), "FP64": (np.float64, 8), "INT64": (np.int64, 8), "INT32": (np.int32, 4), "UINT8": (np.uint8, 1)}
TORCH_TO_V2 = {torch.float32: "FP32", torch.float64: "FP64", torch.int64: "INT64", torch.int32: "INT32", torch.uint8: "UINT8"}


async def read_raw_request(request: Request):
    """The raw body and the binary-extension header length, as LitServe queues them to the worker."""
    return await request.body(), request.headers.get("inference-header-content-length")


RawRequest = Annotated[tuple, Depends(read_raw_request)]


def error(status, message):
    return Response(content=json.dumps({"error": message}), status_code=status, media_type="application/json")


class KServeV2API(ls.LitAPI):
    def __init__(self, model_file, name, threads, **kwargs):
        super().__init__(api_path=f"/v2/models/{name}/infer", **kwargs)
        self.model_file = model_file
        self.name = name
        self.threads = threads

    def setup(self, device):
        # the inputs are read-only views of the request body, which the model only reads
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        torch.set_num_threads(self.threads)
        self.model = torch.jit.load(self.model_file, map_location="cpu").eval()

    def decode_request(self, request: RawRequest, context) -> tuple:
        body, header_length = request
        try:
            hlen = int(header_length) if header_length is not None else len(body)
            header = json.loads(body[:hlen])
            offset = hlen
            inputs = []
            for spec in header.get("inputs", []):
                dtype, size = DTYPES[spec["datatype"]]
                shape = spec["shape"]
                params = spec.get("parameters") or {}
                if "binary_data_size" in params:
                    n = int(params["binary_data_size"])
                    array = np.frombuffer(body, dtype=dtype, count=n // size, offset=offset).reshape(shape)
                    offset += n
                else:
                    array = np.asarray(spec["data"], dtype=dtype).reshape(shape)
                inputs.append(torch.from_numpy(array))
            if offset != len(body):
                raise ValueError(f"{len(body) - offset} unexpected bytes after the binary inputs")
        except (ValueError, KeyError, TypeError) as e:
            context["error"] = f"malformed request: {e}"
            return None
        context["header"] = header
        return tuple(inputs)

    def batch(self, inputs):
        good = [x for x in inputs if x is not None]
        if not good:
            return None, [None] * len(inputs)
        if len(good) == 1:
            joined = good[0]
        else:
            joined = tuple(torch.cat(column) for column in zip(*good))
        return joined, [None if x is None else x[0].shape[0] for x in inputs]

    def predict(self, x, context):
        batched = isinstance(context, list)
        tensors, rows = x if batched else (x, None)
        if tensors is None:
            return [None] * len(rows) if batched else None
        with torch.inference_mode():
            result = self.model(*tensors)
        outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if not batched:
            return outputs
        per_request, start = [], 0
        for n in rows:
            if n is None:
                per_request.append(None)
                continue
            per_request.append(tuple(o[start:start + n] for o in outputs))
            start += n
        return per_request

    def unbatch(self, output):
        return output

    def encode_response(self, output, context) -> Response:
        if "error" in context:
            return error(400, context["error"])
        header = context["header"]
        binary_default = bool((header.get("parameters") or {}).get("binary_data_output", False))
        wanted = {o["name"]: bool((o.get("parameters") or {}).get("binary_data", binary_default)) for o in header.get("outputs", [])}
        meta, blobs = [], []
        for i, tensor in enumerate(output):
            out_name = f"OUTPUT__{i}"
            if wanted and out_name not in wanted:
                continue
            binary = wanted.get(out_name, binary_default)
            entry = {"name": out_name, "datatype": TORCH_TO_V2[tensor.dtype], "shape": list(tensor.shape)}
            if binary:
                raw = tensor.contiguous().numpy().tobytes()
                entry["parameters"] = {"binary_data_size": len(raw)}
                blobs.append(raw)
            else:
                entry["data"] = tensor.flatten().tolist()
            meta.append(entry)
        response = {"model_name": self.name, "model_version": "1", "outputs": meta}
        if header.get("id"):
            response["id"] = header["id"]
        text = json.dumps(response).encode()
        if not blobs:
            return Response(content=text, media_type="application/json")
        return Response(content=text + b"".join(blobs), media_type="application/octet-stream",
                        headers={"Inference-Header-Content-Length": str(len(text))})


def free_port(host):
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def announce_when_healthy(url, line, stop):
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    print(line, flush=True)
                    return
        except OSError:
            pass
        time.sleep(0.05)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-file", required=True, help="TorchScript file (model.pt)")
    p.add_argument("--name", required=True, help="model name in the route")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in the inference worker")
    p.add_argument("--host", default="127.0.0.1", choices=["127.0.0.1", "0.0.0.0", "::"], help="LitServe accepts only these")
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    p.add_argument("--max-batch-size", type=int, default=32, help="LitAPI max_batch_size (1: no batching)")
    p.add_argument("--batch-timeout-ms", type=float, default=2.0, help="LitAPI batch_timeout, in milliseconds")
    p.add_argument("--workers", type=int, default=1, help="LitServer workers_per_device (inference processes)")
    p.add_argument("--api-servers", type=int, default=1, help="num_api_servers (uvicorn processes)")
    p.add_argument("--no-fast-queue", action="store_true", help="multiprocessing queues instead of ZeroMQ")
    a = p.parse_args()
    model_file = os.path.abspath(a.model_file)
    if not os.path.isfile(model_file):
        p.error(f"no such file: {a.model_file}")
    port = a.port or free_port(a.host)
    batching = a.max_batch_size > 1
    with warnings.catch_warnings():
        # without batching LitServe warns that batch and unbatch are defined (they are not called then)
        warnings.simplefilter("ignore", UserWarning)
        api = KServeV2API(model_file, a.name, a.threads, max_batch_size=a.max_batch_size,
                          batch_timeout=a.batch_timeout_ms / 1000.0 if batching else 0.0)
    server = ls.LitServer(api, accelerator="cpu", workers_per_device=a.workers, timeout=False,
                          fast_queue=not a.no_fast_queue, disable_openapi_url=True)
    loop = "uvloop" if _has("uvloop") else "asyncio"
    http = "httptools" if _has("httptools") else "h11"
    batch = f"batch {a.max_batch_size}/{a.batch_timeout_ms:g} ms" if batching else "no batching"
    url_host = "127.0.0.1" if a.host == "0.0.0.0" else (f"[{a.host}]" if ":" in a.host else a.host)
    line = (f"serving: http://{url_host}:{port} (litserve {ls.__version__}, fastapi {fastapi.__version__}, "
            f"uvicorn {uvicorn.__version__}, torch {torch.__version__}, loop {loop}, http {http}, {batch}, "
            f"workers {a.workers}, api servers {a.api_servers}, "
            f"queue {'mp' if a.no_fast_queue else 'zmq'}, threads {a.threads})")
    stop = threading.Event()
    threading.Thread(target=announce_when_healthy, args=(f"http://{url_host}:{port}", line, stop), daemon=True).start()

    # LitServe shuts down cleanly on KeyboardInterrupt; SIGTERM would otherwise kill only this
    # process and leave the HTTP, worker and queue processes behind.
    # The processes LitServe forks inherit this handler; they keep the default behaviour.
    main_pid = os.getpid()

    def interrupt(signum, _frame):
        if os.getpid() != main_pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)  # also when started with SIGINT ignored
    try:
        server.run(host=a.host, port=port, num_api_servers=a.api_servers, log_level="warning",
                   generate_client_file=False, access_log=False)
    finally:
        stop.set()


def _has(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    sys.exit(main())
