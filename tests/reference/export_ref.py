"""Reference check of glassbox's exports with the runtimes users deploy with.

    export_ref.py MANIFEST.json

MANIFEST lists cases {label, dir, input_name, output_name}; each dir holds model.pt (TorchScript),
model.onnx and io.safetensors with inputs "<key>" and glassbox's outputs "<key>.glassbox". For
each case: torch.jit.load runs the TorchScript file, onnx.checker.check_model(full_check=True)
checks the ONNX file and onnxruntime runs it; prints a JSON list with the largest absolute
differences to glassbox's outputs per input, the checker's verdict, the opset, the graph's input
names and its batch dimension.
"""
import json
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import torch
from safetensors.torch import load_file

from ref_common import clean


def check_case(case):
    d = case["dir"]
    out = {"label": case["label"], "results": {}}
    ts = torch.jit.load(f"{d}/model.pt")
    ts.eval()
    # The contract travels inside the TorchScript file too.
    extra = {"contract.json": ""}
    torch.jit.load(f"{d}/model.pt", _extra_files=extra)
    out["embedded_contract_name"] = json.loads(extra["contract.json"]).get("name")
    model = onnx.load(f"{d}/model.onnx")
    try:
        onnx.checker.check_model(model, full_check=True)
        out["onnx_check"], out["onnx_check_error"] = True, ""
    except Exception as e:  # noqa: BLE001 - report the checker's verdict
        out["onnx_check"], out["onnx_check_error"] = False, f"{type(e).__name__}: {e}"
    out["onnx_opset"] = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    out["onnx_inputs"] = [i.name for i in model.graph.input]
    out["onnx_outputs"] = [o.name for o in model.graph.output]
    out["onnx_batch_dim"] = model.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    # ONNX initializers and TorchScript state_dict() carry the same names and values.
    state = ts.state_dict()
    shared = [t for t in model.graph.initializer if t.name in state]
    out["shared_tensors"] = len(shared)
    out["shared_tensors_equal"] = all(
        np.array_equal(onnx.numpy_helper.to_array(t), state[t.name].numpy()) for t in shared)
    session = ort.InferenceSession(f"{d}/model.onnx", providers=["CPUExecutionProvider"])
    io = load_file(f"{d}/io.safetensors")
    worst_ts, worst_ort = 0.0, 0.0
    for key in sorted(k for k in io if not k.endswith(".glassbox")):
        x = io[key]
        want = io[key + ".glassbox"].double()
        with torch.no_grad():
            got_ts = ts(x).double()
        got_ort = torch.from_numpy(session.run([case["output_name"]], {case["input_name"]: x.numpy()})[0]).double()
        r = {
            "torchscript_max_abs": float((got_ts - want).abs().max()),
            "onnxruntime_max_abs": float((got_ort - want).abs().max()),
            "output_abs_mean": float(want.abs().mean()),
            "shape": list(got_ort.shape),
        }
        worst_ts, worst_ort = max(worst_ts, r["torchscript_max_abs"]), max(worst_ort, r["onnxruntime_max_abs"])
        out["results"][key] = r
    out["torchscript_worst"], out["onnxruntime_worst"] = worst_ts, worst_ort
    return out


def main():
    torch.set_num_threads(2)
    cases = json.load(open(sys.argv[1]))
    print(json.dumps(clean([check_case(c) for c in cases])))


if __name__ == "__main__":
    np.set_printoptions(precision=10)
    main()
