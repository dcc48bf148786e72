"""The TorchServe handler of the TorchServe anchor of `glassbox bench serve` (bench/torchserve_server.py
archives it into the model's .mar next to the TorchScript file): KServe v2 requests, binary tensor
extension included, in and out.

TorchServe's own kservev2 envelope reads only JSON tensors (no binary extension), keeps the first
request of a batch and flattens the outputs, so this handler reads the KServe v2 body itself. The
frontend routes POST /v2/models/NAME/infer (and /predictions/NAME) to it with the body and the
request headers: a JSON header of Inference-Header-Content-Length bytes, then the raw little-endian
tensors (the body is all JSON when the header is absent). The requests of a batch (TorchServe's
batchSize / maxBatchDelay) are concatenated along dimension 0, run once under
torch.inference_mode() with torch.set_num_threads(handler.threads from the model's
model-config.yaml), and each request gets its own rows back: binary when asked for (or when
binary_data_output is set, with the Inference-Header-Content-Length response header), JSON
otherwise. A request that does not parse gets a 400 of its own; the rest of its batch still runs.
"""

import json
import os
import warnings

import numpy as np
import torch

DTYPES = {"FP32": (np.float32, 4), "FP64": (np.float64, 8), "INT64": (np.int64, 8), "INT32": (np.int32, 4), "UINT8": (np.uint8, 1)}
TORCH_TO_V2 = {torch.float32: "FP32", torch.float64: "FP64", torch.int64: "INT64", torch.int32: "INT32", torch.uint8: "UINT8"}


def _header(context, idx, name):
    headers = context.get_all_request_header(idx) or {}
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _parse(body, header_length):
    """(JSON header, input tensors) of one KServe v2 request body (bytes, or the JSON already decoded)."""
    if body is None:
        raise ValueError("no request body")
    if isinstance(body, dict):
        header, body, offset = body, b"", 0
    else:
        body = bytes(body)
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
    return header, inputs


class KServeV2Handler:
    def __init__(self):
        self.model = None
        self.name = None
        self.version = "1"

    def initialize(self, context):
        # the inputs are read-only views of the request body, which the model only reads
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        config = (context.model_yaml_config or {}).get("handler") or {}
        torch.set_num_threads(int(config.get("threads", 1)))
        model = context.manifest["model"]
        path = os.path.join(context.system_properties["model_dir"], model["serializedFile"])
        self.model = torch.jit.load(path, map_location="cpu").eval()
        self.name = context.model_name
        self.version = str(model.get("modelVersion", "1"))

    def handle(self, data, context):
        parsed = []
        for idx, request in enumerate(data):
            body = request.get("body")
            if body is None:
                body = request.get("data")
            try:
                parsed.append(_parse(body, _header(context, idx, "inference-header-content-length")))
            except (ValueError, KeyError, TypeError) as e:
                parsed.append(str(e))
        good = [p for p in parsed if not isinstance(p, str)]
        outputs = ()
        if good:
            columns = [torch.cat(c) if len(good) > 1 else c[0] for c in zip(*(inputs for _, inputs in good))]
            with torch.inference_mode():
                result = self.model(*columns)
            outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        responses, start = [], 0
        for idx, p in enumerate(parsed):
            if isinstance(p, str):
                context.set_response_status(400, "Bad Request", idx)
                context.set_response_content_type(idx, "application/json")
                responses.append(json.dumps({"error": f"malformed request: {p}"}).encode())
                continue
            header, inputs = p
            rows = inputs[0].shape[0] if inputs else 0
            mine = tuple(o[start:start + rows] for o in outputs) if len(good) > 1 else outputs
            start += rows
            responses.append(self._encode(header, mine, context, idx))
        return responses

    def _encode(self, header, outputs, context, idx):
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
        response = {"model_name": self.name, "model_version": self.version, "outputs": meta}
        if header.get("id"):
            response["id"] = header["id"]
        text = json.dumps(response).encode()
        if not blobs:
            context.set_response_content_type(idx, "application/json")
            return text
        context.set_response_content_type(idx, "application/octet-stream")
        context.set_response_header(idx, "Inference-Header-Content-Length", str(len(text)))
        return text + b"".join(blobs)
