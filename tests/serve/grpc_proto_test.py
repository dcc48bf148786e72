#!/usr/bin/env python3
"""Wire compatibility of glassbox's gRPC protocol with Triton's: compiles
glassbox/serve/grpc/proto/grpc_service.proto (and the model_config.proto it imports) with protoc
into a descriptor set, and compares every service method, message and field glassbox defines with
the descriptors tritonclient.grpc ships (service_pb2, model_config_pb2): same field numbers, wire
types, labels, oneofs, map key/value types, and message/enum types of the same name. Enum values
are compared by name and number. A field glassbox leaves out is fine (unknown fields are skipped on
the wire); a field that differs is not.

    .venv/bin/python tests/serve/grpc_proto_test.py [--protoc /usr/bin/protoc]

Exit 0 when everything matches, 1 with one line per difference, 77 when protoc or tritonclient
is missing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77
ROOT = Path(__file__).resolve().parents[2]
SERVICE = "glassbox/serve/grpc/proto/grpc_service.proto"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protoc", default=shutil.which("protoc"))
    ap.add_argument("--glassbox", help="ignored (the serve tests' common arguments)")
    ap.add_argument("--workdir", help="ignored")
    args = ap.parse_args()
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
        from google.protobuf.descriptor import FieldDescriptor
        from tritonclient.grpc import model_config_pb2, service_pb2
    except ImportError as e:
        print(f"SKIP: {e}")
        return SKIP
    if not args.protoc:
        print("SKIP: no protoc (Debian protobuf-compiler)")
        return SKIP

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        subprocess.run([args.protoc, f"-I{ROOT}", f"--descriptor_set_out={out}", "--include_imports", SERVICE],
                       check=True, cwd=ROOT)
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    ours = pool.FindFileByName(SERVICE)
    ours_config = pool.FindFileByName("glassbox/export/proto/model_config.proto")
    theirs = service_pb2.DESCRIPTOR
    theirs_config = model_config_pb2.DESCRIPTOR

    problems: list[str] = []
    counts = {"methods": 0, "messages": 0, "fields": 0, "enums": 0}

    def theirs_message(name: str):
        for f in (theirs, theirs_config):
            try:
                return f.pool.FindMessageTypeByName(f"{f.package}.{name}")
            except KeyError:
                pass
        return None

    def short(full: str, package: str) -> str:
        return full[len(package) + 1:] if full.startswith(package + ".") else full

    def type_name(fd) -> str:
        if fd.message_type is not None:
            return "message " + short(fd.message_type.full_name, fd.message_type.file.package)
        if fd.enum_type is not None:
            return "enum " + short(fd.enum_type.full_name, fd.enum_type.file.package)
        return str(fd.type)

    def compare_enum(ours_e, theirs_e, where: str) -> None:
        counts["enums"] += 1
        tv = {v.name: v.number for v in theirs_e.values}
        for v in ours_e.values:
            if v.name not in tv:
                problems.append(f"{where}: value {v.name} is not in Triton's enum")
            elif tv[v.name] != v.number:
                problems.append(f"{where}: value {v.name} = {v.number}, Triton's = {tv[v.name]}")

    compared: set[str] = set()

    def compare_message(o, t, where: str) -> None:
        if o.full_name in compared:
            return
        compared.add(o.full_name)
        counts["messages"] += 1
        tf = {f.name: f for f in t.fields}
        for f in o.fields:
            counts["fields"] += 1
            w = f"{where}.{f.name}"
            g = tf.get(f.name)
            if g is None:
                problems.append(f"{w}: no field of that name in Triton's {t.full_name}")
                continue
            if f.number != g.number:
                problems.append(f"{w}: number {f.number}, Triton's {g.number}")
            if f.type != g.type:
                problems.append(f"{w}: wire type {f.type}, Triton's {g.type}")
            if f.is_repeated != g.is_repeated:
                problems.append(f"{w}: repeated={f.is_repeated}, Triton's {g.is_repeated}")
            if type_name(f) != type_name(g):
                problems.append(f"{w}: type {type_name(f)}, Triton's {type_name(g)}")
            oo = f.containing_oneof.name if f.containing_oneof else None
            go = g.containing_oneof.name if g.containing_oneof else None
            if oo != go:
                problems.append(f"{w}: oneof {oo}, Triton's {go}")
            if f.message_type is not None and g.message_type is not None:
                compare_message(f.message_type, g.message_type, f.message_type.full_name)
            if f.enum_type is not None and g.enum_type is not None:
                compare_enum(f.enum_type, g.enum_type, f.enum_type.full_name)
        for n in o.nested_types:
            tn = t.nested_types_by_name.get(n.name)
            if tn is None:
                problems.append(f"{where}.{n.name}: no nested message of that name in Triton's {t.full_name}")
            else:
                compare_message(n, tn, n.full_name)

    # The service: every method we define exists in Triton's with the same types and streaming.
    tsvc = theirs.services_by_name.get("GRPCInferenceService")
    osvc = ours.services_by_name.get("GRPCInferenceService")
    if ours.package != theirs.package:
        problems.append(f"package {ours.package}, Triton's {theirs.package}")
    if osvc is None or tsvc is None:
        problems.append("service GRPCInferenceService missing")
    else:
        tm = {m.name: m for m in tsvc.methods}
        for m in osvc.methods:
            counts["methods"] += 1
            g = tm.get(m.name)
            if g is None:
                problems.append(f"rpc {m.name}: not in Triton's service")
                continue
            for attr in ("client_streaming", "server_streaming"):
                if getattr(m, attr) != getattr(g, attr):
                    problems.append(f"rpc {m.name}: {attr}={getattr(m, attr)}, Triton's {getattr(g, attr)}")
            for side in ("input_type", "output_type"):
                a, b = getattr(m, side), getattr(g, side)
                if a.name != b.name:
                    problems.append(f"rpc {m.name}: {side} {a.name}, Triton's {b.name}")
        required = ["ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
                    "ModelStreamInfer", "ModelConfig", "ModelStatistics", "RepositoryIndex",
                    "RepositoryModelLoad", "RepositoryModelUnload"]
        for name in required:
            if name not in {m.name for m in osvc.methods}:
                problems.append(f"rpc {name}: missing")

    # Every message of both files against Triton's message of the same name.
    for f in (ours, ours_config):
        for name, o in f.message_types_by_name.items():
            t = theirs_message(name)
            if t is None:
                problems.append(f"message {o.full_name}: Triton has no message {name}")
            else:
                compare_message(o, t, o.full_name)
        for name, o in f.enum_types_by_name.items():
            try:
                t = theirs_config.enum_types_by_name[name]
            except KeyError:
                problems.append(f"enum {o.full_name}: Triton has no enum {name}")
                continue
            compare_enum(o, t, o.full_name)

    # The fields perf_analyzer -i grpc reads of ModelConfig must be there.
    cfg = ours_config.message_types_by_name["ModelConfig"]
    for path in ("max_batch_size", "input", "output", "dynamic_batching", "model_transaction_policy.decoupled",
                 "response_cache.enable"):
        m, ok = cfg, True
        for part in path.split("."):
            fd = m.fields_by_name.get(part)
            if fd is None:
                ok = False
                break
            m = fd.message_type
        if not ok:
            problems.append(f"ModelConfig.{path}: missing (perf_analyzer reads it)")

    for p in problems:
        print(p)
    print(f"grpc proto: {counts['methods']} methods, {counts['messages']} messages, {counts['fields']} fields, "
          f"{counts['enums']} enums compared with tritonclient's descriptors; {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
