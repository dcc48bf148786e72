#!/usr/bin/env python3
"""glassbox serve at startup, against repositories with broken models (Triton's --exit-on-error):

  - one model whose config.pbtxt does not parse, beside a good one: exit 2 before serving, the
    reason (with the closest field name) on its own line; with --exit-on-error=false the good model
    serves and the broken one is UNAVAILABLE with the reason in the repository index;
  - Triton fields glassbox does not implement: the model serves, the index names what was skipped;
  - every model broken (a misspelt field, a wrong type, a model that contradicts its config):
    exit 2 with one line per model, with or without --exit-on-error;
  - an empty repository, a missing one: exit 2 with one line naming the fix; in explicit model
    control mode an empty repository serves (models are loaded later).

    startup_test.py --glassbox build/glassbox/cli/glassbox [--workdir DIR]
Exits 0 when every check holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_common as sc  # noqa: E402

MISSPELT = ("max_batch_size: 8", "max_batch_sise: 8")
WRONG_TYPE = ("max_batch_size: 8", "max_batch_size: 8\noptimization: 5")
CONTRADICTS = ("dims: [ 5 ]", "dims: [ 7 ]")  # the model returns 5 values
TRITON_ONLY = ("max_batch_size: 8", "max_batch_size: 8\noptimization { graph { level: 1 } }")


def variant(src: Path, dst: Path, edit: tuple[str, str]) -> None:
    """DST = a copy of model directory SRC whose config.pbtxt has EDIT applied (and DST's name)."""
    shutil.copytree(src, dst)
    text = (src / "config.pbtxt").read_text(encoding="utf-8")
    old, new = edit
    assert old in text, (old, text)
    text = text.replace(old, new, 1).replace(f'name: "{src.name}"', f'name: "{dst.name}"', 1)
    (dst / "config.pbtxt").write_text(text, encoding="utf-8")


def run_to_exit(glassbox: str, repo: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Runs `glassbox serve` expecting it to exit; one that serves instead is stopped (returncode -1)."""
    cmd = [glassbox, "serve", "--model-repository", str(repo), "--address", "127.0.0.1", "--http-port", "0",
           "--metrics-port", "0", *(() if "--grpc-port" in args else ("--grpc-port", "0")), *args]
    t = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        while proc.poll() is None:
            out.seek(0)
            if "serving:" in out.read() or time.monotonic() - t > timeout:
                proc.kill()
                proc.wait()
                break
            time.sleep(0.05)
        code = proc.returncode if proc.returncode >= 0 else -1
        out.seek(0)
        err.seek(0)
        r = subprocess.CompletedProcess(cmd, code, out.read(), err.read())
    print(f"$ {' '.join(cmd)}\n  exit {r.returncode} in {time.monotonic() - t:.1f} s")
    print("  stdout: " + r.stdout.strip().replace("\n", "\n          "))
    print("  stderr: " + r.stderr.strip().replace("\n", "\n          "))
    return r


def failure_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("failed to load: ")]


def index_by_name(port: int) -> dict[str, dict]:
    status, _, body = sc.post_json(port, "/v2/repository/index", {})
    assert status == 200, (status, body)
    return {e["name"]: e for e in body}


def one_broken(args, c: sc.Checks, work: Path, good: Path) -> None:
    repo = work / "one_broken"
    shutil.copytree(good.parent, repo)
    variant(good, repo / "misspelt", MISSPELT)

    r = run_to_exit(args.glassbox, repo)
    c.check(r.returncode == 2, f"one broken model: exit {r.returncode} (expected 2)")
    c.check("serving:" not in r.stdout, "one broken model: the server served before exiting")
    lines = failure_lines(r.stderr)
    c.check(len(lines) == 1 and "model 'misspelt'" in lines[0] and 'did you mean "max_batch_size"' in lines[0]
            and 'no field named "max_batch_sise"' in lines[0], f"one broken model: failure lines {lines}")
    last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    c.check(last.startswith("error: 1 of the 2 models to load at startup failed") and "--exit-on-error=false" in last,
            f"one broken model: last line {last!r}")
    c.check("model misspelt: UNAVAILABLE (" in r.stdout, "one broken model: the startup log lacks the model's state")

    with sc.ServeProcess(args.glassbox, repo, work, ["--exit-on-error=false"], name="serve-exit-on-error-false") as srv:
        body, x = sc.fp32_request(batch=2)
        status, _, out = sc.post_json(srv.port, "/v2/models/fp32/infer", body)
        c.check(status == 200, f"--exit-on-error=false: fp32 inference {status} {out}")
        if status == 200:
            got = np.array(out["outputs"][0]["data"], dtype=np.float32).reshape(out["outputs"][0]["shape"])
            ok, detail = sc.close_enough(got, sc.reference("fp32", [x], repo)[0])
            c.check(ok, f"--exit-on-error=false: fp32 output differs from torch: {detail}")
        index = index_by_name(srv.port)
        print("index:", json.dumps(index))
        m = index.get("misspelt", {})
        c.check(m.get("state") == "UNAVAILABLE" and 'did you mean "max_batch_size"' in m.get("reason", ""),
                f"--exit-on-error=false: misspelt index entry {m}")
        c.check(index.get("fp32", {}).get("state") == "READY", f"--exit-on-error=false: fp32 entry {index.get('fp32')}")
        status, _, _ = sc.request(srv.port, "GET", "/v2/health/ready")
        c.check(status == 400, f"--exit-on-error=false: ready is {status} with a model UNAVAILABLE (strict readiness)")
        status, _, out = sc.post_json(srv.port, "/v2/models/misspelt/infer", body)
        c.check(status == 400 and "max_batch_size" in json.dumps(out), f"infer on the broken model: {status} {out}")
        c.check("warning: 1 of the 2 models to load at startup failed to load" in srv.output(),
                "--exit-on-error=false: no warning line in the log")
    c.check(srv.returncode == 0, f"--exit-on-error=false: server exited {srv.returncode} on SIGTERM")


def skipped_fields(args, c: sc.Checks, work: Path, good: Path) -> None:
    repo = work / "triton_only"
    shutil.copytree(good.parent, repo)
    variant(good, repo / "tuned", TRITON_ONLY)
    with sc.ServeProcess(args.glassbox, repo, work, name="serve-triton-only") as srv:
        t = index_by_name(srv.port).get("tuned", {})
        c.check(t.get("state") == "READY" and "optimization (line 4)" in t.get("reason", ""),
                f"Triton field glassbox skips: index entry {t}")
        status, _, _ = sc.request(srv.port, "POST", "/v2/models/tuned/infer", json.dumps(sc.fp32_request()[0]))
        c.check(status == 200, f"Triton field glassbox skips: inference {status}")
        c.check("skipped Triton fields glassbox does not implement: optimization" in srv.output(),
                "Triton field glassbox skips: not named in the startup log")
    c.check(srv.returncode == 0, f"Triton field glassbox skips: server exited {srv.returncode} on SIGTERM")


def all_broken(args, c: sc.Checks, work: Path, good: Path) -> None:
    repo = work / "all_broken"
    repo.mkdir()
    variant(good, repo / "misspelt", MISSPELT)
    variant(good, repo / "wrong_type", WRONG_TYPE)
    variant(good, repo / "contradicts", CONTRADICTS)
    for extra in ([], ["--exit-on-error=false"]):
        what = "all broken" + (" " + extra[0] if extra else "")
        r = run_to_exit(args.glassbox, repo, *extra)
        c.check(r.returncode == 2, f"{what}: exit {r.returncode} (expected 2)")
        c.check("serving:" not in r.stdout, f"{what}: the server served")
        lines = failure_lines(r.stderr)
        by_model = {name: [line for line in lines if f"model '{name}'" in line]
                    for name in ("misspelt", "wrong_type", "contradicts")}
        c.check(len(lines) == 3 and all(len(v) == 1 for v in by_model.values()),
                f"{what}: expected one line per model, got {lines}")
        c.check(any('did you mean "max_batch_size"' in line for line in by_model["misspelt"]),
                f"{what}: misspelt's reason {by_model['misspelt']}")
        wrong = 'Triton\'s field "optimization" of ModelConfig is a message, found "5"'
        c.check(any(wrong in line for line in by_model["wrong_type"]),
                f"{what}: wrong_type's reason {by_model['wrong_type']}")
        c.check(any("config.pbtxt says [7]" in line for line in by_model["contradicts"]),
                f"{what}: contradicts' reason {by_model['contradicts']}")
        c.check("error: no model could be loaded: 3 of the 3 models" in r.stderr, f"{what}: no summary line")


def no_models(args, c: sc.Checks, work: Path) -> None:
    empty = work / "empty_repo"
    empty.mkdir()
    r = run_to_exit(args.glassbox, empty)
    c.check(r.returncode == 2, f"empty repository: exit {r.returncode} (expected 2)")
    err = [line for line in r.stderr.splitlines() if line.strip()]
    c.check(len(err) == 1 and "holds no model directories" in err[0] and "hint:" in err[0],
            f"empty repository: stderr {err}")
    missing = work / "no_such_repo"
    r = run_to_exit(args.glassbox, missing)
    err = [line for line in r.stderr.splitlines() if line.strip()]
    c.check(r.returncode == 2, f"missing repository: exit {r.returncode} (expected 2)")
    c.check(len(err) == 1 and f"model repository '{missing}' does not exist" in err[0] and "hint:" in err[0],
            f"missing repository: stderr {err}")
    # Explicit model control: an empty repository is a valid start (models are loaded later).
    with sc.ServeProcess(args.glassbox, empty, work, ["--model-control-mode", "explicit"], name="serve-empty") as srv:
        c.check(sc.request(srv.port, "GET", "/v2/health/live")[0] == 200, "explicit mode, empty repository: not live")
    c.check(srv.returncode == 0, f"explicit mode, empty repository: server exited {srv.returncode} on SIGTERM")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--workdir")
    args = ap.parse_args(argv)
    work = sc.workdir_arg(args.workdir, "gb-serve-startup-")
    for old in ("good", "one_broken", "triton_only", "all_broken", "empty_repo"):
        shutil.rmtree(work / old, ignore_errors=True)
    c = sc.Checks("startup_test")
    good = sc.build_repository(work / "good", models=["fp32"]) / "fp32"
    for part in (one_broken, skipped_fields, all_broken):
        try:
            part(args, c, work, good)
        except Exception as e:  # noqa: BLE001 - an exception is a failed check
            import traceback

            traceback.print_exc()
            c.check(False, f"{part.__name__}: {type(e).__name__}: {e}")
    try:
        no_models(args, c, work)
    except Exception as e:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        c.check(False, f"no_models: {type(e).__name__}: {e}")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
