"""glassbox's exports of its zoo against torchvision (cli/export_cli_test.cpp, Export.ZooEqualsTorchvision).

  zoo_export_ref.py DIR CASE...

DIR/<case>/ holds zoo_ref.py's io.safetensors (the input x and torchvision's eval-mode logits on the
weights the export started from) and glassbox's model.pt (TorchScript) and, where exported,
model.onnx. torch.jit.load runs the TorchScript file and onnxruntime the ONNX file (after
onnx.checker); prints {case: {"torchscript": max |diff|, "onnx": max |diff| or null, "scale": max |ref|}}.
"""
import json
import sys
from pathlib import Path

import onnx
import onnxruntime as ort
import torch
from safetensors.torch import load_file


def main():
    root = Path(sys.argv[1])
    torch.set_num_threads(2)
    out = {}
    for case in sys.argv[2:]:
        d = root / case
        io = load_file(str(d / "io.safetensors"))
        x, ref = io["x"], io["eval_out"]
        ts = torch.jit.load(str(d / "model.pt"))
        ts.eval()
        with torch.no_grad():
            got = ts(x)
        r = {"torchscript": (got - ref).abs().max().item(), "scale": ref.abs().max().item(), "onnx": None}
        if (d / "model.onnx").exists():
            model = onnx.load(str(d / "model.onnx"))
            onnx.checker.check_model(model, full_check=True)
            s = ort.InferenceSession(str(d / "model.onnx"), providers=["CPUExecutionProvider"])
            y = s.run(None, {s.get_inputs()[0].name: x.numpy()})[0]
            r["onnx"] = float(abs(y - ref.numpy()).max())
        out[case] = r
    print(json.dumps(out))


if __name__ == "__main__":
    main()
