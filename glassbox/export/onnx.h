// ONNX export: a lowered model (graph.h) as an ONNX ModelProto (opset 17, IR version 8), built
// with the ONNX protobufs (Debian's libonnx-dev) — no Python, no tracing.
//
//   OnnxOptions o; o.input_shape = {1, 28, 28}; o.input_name = "input"; o.output_name = "logits";
//   std::string bytes = to_onnx(lower_model(*model->module(), "cnn"), *model->module(), o);
//   write_file_atomic("model.onnx", bytes);
//
// The graph has one input [batch, ...input_shape] float32 and one output [batch, ...]; "batch"
// is a symbolic (dynamic) dimension. Initializers carry the module's parameter names
// ("features.conv0_0.weight"), nodes the names of the layers they come from. Ops ONNX 17 lacks
// are written as their definitions (GELU via Erf or Tanh, SiLU as x*sigmoid(x), GroupNorm via
// InstanceNormalization). A layer ONNX cannot express (adaptive pooling to a size other than
// 1x1, flatten of inner dims) is an InvalidArgument naming the layer and the reason.
// Thread safety: none needed; a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "glassbox/export/graph.h"

namespace glassbox::exporter {

struct OnnxOptions {
  std::vector<std::int64_t> input_shape;   // one sample, without the batch axis
  std::vector<std::int64_t> output_shape;  // one sample's output ({num_classes}); empty: symbolic
  std::string input_name = "input";
  std::string output_name = "logits";
  std::int64_t opset = 17;
  std::string producer_version;  // glassbox's version
};

// The serialized ModelProto.
std::string to_onnx(const ExportGraph& graph, const torch::nn::Module& module, const OnnxOptions& options);

}  // namespace glassbox::exporter
