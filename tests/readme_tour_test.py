#!/usr/bin/env python3
"""Every command of the README's tour, run as written, in a fresh working directory.

    readme_tour_test.py --glassbox build/glassbox/cli/glassbox --source .

The commands are read from README.md's "A short tour" section (the `glassbox ...` spans), after
the main job (`make run` is `glassbox quickstart`, whose run directory the tour uses), so the test
follows the README when it changes. Only what would make CI slow is adapted, and the same way
for every command: training runs are shortened with extra `--set` values (data.limit_train, one
epoch), `--format a|b|c` is run once per format, benchmarks get their quick flags, `serve` is
started, asked for readiness and stopped with SIGTERM, and the inputs a command names but the
tour does not make (new.npy, model.pt) are made first (model.pt is the tour's own TorchScript
export). Each command must exit 0; its output's first line is printed.
Exits 0 when every command passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SHORT_TRAIN = ["--set", "data.limit_train=2000", "--set", "data.val_size=500", "--set", "trainer.max_epochs=1",
               "--set", "trainer.enable_progress_bar=false"]


def tour_commands(readme: Path) -> list[str]:
    text = readme.read_text(encoding="utf-8")
    start = text.index("## A short tour")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    cmds = []
    for span in re.findall(r"`([^`]+)`", section):
        words = span.split()
        if words and (words[0] == "glassbox" or words[0].endswith("/glassbox")):
            cmds.append(span)
    return cmds


def adapt(cmd: str) -> list[list[str]]:
    """The command as argument lists (several for `--format a|b`), shortened where it trains."""
    words = shlex.split(cmd)[1:]
    variants = [words]
    for i, w in enumerate(words):
        if "|" in w and i > 0 and words[i - 1] == "--format":
            variants = [words[:i] + [f] + words[i + 1:] for f in w.split("|")]
    out = []
    for v in variants:
        sub = v[0] if v else ""
        if sub == "quickstart":
            v = v + ["--set", "trainer.max_epochs=1", "--set", "data.limit_train=10000"]
        elif sub == "train" and "--resume" not in v:
            v = v + SHORT_TRAIN
        elif sub == "data" and v[1:2] == ["write-images"]:
            v = v + ["--limit", "300"]
        elif sub == "doctor":
            v = v + ["--steps", "40", "--seconds", "15"]
        elif sub == "bench" and v[1:2] == ["train"]:
            v = v + ["--skip-python", "--steps", "40", "--repeats", "1", "--probe-pairs", "1", "--threads", "1"]
        elif sub == "bench" and v[1:2] == ["ddp"]:
            v = v + ["--skip-python", "--steps", "2", "--warmup", "1", "--repeats", "1", "--input", "3x32x32",
                     "--samples", "128"]
        elif sub == "bench" and v[1:2] == ["serve"]:
            v = v + ["--models", "mlp", "--concurrency", "1", "--seconds", "1", "--warmup", "0.2", "--skip-python",
                     "--threads", "1"]
        elif sub in ("eval", "explain") and "--model" in v:
            # The tour's model.pt is a TorchScript file; here, the tour's own export of the CNN,
            # explained at its default layer (layer4 names a ResNet's block).
            v = [w for w in v]
            if "--layer" in v:
                k = v.index("--layer")
                del v[k:k + 2]
        out.append(v)
    return out


def make_inputs(work: Path, source: Path) -> None:
    """new.npy: a few raw Fashion-MNIST test images ([N, 1, 28, 28] uint8), for `predict`."""
    code = (
        "import gzip, numpy as np\n"
        "p = '/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte'\n"
        "import os\n"
        "raw = open(p, 'rb').read() if os.path.exists(p) else gzip.open(p + '.gz').read()\n"
        "x = np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 1, 28, 28)[:16].copy()\n"
        f"np.save({str(work / 'new.npy')!r}, x)\n"
    )
    subprocess.run([str(source / ".venv" / "bin" / "python"), "-c", code], check=True)


def serve_once(argv: list[str], cwd: Path) -> tuple[int, str]:
    port = 18000 + os.getpid() % 1000
    argv = argv + ["--http-port", str(port), "--metrics-port", str(port + 1), "--grpc-port", str(port + 2)]
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok = False
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2) as r:
                ok = r.status == 200
                break
        except OSError:
            time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    return (0 if ok and p.returncode == 0 else 1), out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--source", required=True, help="the repository (README.md, configs/, lab/)")
    args = ap.parse_args(argv)
    source = Path(args.source).resolve()
    binary = str(Path(args.glassbox).resolve())
    commands = tour_commands(source / "README.md")
    if len(commands) < 10:
        print(f"only {len(commands)} tour commands found in README.md")
        return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix="gb-tour-") as tmp:
        work = Path(tmp)
        for d in ("configs", "lab"):
            (work / d).symlink_to(source / d)
        make_inputs(work, source)
        env = dict(os.environ, GLASSBOX_LAB_DIR=str(source / "lab"))
        for cmd in ["glassbox quickstart"] + commands:
            for v in adapt(cmd):
                if v[:1] in (["eval"], ["explain"]) and "--model" in v:
                    v[v.index("--model") + 1] = "runs/cnn/export/model.pt"
                line = "glassbox " + " ".join(v)
                t0 = time.time()
                if v[:1] == ["serve"]:
                    rc, out = serve_once([binary] + v, work)
                else:
                    r = subprocess.run([binary] + v, cwd=work, env=env, capture_output=True, text=True)
                    rc, out = r.returncode, r.stdout + r.stderr
                first = next((ln for ln in out.splitlines() if ln.strip()), "")
                print(f"[{'ok' if rc == 0 else 'FAIL'}] {line}  ({time.time() - t0:.0f} s) {first[:100]}", flush=True)
                if rc != 0:
                    failures.append(f"{line}: exit {rc}\n{out[-2000:]}")
    for f in failures:
        print("\n" + f)
    print(f"readme tour: {len(failures)} of the commands failed" if failures else "readme tour: every command passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
