// The export graph: a model's forward pass read off its module tree, as data that the TorchScript
// and ONNX writers turn into their formats. LibTorch cannot script a C++ module (its forward()
// is compiled C++), so each module kind glassbox knows is *lowered* to a small graph of
// primitive ops over its own parameters, or of calls into its children.
//
//   ExportGraph g = lower_model(*model->module(), "cnn");   // InvalidArgument names a layer it cannot lower
//   const ModuleGraph& root = g.modules.at("");              // the root's forward
//
// Built in: Linear, Conv2d, BatchNorm1d/2d, LayerNorm, GroupNorm, ReLU/GELU/Tanh/Sigmoid/SiLU/
// LeakyReLU/ELU, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Dropout (identity at inference),
// Softmax/LogSoftmax, Identity, Sequential, and the zoo's models and blocks.
// A user's module type gets exported by registering a lowering:
//
//   register_lowering<MyBlockImpl>("MyBlock", [](const torch::nn::Module& m, GraphBuilder& b) {
//     int y = b.call("conv", b.input());          // the child named "conv"
//     return b.op(OpKind::kRelu, {b.add(y, b.input())});
//   });
//
// Thread safety: register lowerings at start-up; lower_model is then safe to call concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <typeindex>
#include <vector>

#include <torch/nn/module.h>

namespace glassbox::exporter {

enum class OpKind {
  kCall,  // the child module `child`
  kLinear,
  kConv2d,
  kBatchNorm,
  kLayerNorm,
  kGroupNorm,
  kRelu,
  kGelu,
  kTanh,
  kSigmoid,
  kSilu,
  kLeakyRelu,
  kElu,
  kMaxPool2d,
  kAvgPool2d,
  kAdaptiveAvgPool2d,
  kFlatten,
  kAdd,
  kSoftmax,
  kLogSoftmax,
  kHardswish,
  kHardsigmoid,
  kMul,            // inputs[0] * inputs[1], broadcasting (squeeze-excitation's scale)
  kAddParameter,   // x + the module's tensor `weight` (a position embedding)
  kTokens,         // [N, E, h, w] -> [N, 1 + h*w, E]: the module's `weight` [1, 1, E] (a class token) first
  kSelectFirst,    // x[:, 0]
  kSelfAttention,  // softmax(q k^T / sqrt(d)) v over `groups` heads, q/k/v = linear(x, weight, bias) split in 3
};
const char* op_name(OpKind kind);

// One op. Inputs and output are value ids local to their ModuleGraph (0 is the module's input).
// Parameters are named relative to the module ("weight", "running_mean"); "" means absent.
struct Node {
  OpKind kind = OpKind::kRelu;
  std::vector<int> inputs;
  int output = -1;
  std::string child;                                            // kCall
  std::string weight, bias, running_mean, running_var;          // parametrised ops
  std::vector<std::int64_t> kernel, stride, padding, dilation;  // conv / pooling
  std::vector<std::int64_t> shape;                              // LayerNorm normalized_shape, adaptive output size
  std::int64_t groups = 1;                                      // conv groups, GroupNorm groups
  std::int64_t dim = 1;                                         // softmax dim, flatten start
  std::int64_t end_dim = -1;                                    // flatten end
  double eps = 1e-5;
  double alpha = 0.0;  // LeakyReLU slope, ELU alpha
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::string approximate = "none";  // GELU
};

// One module's forward(x) -> y.
struct ModuleGraph {
  std::string path;                     // "" for the root, "features.conv0_0"
  std::string type_name;                // "Conv2d", "Sequential", "BasicBlock", ...
  std::vector<std::string> parameters;  // own tensors, not the children's
  std::vector<std::string> buffers;
  std::vector<std::string> children;  // direct children called or owned, in registration order
  std::vector<Node> nodes;
  int num_values = 1;
  int output = 0;
};

struct ExportGraph {
  std::string name;                            // the model's name ("cnn")
  std::map<std::string, ModuleGraph> modules;  // by path; "" is the root
  const ModuleGraph& root() const { return modules.at(""); }
};

// Builds one module's graph inside a lowering function.
class GraphBuilder {
 public:
  GraphBuilder(ModuleGraph& graph, const torch::nn::Module& module);
  int input() const { return 0; }
  // A primitive op on `inputs`; `node` carries the attributes (its inputs/output are set here).
  int op(OpKind kind, std::vector<int> inputs, Node node = {});
  int call(const std::string& child, int x);
  int add(int a, int b) { return op(OpKind::kAdd, {a, b}); }
  // Tensors of this module the graph reads (registered on the exported module).
  void parameter(const std::string& name);
  void buffer(const std::string& name);
  const torch::nn::Module& module() const { return module_; }

 private:
  ModuleGraph& graph_;
  const torch::nn::Module& module_;
};

// A lowering returns the value id of the module's output.
using Lowering = std::function<int(const torch::nn::Module&, GraphBuilder&)>;
void register_lowering(std::type_index type, std::string type_name, Lowering lowering);
template <class Impl>
void register_lowering(std::string type_name, Lowering lowering) {
  register_lowering(std::type_index(typeid(Impl)), std::move(type_name), std::move(lowering));
}

// Lowers `module` and every child it calls. InvalidArgument naming the first layer (by path and
// C++ type) that has no lowering or an option no exported format can express.
ExportGraph lower_model(const torch::nn::Module& module, const std::string& name);

}  // namespace glassbox::exporter
