"""The Python anchor of `glassbox bench serve`: FastAPI + uvicorn + PyTorch serving a TorchScript
file on the KServe v2 infer route with the binary tensor extension, the way a Python team would
write it.

    .venv/bin/python bench/fastapi_server.py --model-file repo/mlp/1/model.pt --name mlp \
        --threads 2 --port 0
    # prints: serving: http://127.0.0.1:PORT (fastapi 0.165.0, uvicorn 0.55.0, loop asyncio, http h11)

The setup is the usual one: torch.jit.load once, eval, torch.set_num_threads(THREADS) (the same
intra-op thread count glassbox serve gets), one uvicorn worker, an `async def` route that runs the
model inline under torch.inference_mode() (a sync route would run in Starlette's thread pool and
oversubscribe the cores with concurrent intra-op pools), no access log. uvicorn picks uvloop and
httptools when they are installed (uvicorn[standard]) and asyncio + h11 otherwise; the ready line
says which. Requests and responses follow serving.md: JSON header of
Inference-Header-Content-Length bytes, then the raw little-endian tensors; outputs are binary when
asked for (or when binary_data_output is set), JSON otherwise.
"""

import argparse
import contextlib
import json
import socket
import sys

import fastapi
import numpy as np
import torch
import uvicorn
from fastapi import FastAPI, Request, Response

DTYPES = {"FP32": (np.float32, 4), "FP64": (np.float64, 8), "INT64": (np.int64, 8), "INT32": (np.int32, 4), "UINT8": (np.uint8, 1)}
TORCH_TO_V2 = {torch.float32: "FP32", torch.float64: "FP64", torch.int64: "INT64", torch.int32: "INT32", torch.uint8: "UINT8"}


def error(status, message):
    return Response(content=json.dumps({"error": message}), status_code=status, media_type="application/json")


def make_app(model, name, on_ready=lambda: None):
    @contextlib.asynccontextmanager
    async def lifespan(_app):
        on_ready()
        yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/v2/health/ready")
    async def ready():
        return Response(status_code=200)

    @app.post("/v2/models/{model_name}/infer")
    async def infer(model_name: str, request: Request):
        if model_name != name:
            return error(400, f"unknown model '{model_name}'")
        body = await request.body()
        header_length = request.headers.get("inference-header-content-length")
        hlen = int(header_length) if header_length is not None else len(body)
        try:
            header = json.loads(body[:hlen])
        except ValueError as e:
            return error(400, f"malformed JSON request header: {e}")
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
            return error(400, f"{len(body) - offset} unexpected bytes after the binary inputs")
        with torch.inference_mode():
            result = model(*inputs)
        outputs = result if isinstance(result, (tuple, list)) else (result,)
        binary_default = bool((header.get("parameters") or {}).get("binary_data_output", False))
        wanted = {o["name"]: bool((o.get("parameters") or {}).get("binary_data", binary_default)) for o in header.get("outputs", [])}
        meta, blobs = [], []
        for i, tensor in enumerate(outputs):
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
        response = {"model_name": name, "model_version": "1", "outputs": meta}
        if header.get("id"):
            response["id"] = header["id"]
        text = json.dumps(response).encode()
        if not blobs:
            return Response(content=text, media_type="application/json")
        return Response(content=text + b"".join(blobs), media_type="application/octet-stream",
                        headers={"Inference-Header-Content-Length": str(len(text))})

    return app


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-file", required=True, help="TorchScript file (model.pt)")
    p.add_argument("--name", required=True, help="model name in the route")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    model = torch.jit.load(a.model_file, map_location="cpu").eval()
    # proto IPPROTO_TCP as uvicorn's own host/port binding (getaddrinfo) gives it: asyncio sets TCP_NODELAY
    # only on such sockets, and without it the header and body writes of a response meet the
    # client's delayed ACK (40 ms per request).
    sock = socket.socket(socket.AF_INET6 if ":" in a.host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((a.host, a.port))
    sock.listen(2048)  # before the ready line, so a client that reads it can connect at once
    port = sock.getsockname()[1]
    loop = "uvloop" if _has("uvloop") else "asyncio"
    http = "httptools" if _has("httptools") else "h11"

    def announce():
        print(f"serving: http://{a.host}:{port} (fastapi {fastapi.__version__}, uvicorn {uvicorn.__version__}, "
              f"torch {torch.__version__}, loop {loop}, http {http}, threads {torch.get_num_threads()})", flush=True)

    app = make_app(model, a.name, announce)
    server = uvicorn.Server(uvicorn.Config(app, workers=1, log_level="warning", access_log=False))
    server.run(sockets=[sock])


def _has(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    sys.exit(main())
