#include "glassbox/export/graph.h"

#include <mutex>
#include <unordered_map>

#include <c10/util/Exception.h>

#include "glassbox/base/error.h"

namespace glassbox::exporter {

void register_builtin_lowerings();  // lower.cpp

namespace {

struct Entry {
  std::string type_name;
  Lowering lowering;
};

std::unordered_map<std::type_index, Entry>& registry() {
  static std::unordered_map<std::type_index, Entry> r;
  return r;
}

void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, [] { register_builtin_lowerings(); });
}

std::string join(const std::string& path, const std::string& child) {
  return path.empty() ? child : path + "." + child;
}

void lower_into(const torch::nn::Module& module, const std::string& path, ExportGraph& out) {
  const auto it = registry().find(std::type_index(typeid(module)));
  const std::string where = path.empty() ? std::string("the model") : "layer " + path;
  GB_CHECK(it != registry().end(), InvalidArgument,
           "cannot export " << where << " (" << module.name()
                            << "): glassbox has no lowering for this module type, and a C++ "
                            << "forward() cannot be read back",
           "register one with glassbox::exporter::register_lowering<" + module.name() + ">(...) (docs/export.md)");
  ModuleGraph g;
  g.path = path;
  g.type_name = it->second.type_name;
  GraphBuilder b(g, module);
  try {
    g.output = it->second.lowering(module, b);
  } catch (const Error& e) {
    if (e.message().rfind("cannot export", 0) == 0) throw;
    throw Error(e.code(), "cannot export " + where + " (" + g.type_name + "): " + e.message(), e.hint());
  }
  std::vector<std::string> called;
  for (const Node& n : g.nodes)
    if (n.kind == OpKind::kCall) called.push_back(n.child);
  const auto children = module.named_children();
  for (const auto& c : children) {
    g.children.push_back(c.key());
  }
  for (const std::string& c : called) {
    GB_CHECK(children.contains(c), Internal,
             "lowering of " << g.type_name << " calls a child \"" << c << "\" that " << where << " lacks",
             "fix the lowering");
    if (!out.modules.contains(join(path, c))) lower_into(*children[c], join(path, c), out);
  }
  out.modules[path] = std::move(g);
}

}  // namespace

const char* op_name(OpKind kind) {
  switch (kind) {
    case OpKind::kCall: return "call";
    case OpKind::kLinear: return "linear";
    case OpKind::kConv2d: return "conv2d";
    case OpKind::kBatchNorm: return "batch_norm";
    case OpKind::kLayerNorm: return "layer_norm";
    case OpKind::kGroupNorm: return "group_norm";
    case OpKind::kRelu: return "relu";
    case OpKind::kGelu: return "gelu";
    case OpKind::kTanh: return "tanh";
    case OpKind::kSigmoid: return "sigmoid";
    case OpKind::kSilu: return "silu";
    case OpKind::kLeakyRelu: return "leaky_relu";
    case OpKind::kElu: return "elu";
    case OpKind::kMaxPool2d: return "max_pool2d";
    case OpKind::kAvgPool2d: return "avg_pool2d";
    case OpKind::kAdaptiveAvgPool2d: return "adaptive_avg_pool2d";
    case OpKind::kFlatten: return "flatten";
    case OpKind::kAdd: return "add";
    case OpKind::kSoftmax: return "softmax";
    case OpKind::kLogSoftmax: return "log_softmax";
    case OpKind::kHardswish: return "hardswish";
    case OpKind::kHardsigmoid: return "hardsigmoid";
    case OpKind::kMul: return "mul";
    case OpKind::kAddParameter: return "add_parameter";
    case OpKind::kTokens: return "tokens";
    case OpKind::kSelectFirst: return "select_first";
    case OpKind::kSelfAttention: return "self_attention";
  }
  return "?";
}

GraphBuilder::GraphBuilder(ModuleGraph& graph, const torch::nn::Module& module) : graph_(graph), module_(module) {}

int GraphBuilder::op(OpKind kind, std::vector<int> inputs, Node node) {
  for (int v : inputs)
    GB_CHECK(v >= 0 && v < graph_.num_values, Internal,
             "lowering of " << graph_.type_name << " reads an undefined value " << v, "fix the lowering");
  node.kind = kind;
  node.inputs = std::move(inputs);
  node.output = graph_.num_values++;
  graph_.nodes.push_back(std::move(node));
  return graph_.nodes.back().output;
}

int GraphBuilder::call(const std::string& child, int x) {
  Node n;
  n.child = child;
  return op(OpKind::kCall, {x}, std::move(n));
}

void GraphBuilder::parameter(const std::string& name) {
  for (const auto& p : graph_.parameters)
    if (p == name) return;
  graph_.parameters.push_back(name);
}

void GraphBuilder::buffer(const std::string& name) {
  for (const auto& p : graph_.buffers)
    if (p == name) return;
  graph_.buffers.push_back(name);
}

void register_lowering(std::type_index type, std::string type_name, Lowering lowering) {
  ensure_builtins();
  registry()[type] = Entry{std::move(type_name), std::move(lowering)};
}

void register_builtin(std::type_index type, std::string type_name, Lowering lowering) {
  registry()[type] = Entry{std::move(type_name), std::move(lowering)};
}

ExportGraph lower_model(const torch::nn::Module& module, const std::string& name) {
  ensure_builtins();
  ExportGraph g;
  g.name = name;
  lower_into(module, "", g);
  return g;
}

}  // namespace glassbox::exporter
