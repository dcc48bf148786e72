#include "glassbox/export/torchscript.h"

#include <iomanip>
#include <sstream>

#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::exporter {

namespace {

std::string num(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  std::string s = os.str();
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string ints(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string attr(const std::string& name) { return name.empty() ? "None" : "self." + name; }

std::string value(int id) { return id == 0 ? "x" : "x" + std::to_string(id); }

std::string expression(const Node& n) {
  const std::string x = value(n.inputs.at(0));
  switch (n.kind) {
    case OpKind::kCall: return "getattr(self, \"" + n.child + "\").forward(" + x + ")";
    case OpKind::kLinear: return "torch.linear(" + x + ", " + attr(n.weight) + ", " + attr(n.bias) + ")";
    case OpKind::kConv2d:
      return "torch.conv2d(" + x + ", " + attr(n.weight) + ", " + attr(n.bias) + ", " + ints(n.stride) + ", " +
             ints(n.padding) + ", " + ints(n.dilation) + ", " + std::to_string(n.groups) + ")";
    case OpKind::kBatchNorm:
      return "torch.batch_norm(" + x + ", " + attr(n.weight) + ", " + attr(n.bias) + ", " + attr(n.running_mean) +
             ", " + attr(n.running_var) + ", False, 0.0, " + num(n.eps) + ", True)";
    case OpKind::kLayerNorm:
      return "torch.layer_norm(" + x + ", " + ints(n.shape) + ", " + attr(n.weight) + ", " + attr(n.bias) + ", " +
             num(n.eps) + ", True)";
    case OpKind::kGroupNorm:
      return "torch.group_norm(" + x + ", " + std::to_string(n.groups) + ", " + attr(n.weight) + ", " + attr(n.bias) +
             ", " + num(n.eps) + ", True)";
    case OpKind::kRelu: return "torch.relu(" + x + ")";
    case OpKind::kGelu: return "torch.gelu(" + x + ", approximate=\"" + n.approximate + "\")";
    case OpKind::kTanh: return "torch.tanh(" + x + ")";
    case OpKind::kSigmoid: return "torch.sigmoid(" + x + ")";
    case OpKind::kSilu: return "torch.silu(" + x + ")";
    case OpKind::kLeakyRelu: return "torch.leaky_relu(" + x + ", " + num(n.alpha) + ")";
    case OpKind::kElu: return "torch.elu(" + x + ", " + num(n.alpha) + ", 1.0, 1.0)";
    case OpKind::kMaxPool2d:
      return "torch.max_pool2d(" + x + ", " + ints(n.kernel) + ", " + ints(n.stride) + ", " + ints(n.padding) + ", " +
             ints(n.dilation) + ", " + (n.ceil_mode ? "True" : "False") + ")";
    case OpKind::kAvgPool2d:
      return "torch.avg_pool2d(" + x + ", " + ints(n.kernel) + ", " + ints(n.stride) + ", " + ints(n.padding) + ", " +
             (n.ceil_mode ? "True" : "False") + ", " + (n.count_include_pad ? "True" : "False") + ", None)";
    case OpKind::kAdaptiveAvgPool2d: return "torch.adaptive_avg_pool2d(" + x + ", " + ints(n.shape) + ")";
    case OpKind::kFlatten:
      return "torch.flatten(" + x + ", " + std::to_string(n.dim) + ", " + std::to_string(n.end_dim) + ")";
    case OpKind::kAdd: return x + " + " + value(n.inputs.at(1));
    case OpKind::kSoftmax: return "torch.softmax(" + x + ", " + std::to_string(n.dim) + ")";
    case OpKind::kLogSoftmax: return "torch.log_softmax(" + x + ", " + std::to_string(n.dim) + ")";
    case OpKind::kHardswish: return "torch.hardswish(" + x + ")";
    case OpKind::kHardsigmoid: return "torch.hardsigmoid(" + x + ")";
    case OpKind::kMul: return x + " * " + value(n.inputs.at(1));
    case OpKind::kAddParameter: return x + " + " + attr(n.weight);
    case OpKind::kTokens:
      return "torch.cat([" + attr(n.weight) + ".expand([" + x + ".size(0), -1, -1]), torch.flatten(" + x +
             ", 2).permute([0, 2, 1])], 1)";
    case OpKind::kSelectFirst: return "torch.select(" + x + ", 1, 0)";
    case OpKind::kSelfAttention: break;  // statements()
  }
  GB_THROW(Internal, "unknown op", "");
}

// The lines computing one node.
std::string statements(const Node& n) {
  const std::string y = value(n.output);
  if (n.kind != OpKind::kSelfAttention) return "    " + y + " = " + expression(n) + "\n";
  // nn.MultiheadAttention(batch_first=True)(x, x, x) without its output projection.
  const std::string x = value(n.inputs.at(0));
  const std::string h = std::to_string(n.groups);
  std::string s;
  s += "    " + y + "_qkv = torch.linear(" + x + ", " + attr(n.weight) + ", " + attr(n.bias) + ").chunk(3, -1)\n";
  s += "    " + y + "_n, " + y + "_l, " + y + "_e = " + x + ".size(0), " + x + ".size(1), " + x + ".size(2)\n";
  const std::string heads = "[" + y + "_n, " + y + "_l, " + h + ", " + y + "_e // " + h + "]";
  for (int i = 0; i < 3; ++i) {
    s += "    " + y + "_" + "qkv"[i] + " = " + y + "_qkv[" + std::to_string(i) + "].reshape(" + heads +
         ").transpose(1, 2)\n";
  }
  s += "    " + y + " = torch.scaled_dot_product_attention(" + y + "_q, " + y + "_k, " + y +
       "_v).transpose(1, 2).reshape([" + y + "_n, " + y + "_l, " + y + "_e])\n";
  return s;
}

std::string forward_source(const ModuleGraph& g) {
  std::string s = "def forward(self, x: Tensor) -> Tensor:\n";
  for (const Node& n : g.nodes) s += statements(n);
  s += "    return " + value(g.output) + "\n";
  return s;
}

std::string join(const std::string& path, const std::string& child) {
  return path.empty() ? child : path + "." + child;
}

torch::jit::Module build(const ExportGraph& graph, const std::string& path, const torch::nn::Module& module,
                         const std::shared_ptr<torch::jit::CompilationUnit>& cu) {
  const ModuleGraph& g = graph.modules.at(path);
  torch::jit::Module jm(c10::QualifiedName("__torch__.glassbox." + g.type_name), cu, /*shouldMangle=*/true);
  jm.register_attribute("training", c10::BoolType::get(), false);
  // Every own tensor, read by the forward or not, so state_dict() keys equal the C++ module's.
  for (const auto& p : module.named_parameters(/*recurse=*/false)) {
    at::Tensor t = p.value().detach().to(torch::kCPU).clone();
    t.set_requires_grad(p.value().requires_grad());
    jm.register_parameter(p.key(), t, /*is_buffer=*/false);
  }
  for (const auto& b : module.named_buffers(/*recurse=*/false))
    jm.register_buffer(b.key(), b.value().detach().to(torch::kCPU).clone());
  const auto children = module.named_children();
  for (const auto& c : children) {
    const std::string child_path = join(path, c.key());
    if (graph.modules.contains(child_path)) jm.register_module(c.key(), build(graph, child_path, *c.value(), cu));
  }
  try {
    jm.define(forward_source(g));
  } catch (const std::exception& e) {
    GB_THROW(
        Internal,
        "TorchScript rejected the generated forward of " << (path.empty() ? "the model" : path) << ": " << e.what(),
        "report this as a glassbox bug");
  }
  return jm;
}

}  // namespace

torch::jit::Module to_torchscript(const ExportGraph& graph, const torch::nn::Module& module) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module m = build(graph, "", module, cu);
  m.eval();
  return m;
}

std::string torchscript_source(const ExportGraph& graph) {
  std::string out;
  for (const auto& [path, g] : graph.modules)
    out += "# " + (path.empty() ? std::string("(root)") : path) + ": " + g.type_name + "\n" + forward_source(g) + "\n";
  return out;
}

std::string serialize_torchscript(const torch::jit::Module& module,
                                  const std::unordered_map<std::string, std::string>& extra_files) {
  std::ostringstream os;
  torch::jit::ExtraFilesMap extra(extra_files.begin(), extra_files.end());
  module.save(os, extra);
  return os.str();
}

void save_torchscript(const torch::jit::Module& module, const std::filesystem::path& path,
                      const std::unordered_map<std::string, std::string>& extra_files) {
  write_file_atomic(path, serialize_torchscript(module, extra_files));
}

}  // namespace glassbox::exporter
