#!/usr/bin/env python3
"""Data-parallel training end to end, through the glassbox CLI.

    ddp_test.py --glassbox build/glassbox/cli/glassbox --case equivalence_sgd [--workdir DIR]

Cases (one ctest test each):
  equivalence_sgd, equivalence_adamw, equivalence_syncbn
      2 ranks x batch 16 for 60 steps against 1 process x batch 32 over the same samples: the
      final weights (and BatchNorm statistics, with trainer.sync_batchnorm) within 1e-6.
  exact_eval
      validation and test metrics of 2 ranks equal one process's exactly (a set whose size is
      not a multiple of 2 x the batch: no sample counted twice, none dropped).
  resume
      a 2-rank run stopped after an epoch and resumed with 2 ranks ends bit-identical to the
      uninterrupted run; resumed with 1 rank it goes on (world sizes recorded).
  torchrun
      workers started by PyTorch's torchrun (its environment contract and its store) train.
  faults
      kill -9 of one rank mid-epoch: the job ends within the timeout with one line naming the
      rank, no process is left, and the run resumes from its last checkpoint. Ctrl-C: every rank
      stops at the same step, last.ckpt, exit 130. A frozen rank (SIGSTOP): the others stop
      after trainer.ddp_timeout naming it.
  errors
      bad launch flags and an unreachable node 0: one-line errors, exit 2 / 1, nothing written.
  multinode
      two "nodes" in network namespaces joined by a veth pair rendezvous over TCP, train,
      checkpoint and resume (needs root and iproute2; exit 77 = skipped otherwise).
Exit status 0 when the case passes, 1 with the reason otherwise, 77 when it cannot run here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SKIP = 77


class Failure(Exception):
    pass


def check(cond: bool, message: str) -> None:
    if not cond:
        raise Failure(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_weights(ckpt: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(ckpt / "model.safetensors"))


class Env:
    def __init__(self, glassbox: Path, work: Path):
        self.glassbox = glassbox
        self.work = work
        self.data = work / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)

        def make(n: int):
            y = np.arange(n) % 3
            x = rng.standard_normal((n, 8)).astype(np.float32) + np.eye(8, dtype=np.float32)[y] * 2
            return x, y.astype(np.int64)

        for name, n in (("train", 1600), ("test", 301)):
            x, y = make(n)
            np.save(self.data / f"{name}_x.npy", x)
            np.save(self.data / f"{name}_y.npy", y)

    def settings(self, *more: str) -> list[str]:
        base = [
            'data.format="npy"', f'data.root="{self.data}"', 'data.train_x="train_x.npy"',
            'data.train_y="train_y.npy"', 'data.test_x="test_x.npy"', 'data.test_y="test_y.npy"',
            "data.val_size=192", "data.eval_batch_size=50", 'model.name="mlp"', "model.mlp.hidden=[32]",
            "model.mlp.dropout=0", 'scheduler.name="none"', "trainer.enable_progress_bar=false",
            "trainer.enable_model_summary=false", "trainer.num_threads=1", "trainer.ddp_timeout=60",
        ]
        out: list[str] = []
        for s in base + list(more):
            out += ["--set", s]
        return out

    def train(self, run: Path, *args: str, sets: tuple[str, ...] = (), timeout: float = 300,
              check_ok: bool = True, env: dict | None = None, prefix: list[str] | None = None):
        cmd = (prefix or []) + [str(self.glassbox), "train", *self.settings(*sets), "--run-dir", str(run), *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        if check_ok:
            check(p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        return p


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def max_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """The largest |a - b| / (1 + |b|) over every tensor (float32 resolves ~1e-7 relative)."""
    check(sorted(a) == sorted(b), f"different tensors: {sorted(a)} vs {sorted(b)}")
    return max(float((np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)) /
                      (1 + np.abs(b[k].astype(np.float64)))).max()) for k in a)


# --- cases -------------------------------------------------------------------------------------------

def equivalence(env: Env, optim: tuple[str, ...], norm: str = "none") -> None:
    common = ("trainer.max_steps=60", f'model.mlp.norm="{norm}"', 'checkpoint.monitor=""',
              "trainer.sync_batchnorm=true") + optim
    one, two = env.work / "one", env.work / "two"
    env.train(one, sets=common + ("data.loader.batch_size=32",))
    env.train(two, "--nproc", "2", sets=common + ("data.loader.batch_size=16",))
    s1, s2 = summary(one), summary(two)
    check(s1["global_step"] == s2["global_step"] == 60, f"steps {s1['global_step']} / {s2['global_step']}")
    check(s2["world_size"] == 2 and s2["strategy"] == "ddp" and s2["global_batch_size"] == 32, f"summary {s2}")
    d = max_diff(load_weights(one / "checkpoints" / "last.ckpt"), load_weights(two / "checkpoints" / "last.ckpt"))
    print(f"max |w(2 ranks x 16) - w(1 x 32)| / (1 + |w|) after 60 steps, buffers included: {d:.3g}")
    check(d < 1e-6, f"weights differ by {d}")


def exact_eval(env: Env) -> None:
    # 203 validation and 301 test samples, batches of 50: neither is a multiple of 2 x 50.
    common = ("data.val_size=203", "optim.lr=0", "trainer.max_epochs=2", 'model.mlp.norm="none"',
              'checkpoint.monitor="val_loss"')
    one, two = env.work / "one", env.work / "two"
    env.train(one, sets=common + ("data.loader.batch_size=32",))
    env.train(two, "--nproc", "2", sets=common + ("data.loader.batch_size=16",))

    def val_rows(run: Path) -> list[dict]:
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
        return [{k: v for k, v in r.items() if k.startswith("val_")} for r in rows if "val_loss" in r]

    v1, v2 = val_rows(one), val_rows(two)
    check(len(v1) == 2 and v1 == v2, f"validation metrics differ:\n{v1}\n{v2}")
    t1, t2 = summary(one)["test"], summary(two)["test"]
    check(t1 == t2, f"test metrics differ: {t1} vs {t2}")
    check(t2["samples"] == 301, f"test counted {t2['samples']} samples, not 301")
    print(f"validation ({len(v1[0])} metrics) and test metrics equal; test accuracy {t2['accuracy']}")


def resume(env: Env) -> None:
    common = ("trainer.max_epochs=3", 'model.mlp.norm="batchnorm"', "model.mlp.dropout=0.3",
              'checkpoint.monitor=""', "data.loader.batch_size=16", 'optim.name="adamw"', "optim.lr=0.01")
    full, part = env.work / "full", env.work / "part"
    env.train(full, "--nproc", "2", sets=common)
    env.train(part, "--nproc", "2", sets=common + ("trainer.max_epochs=1",))
    ckpt = part / "checkpoints" / "last.ckpt"
    state = json.loads((ckpt / "state.json").read_text())
    check(state.get("world_size") == 2, f"state.json world_size {state.get('world_size')}")
    p = subprocess.run([str(env.glassbox), "train", "--resume", str(ckpt), "--nproc", "2", "--set",
                        "trainer.max_epochs=3"], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"resume exited {p.returncode}: {p.stderr}")
    a, b = load_weights(full / "checkpoints" / "last.ckpt"), load_weights(ckpt)
    d = max_diff(a, b)
    check(d == 0.0, f"resumed run differs from the uninterrupted one by {d} (dropout and BatchNorm included)")
    # The report and the doctor read a data-parallel run as any other.
    for cmd in (["report", str(full)], ["doctor", str(full / "config.toml"), "--no-run"]):
        p = subprocess.run([str(env.glassbox), *cmd], capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"glassbox {' '.join(cmd)} exited {p.returncode}: {p.stderr}")
    check((full / "report.html").exists(), "no report.html")
    # Another world size: 2 ranks -> 1 process, mid-epoch position mapped by samples.
    mid = env.work / "mid"
    env.train(mid, "--nproc", "2", sets=common + ("trainer.max_steps=20",))
    ck = mid / "checkpoints" / "last.ckpt"
    p = subprocess.run([str(env.glassbox), "train", "--resume", str(ck), "--run-dir", str(env.work / "mid1"),
                        "--set", "trainer.max_steps=-1", "--set", "trainer.max_epochs=2"],
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"resume with 1 process exited {p.returncode}: {p.stderr}")
    s = summary(env.work / "mid1")
    check(s["world_size"] == 1 and s["resumed_from"]["world_size"] == 2, f"summary {s.get('resumed_from')}")
    print("resumed bit-exactly with 2 ranks; resumed a 2-rank checkpoint in 1 process")


def torchrun(env: Env) -> None:
    run = env.work / "torchrun"
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.exists():
        print("no torchrun next to this Python")
        sys.exit(SKIP)
    env.train(run, sets=("trainer.max_epochs=1", "data.loader.batch_size=16"),
              prefix=[str(torchrun), "--standalone", "--nproc-per-node", "2", "--no-python"])
    s = summary(run)
    check(s["world_size"] == 2 and s["backend"] == "gloo", f"summary {s}")
    print("torchrun's workers trained as 2 ranks")


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def rank_of(pid: int) -> int:
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(e for e in env if e.startswith(b"RANK=")).split(b"=", 1)[1])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def start_long_job(env: Env, run: Path, *more: str) -> tuple[subprocess.Popen, dict[int, int]]:
    sets = ("trainer.max_epochs=1000", "model.mlp.hidden=[256,256]", "data.loader.batch_size=16",
            "checkpoint.every_n_train_steps=20", 'checkpoint.monitor=""', "trainer.ddp_timeout=5") + more
    cmd = [str(env.glassbox), "train", *env.settings(*sets), "--run-dir", str(run), "--nproc", "2"]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (run / "checkpoints" / "last.ckpt" / "state.json").exists():
        time.sleep(0.1)
    check((run / "checkpoints" / "last.ckpt").exists(), "no checkpoint appeared")
    workers = {rank_of(c): c for c in children(job.pid)}
    check(sorted(workers) == [0, 1], f"workers {workers}")
    return job, workers


def faults(env: Env) -> None:
    # kill -9 of rank 1 mid-epoch.
    run = env.work / "killed"
    job, workers = start_long_job(env, run)
    time.sleep(0.5)
    killed_at = time.time()
    os.kill(workers[1], signal.SIGKILL)
    out, err = job.communicate(timeout=60)
    took = time.time() - killed_at
    print(f"after kill -9 of rank 1 the job ended in {took:.1f} s with {job.returncode}")
    check(job.returncode != 0, "the job exited 0")
    check(took < 5 + 10, f"the job took {took:.1f} s to stop (ddp_timeout 5 s)")
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    check(any("rank 1" in line and "SIGKILL" in line for line in lines), f"no line names rank 1 and SIGKILL:\n{err}")
    check(any(line.startswith("error: rank 0: rank 1") for line in lines), f"rank 0 does not name rank 1:\n{err}")
    check(not any(alive(p) for p in workers.values()), "a worker is still running")
    # Resume from the last checkpoint, with the same world.
    ckpt = run / "checkpoints" / "last.ckpt"
    step = json.loads((ckpt / "state.json").read_text())["global_step"]
    p = subprocess.run([str(env.glassbox), "train", "--resume", str(ckpt), "--nproc", "2", "--set",
                        f"trainer.max_steps={step + 30}"], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"resume exited {p.returncode}: {p.stderr}")
    check(summary(run)["global_step"] == step + 30, f"resumed to step {summary(run)['global_step']}")
    # Ctrl-C (SIGINT to the launcher): every rank stops after the same step, last.ckpt, exit 130.
    run = env.work / "interrupted"
    job, workers = start_long_job(env, run)
    job.send_signal(signal.SIGINT)
    out, err = job.communicate(timeout=120)
    check(job.returncode == 130, f"interrupted job exited {job.returncode}:\n{err}")
    check("resume with: glassbox train --resume" in out, f"no resume hint:\n{out}")
    state = json.loads((run / "checkpoints" / "last.ckpt" / "state.json").read_text())
    check(summary(run)["stop"] == "interrupted" and state["global_step"] == summary(run)["global_step"],
          f"last.ckpt at step {state['global_step']}, summary {summary(run).get('global_step')}")
    check(not any(alive(p) for p in workers.values()), "a worker is still running")
    # A frozen rank: the others give up after ddp_timeout and name it.
    run = env.work / "frozen"
    job, workers = start_long_job(env, run)
    frozen_at = time.time()
    os.kill(workers[1], signal.SIGSTOP)
    out, err = job.communicate(timeout=90)
    took = time.time() - frozen_at
    print(f"after SIGSTOP of rank 1 the job ended in {took:.1f} s with {job.returncode}")
    check(job.returncode != 0, "the job exited 0")
    check(any(line.startswith("error: rank 0: rank 1 is gone or frozen") for line in err.splitlines()),
          f"rank 0 does not name the frozen rank:\n{err}")
    check(not any(alive(p) for p in workers.values()), "a worker is still running")


def errors(env: Env) -> None:
    run = env.work / "bad"
    for args, code, words in (
        (["--nproc", "2", "--nnodes", "2", "--node-rank", "2", "--master-port", "29599"], 2, "--node-rank"),
        (["--nproc", "2", "--nnodes", "2"], 2, "--master-port"),
        (["--nproc", "2", "--set", 'trainer.strategy="single"'], 2, "trainer.strategy"),
        (["--nproc", "2", "--set", "trainer.ddp_timeout=0"], 2, "trainer.ddp_timeout"),
    ):
        p = env.train(run, *args, check_ok=False)
        lines = [line for line in p.stderr.splitlines() if line.startswith("error:")]
        check(p.returncode == code, f"{args}: exit {p.returncode}, wanted {code}: {p.stderr}")
        check(len(lines) == 1 and words in lines[0], f"{args}: {p.stderr}")
        check(not run.exists(), f"{args}: the run directory was created")
    # Node 1 whose node 0 never comes: one line, after the timeout.
    p = env.train(run, "--nproc", "1", "--nnodes", "2", "--node-rank", "1", "--master-port", str(free_port()),
                  sets=("trainer.ddp_timeout=3",), check_ok=False, timeout=120)
    lines = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    check(p.returncode == 1 and lines and "rendezvous store" in lines[0], f"missing node 0: {p.stderr}")
    check(not run.exists(), "the run directory was created")
    # A worker started by hand without a RANK.
    e = dict(os.environ, WORLD_SIZE="2")
    e.pop("RANK", None)
    p = env.train(run, check_ok=False, env=e)
    check(p.returncode == 2 and "RANK" in p.stderr, f"WORLD_SIZE without RANK: {p.returncode} {p.stderr}")
    print("launch errors are one line each")


def multinode(env: Env) -> None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("needs root and iproute2 (ip netns)")
        sys.exit(SKIP)
    tag = f"{os.getpid() % 100000}"
    ns = [f"gbn{tag}a", f"gbn{tag}b"]
    veth = [f"gbv{tag}a", f"gbv{tag}b"]
    addr = ["10.231.77.1", "10.231.77.2"]

    def ip(*a: str) -> None:
        subprocess.run(["ip", *a], check=True, capture_output=True)

    try:
        try:
            ip("netns", "add", ns[0])
            ip("netns", "add", ns[1])
        except subprocess.CalledProcessError as e:
            print(f"cannot make network namespaces here: {e.stderr.decode().strip()}")
            sys.exit(SKIP)
        ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for i in range(2):
            ip("link", "set", veth[i], "netns", ns[i])
            ip("-n", ns[i], "addr", "add", f"{addr[i]}/24", "dev", veth[i])
            ip("-n", ns[i], "link", "set", veth[i], "up")
            ip("-n", ns[i], "link", "set", "lo", "up")
        port = "29517"
        run = env.work / "multinode"

        def both(extra: list[str], sets: tuple[str, ...]) -> None:
            procs = []
            for node in range(2):
                cmd = ["ip", "netns", "exec", ns[node], str(env.glassbox), "train"]
                if "--resume" not in extra:
                    cmd += env.settings(*sets) + ["--run-dir", str(run)]
                else:
                    for s in sets:
                        cmd += ["--set", s]
                cmd += extra + ["--nproc", "1", "--nnodes", "2", "--node-rank", str(node), "--master-addr", addr[0],
                                "--master-port", port]
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for node, p in enumerate(procs):
                out, err = p.communicate(timeout=300)
                check(p.returncode == 0, f"node {node} exited {p.returncode}:\n{out}\n{err}")

        both([], ("trainer.max_epochs=1", "data.loader.batch_size=16", 'checkpoint.monitor=""'))
        s = summary(run)
        check(s["world_size"] == 2 and s["global_step"] > 0, f"summary {s}")
        ckpt = run / "checkpoints" / "last.ckpt"
        both(["--resume", str(ckpt)], ("trainer.max_epochs=2",))
        s = summary(run)
        check(s["epochs"] == 2 and s["resumed_from"]["epoch"] == 1, f"after resume: {s}")
        print(f"two nodes ({addr[0]}, {addr[1]}) trained {s['global_step']} steps, checkpointed and resumed")
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


CASES = {
    "equivalence_sgd": lambda e: equivalence(e, ('optim.name="sgd"', "optim.lr=0.1", "optim.momentum=0.9")),
    "equivalence_adamw": lambda e: equivalence(e, ('optim.name="adamw"', "optim.lr=0.01")),
    "equivalence_syncbn": lambda e: equivalence(e, ('optim.name="sgd"', "optim.lr=0.05", "optim.momentum=0.9"),
                                                norm="batchnorm"),
    "exact_eval": exact_eval,
    "resume": resume,
    "torchrun": torchrun,
    "faults": faults,
    "errors": errors,
    "multinode": multinode,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--glassbox", required=True, type=Path)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--workdir", type=Path)
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix=f"gb_ddp_{a.case}_"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    try:
        CASES[a.case](Env(a.glassbox.resolve(), work))
    except Failure as f:
        print(f"FAILED: {f}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
