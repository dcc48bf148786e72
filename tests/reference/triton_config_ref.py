"""Triton's own message definition (PyPI tritonclient) against glassbox's config.pbtxt files.

    python tests/reference/triton_config_ref.py parse CONFIG.pbtxt...
        parses each file with protobuf's text_format.Parse into tritonclient's
        tritonclient.grpc.model_config_pb2.ModelConfig (strict: an unknown field or enum value
        fails) and prints {"CONFIG.pbtxt": {"json": MessageToJson(...)} | {"error": "..."}}.
    python tests/reference/triton_config_ref.py write OUT_DIR
        builds configs with tritonclient's message, writes OUT_DIR/<name>/config.pbtxt with
        text_format.MessageToString and prints {"<name>": MessageToJson(...)}.
    python tests/reference/triton_config_ref.py descriptor FILE
        FILE is glassbox's model_config.proto as a serialized FileDescriptorProto; prints
        {"compared": N, "mismatches": [...]}: every message, field and enum value of glassbox's
        definition must exist in Triton's with the same number, type, cardinality and oneof.

JSON is json_format.MessageToJson(..., preserving_proto_field_name=True), as the test converts
its own read-back with google::protobuf::util::MessageToJsonString. Used by
glassbox/export/repository_test.cpp (TritonConfigReference.*).
"""
import json
import os
import sys

from google.protobuf import descriptor_pb2, json_format, text_format
from tritonclient.grpc import model_config_pb2 as mc


def to_json(message):
    return json_format.MessageToJson(message, preserving_proto_field_name=True)


def parse(paths):
    out = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            out[path] = {"json": to_json(text_format.Parse(text, mc.ModelConfig()))}
        except text_format.ParseError as e:
            out[path] = {"error": str(e)}
    return out


def python_configs():
    """Configs built with Triton's message in Python: fields set the way Python users set them."""
    a = mc.ModelConfig(name="py_resnet", platform="pytorch_libtorch", max_batch_size=16, default_model_filename="model.pt")
    a.version_policy.specific.versions.extend([1, 3])
    i = a.input.add(name="INPUT__0", data_type=mc.TYPE_FP32, format=mc.ModelInput.FORMAT_NCHW, dims=[3, 224, 224])
    i.reshape.shape.extend([3, 224, 224])
    a.input.add(name="INPUT__1", data_type=mc.TYPE_INT64, dims=[-1], allow_ragged_batch=True, optional=True)
    a.output.add(name="OUTPUT__0", data_type=mc.TYPE_FP32, dims=[1000], label_filename="labels.txt")
    a.output.add(name="OUTPUT__1", data_type=mc.TYPE_BF16, dims=[2, 500]).reshape.shape.extend([1000])
    a.instance_group.add(name="gpu", kind=mc.ModelInstanceGroup.KIND_GPU, count=2, gpus=[0, 1])
    a.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=1)
    b = a.dynamic_batching
    b.preferred_batch_size.extend([4, 16])
    b.max_queue_delay_microseconds = 500
    b.preserve_ordering = True
    b.priority_levels = 3
    b.default_priority_level = 2
    b.default_queue_policy.timeout_action = mc.ModelQueuePolicy.DELAY
    b.default_queue_policy.default_timeout_microseconds = 10000
    b.default_queue_policy.max_queue_size = 8
    b.priority_queue_policy[1].max_queue_size = 4
    b.priority_queue_policy[3].allow_timeout_override = True
    a.parameters["INFERENCE_MODE"].string_value = "true"
    a.parameters["glassbox.channel_order"].string_value = "RGB"
    w = a.model_warmup.add(name="random", batch_size=2, count=3)
    w.inputs["INPUT__0"].data_type = mc.TYPE_FP32
    w.inputs["INPUT__0"].dims.extend([3, 224, 224])
    w.inputs["INPUT__0"].random_data = True
    w.inputs["INPUT__1"].data_type = mc.TYPE_INT64
    w.inputs["INPUT__1"].dims.extend([5])
    w.inputs["INPUT__1"].zero_data = True
    a.response_cache.enable = True
    a.model_transaction_policy.decoupled = False

    b2 = mc.ModelConfig(name="py_nobatch", backend="pytorch", max_batch_size=0)
    b2.version_policy.all.SetInParent()
    b2.input.add(name="INPUT__0", data_type=mc.TYPE_UINT8, dims=[28, 28])
    b2.output.add(name="OUTPUT__0", data_type=mc.TYPE_STRING, dims=[1], is_shape_tensor=False)
    b2.instance_group.add(kind=mc.ModelInstanceGroup.KIND_MODEL)
    return [a, b2]


def write(out_dir):
    out = {}
    for config in python_configs():
        model_dir = os.path.join(out_dir, config.name)
        os.makedirs(model_dir, exist_ok=True)
        with open(os.path.join(model_dir, "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write(text_format.MessageToString(config))
        out[config.name] = to_json(config)
    return out


def strip_package(type_name, package):
    """".glassbox.triton.ModelInput" -> "ModelInput" (the packages differ; nothing else may)."""
    prefix = "." + package + "."
    return type_name[len(prefix):] if type_name.startswith(prefix) else type_name


def compare_descriptor(path):
    with open(path, "rb") as f:
        ours = descriptor_pb2.FileDescriptorProto.FromString(f.read())
    theirs = descriptor_pb2.FileDescriptorProto()
    mc.DESCRIPTOR.CopyToProto(theirs)
    mismatches = []
    compared = 0

    def enum_check(where, ours_enum, theirs_enums):
        nonlocal compared
        t = {e.name: e for e in theirs_enums}.get(ours_enum.name)
        if t is None:
            mismatches.append(f"{where}{ours_enum.name}: no such enum in Triton")
            return
        values = {v.name: v.number for v in t.value}
        for v in ours_enum.value:
            compared += 1
            if values.get(v.name) != v.number:
                mismatches.append(f"{where}{ours_enum.name}.{v.name} = {v.number}, Triton: {values.get(v.name)}")

    def message_check(where, ours_msg, theirs_msgs):
        nonlocal compared
        t = {m.name: m for m in theirs_msgs}.get(ours_msg.name)
        name = where + ours_msg.name
        if t is None:
            mismatches.append(f"{name}: no such message in Triton")
            return
        fields = {f.name: f for f in t.field}
        for f in ours_msg.field:
            compared += 1
            tf = fields.get(f.name)
            if tf is None:
                mismatches.append(f"{name}.{f.name}: no such field in Triton")
                continue
            ours_oneof = ours_msg.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else ""
            theirs_oneof = t.oneof_decl[tf.oneof_index].name if tf.HasField("oneof_index") else ""
            got = (f.number, f.type, f.label, strip_package(f.type_name, ours.package), ours_oneof)
            want = (tf.number, tf.type, tf.label, strip_package(tf.type_name, theirs.package), theirs_oneof)
            if got != want:
                mismatches.append(f"{name}.{f.name}: (number, type, label, type_name, oneof) {got}, Triton: {want}")
        for e in ours_msg.enum_type:
            enum_check(name + ".", e, t.enum_type)
        for n in ours_msg.nested_type:
            message_check(name + ".", n, t.nested_type)

    for e in ours.enum_type:
        enum_check("", e, theirs.enum_type)
    for m in ours.message_type:
        message_check("", m, theirs.message_type)
    if ours.syntax != theirs.syntax:
        mismatches.append(f"syntax {ours.syntax}, Triton: {theirs.syntax}")
    return {"compared": compared, "mismatches": mismatches}


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "parse":
        result = parse(args)
    elif mode == "write":
        result = write(args[0])
    elif mode == "descriptor":
        result = compare_descriptor(args[0])
    else:
        raise SystemExit(f"unknown mode {mode}")
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
