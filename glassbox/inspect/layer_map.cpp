#include "glassbox/inspect/layer_map.h"

#include <algorithm>
#include <map>
#include <set>

#include <torch/torch.h>

namespace glassbox::inspect {

namespace {

// The ATen ops each parameterless LibTorch module runs at the top level of its forward.
const std::map<std::string, std::set<std::string>>& kind_ops() {
  static const std::map<std::string, std::set<std::string>> table = {
      {"ReLU", {"relu", "relu_", "threshold"}},
      {"ReLU6", {"hardtanh", "hardtanh_", "relu6"}},
      {"LeakyReLU", {"leaky_relu", "leaky_relu_"}},
      {"PReLU", {"prelu", "_prelu_kernel"}},
      {"ELU", {"elu", "elu_"}},
      {"SELU", {"selu", "selu_"}},
      {"CELU", {"celu", "celu_"}},
      {"GELU", {"gelu", "gelu_"}},
      {"SiLU", {"silu", "silu_"}},
      {"Mish", {"mish", "mish_"}},
      {"Sigmoid", {"sigmoid", "sigmoid_"}},
      {"Tanh", {"tanh", "tanh_"}},
      {"Hardtanh", {"hardtanh", "hardtanh_"}},
      {"Hardswish", {"hardswish", "hardswish_"}},
      {"Softplus", {"softplus"}},
      {"Softmax", {"softmax", "_softmax"}},
      {"LogSoftmax", {"log_softmax", "_log_softmax"}},
      {"Softmin", {"softmin", "softmax", "_softmax", "neg"}},
      {"MaxPool1d", {"max_pool1d", "max_pool1d_with_indices"}},
      {"MaxPool2d", {"max_pool2d", "max_pool2d_with_indices"}},
      {"MaxPool3d", {"max_pool3d", "max_pool3d_with_indices"}},
      {"AvgPool1d", {"avg_pool1d"}},
      {"AvgPool2d", {"avg_pool2d"}},
      {"AvgPool3d", {"avg_pool3d"}},
      {"AdaptiveAvgPool1d", {"adaptive_avg_pool1d"}},
      {"AdaptiveAvgPool2d", {"adaptive_avg_pool2d", "_adaptive_avg_pool2d", "mean"}},
      {"AdaptiveMaxPool2d", {"adaptive_max_pool2d"}},
      {"Dropout", {"dropout", "dropout_", "native_dropout"}},
      {"Dropout2d", {"feature_dropout", "feature_dropout_", "dropout"}},
      {"AlphaDropout", {"alpha_dropout", "alpha_dropout_"}},
      {"Flatten", {"flatten"}},
      {"Unflatten", {"unflatten", "view"}},
      {"Upsample", {"upsample_nearest2d", "upsample_bilinear2d", "upsample_nearest1d", "upsample_linear1d"}},
      {"PixelShuffle", {"pixel_shuffle"}},
      {"ZeroPad2d", {"constant_pad_nd", "pad"}},
      {"ConstantPad2d", {"constant_pad_nd", "pad"}},
      {"ReflectionPad2d", {"reflection_pad2d", "pad"}},
      {"ReplicationPad2d", {"replication_pad2d", "pad"}},
      {"Identity", {}},
  };
  return table;
}

}  // namespace

std::string LayerMap::short_type(const std::string& demangled) {
  std::string t = demangled;
  const auto colon = t.rfind("::");
  if (colon != std::string::npos) t = t.substr(colon + 2);
  if (t.size() > 4 && t.compare(t.size() - 4, 4, "Impl") == 0) t.resize(t.size() - 4);
  return t;
}

bool LayerMap::kind_runs_op(const std::string& type, const std::string& op) {
  const auto& table = kind_ops();
  auto it = table.find(type);
  if (it == table.end()) return false;
  std::string base = op.rfind("aten::", 0) == 0 ? op.substr(6) : op;
  return it->second.count(base) > 0;
}

LayerMap::LayerMap(torch::nn::Module& root) {
  const auto& table = kind_ops();
  for (const auto& item : root.named_modules("", /*include_self=*/true)) {
    torch::nn::Module& m = *item.value();
    const auto own_params = m.named_parameters(/*recurse=*/false);
    const auto own_buffers = m.named_buffers(/*recurse=*/false);
    const bool leaf = m.children().empty();
    const bool has_tensors = !own_params.is_empty() || !own_buffers.is_empty();
    if (!leaf && !has_tensors) continue;  // a pure container (Sequential, ModuleList, a block)
    Unit u;
    u.path = item.key();
    u.type = short_type(m.name());
    u.has_tensors = has_tensors;
    u.known_kind = !has_tensors && table.count(u.type) > 0;
    const int index = static_cast<int>(units_.size());
    units_.push_back(u);
    for (const auto& p : own_params) {
      owner_[p.value().unsafeGetTensorImpl()] = index;
      parameters_.push_back({u.path.empty() ? p.key() : u.path + "." + p.key(), p.value(), index});
    }
    for (const auto& b : own_buffers) owner_[b.value().unsafeGetTensorImpl()] = index;
  }
}

int LayerMap::owner(const c10::TensorImpl* impl) const {
  auto it = owner_.find(impl);
  return it == owner_.end() ? -1 : it->second;
}

}  // namespace glassbox::inspect
