"""Reads a glassbox TensorBoard log directory with TensorBoard's own code and prints JSON.

    python tests/reference/tensorboard_read.py LOGDIR

Used by glassbox/inspect/tensorboard_test.cpp (TensorBoardReference.*). Three readers:
  - tensorboard.backend.event_processing.event_accumulator.EventAccumulator (size_guidance 0:
    keep everything): scalars, histograms, images (decoded with Pillow), tensors (text), and
    the hparams plugin's metadata parsed with tensorboard.plugins.hparams.plugin_data_pb2;
  - the plugin_event_accumulator the TensorBoard server uses (after its data_compat migration):
    which plugin shows each tag, and histograms as the server serves them;
  - the hparams plugin's backend (get_experiment / list_session_groups handlers), as the
    dashboard queries it.
"""
import glob
import io
import json
import os
import sys

import numpy as np
from google.protobuf import json_format
from PIL import Image
from tensorboard import context as tb_context
from tensorboard.backend.event_processing import data_provider, event_accumulator, plugin_event_accumulator
from tensorboard.backend.event_processing import plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from tensorboard.plugins.hparams import api_pb2, backend_context, get_experiment, list_session_groups, plugin_data_pb2
from tensorboard.util import tensor_util


def to_dict(message):
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def read_accumulator(logdir):
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={k: 0 for k in event_accumulator.DEFAULT_SIZE_GUIDANCE})
    acc.Reload()
    tags = acc.Tags()
    out = {"file_version": acc.file_version, "scalars": {}, "histograms": {}, "images": {}, "texts": {}, "hparams": {}}
    for tag in tags["scalars"]:
        out["scalars"][tag] = [{"step": e.step, "wall_time": e.wall_time, "value": e.value} for e in acc.Scalars(tag)]
    for tag in tags["histograms"]:
        out["histograms"][tag] = [
            {
                "step": e.step,
                "min": e.histogram_value.min,
                "max": e.histogram_value.max,
                "num": e.histogram_value.num,
                "sum": e.histogram_value.sum,
                "sum_squares": e.histogram_value.sum_squares,
                "bucket_limit": list(e.histogram_value.bucket_limit),
                "bucket": list(e.histogram_value.bucket),
            }
            for e in acc.Histograms(tag)
        ]
    for tag in tags["images"]:
        rows = []
        for e in acc.Images(tag):
            img = Image.open(io.BytesIO(e.encoded_image_string))
            pixels = np.asarray(img)
            rows.append({"step": e.step, "width": e.width, "height": e.height, "mode": img.mode, "format": img.format,
                         "shape": list(pixels.shape), "pixels": pixels.reshape(-1).tolist()})
        out["images"][tag] = rows
    for tag in tags["tensors"]:
        meta = acc.SummaryMetadata(tag)
        if meta.plugin_data.plugin_name == "text":
            out["texts"][tag] = [
                {"step": e.step, "text": tensor_util.make_ndarray(e.tensor_proto).item().decode("utf-8")}
                for e in acc.Tensors(tag)
            ]
    try:
        hparams = acc.PluginTagToContent("hparams")
    except KeyError:  # no hparams in this directory
        hparams = {}
    for tag, content in hparams.items():
        out["hparams"][tag] = to_dict(plugin_data_pb2.HParamsPluginData.FromString(content))
    return out


def read_served(logdir):
    acc = plugin_event_accumulator.EventAccumulator(logdir, size_guidance={k: 0 for k in plugin_event_accumulator.DEFAULT_SIZE_GUIDANCE})
    acc.Reload()
    plugin_tags = {name: sorted(acc.PluginTagToContent(name)) for name in acc.ActivePlugins()}
    histograms = {}
    for tag in plugin_tags.get("histograms", []):
        histograms[tag] = [{"step": e.step, "buckets": tensor_util.make_ndarray(e.tensor_proto).tolist()} for e in acc.Tensors(tag)]
    return {"plugin_tags": plugin_tags, "served_histograms": histograms}


def read_hparams_backend(logdir):
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    tbctx = base_plugin.TBContext(logdir=logdir, multiplexer=mux, data_provider=data_provider.MultiplexerDataProvider(mux, logdir),
                                  plugin_name_to_instance={})
    backend = backend_context.Context(tbctx)
    ctx = tb_context.RequestContext()
    experiment = get_experiment.Handler(ctx, backend, "", api_pb2.GetExperimentRequest()).run()
    request = api_pb2.ListSessionGroupsRequest(start_index=0, slice_size=100, allowed_statuses=[
        api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS, api_pb2.STATUS_FAILURE, api_pb2.STATUS_RUNNING])  # as the dashboard asks
    groups = list_session_groups.Handler(ctx, backend, "", request).run()
    sessions = []
    for group in groups.session_groups:
        for session in group.sessions:
            sessions.append({
                "name": session.name,
                "status": api_pb2.Status.Name(session.status),
                "hparams": {k: json_format.MessageToDict(v) for k, v in group.hparams.items()},
                "metrics": {m.name.tag: m.value for m in session.metric_values},
            })
    return {"metric_tags": [m.name.tag for m in experiment.metric_infos],
            "hparam_names": sorted(h.name for h in experiment.hparam_infos), "sessions": sessions}


def main():
    logdir = sys.argv[1]
    out = {"files": sorted(os.path.basename(p) for p in glob.glob(os.path.join(logdir, "*tfevents*")))}
    out.update(read_accumulator(logdir))
    out.update(read_served(logdir))
    out["hparams_backend"] = read_hparams_backend(logdir)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
