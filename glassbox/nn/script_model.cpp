#include "glassbox/nn/script_model.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace fs = std::filesystem;
namespace jit = torch::jit;

namespace {

// The last non-empty line of a LibTorch message: the interpreter's "RuntimeError: ..." after its
// TorchScript traceback, or the whole message when it is one line.
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    const auto a = line.find_first_not_of(" \t\r");
    if (a != std::string::npos) last = line.substr(a);
  }
  return last.empty() ? text : last;
}

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

// A plain torch::nn::Module over a TorchScript module's tree: the same tensors, registered under
// the same names; train()/eval() also switch the TorchScript module.
class ScriptModuleView final : public torch::nn::Module {
 public:
  explicit ScriptModuleView(const jit::Module& m) : torch::nn::Module(type_name(m)), module_(m) {
    for (const auto& p : m.named_parameters(/*recurse=*/false))
      register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& b : m.named_buffers(/*recurse=*/false)) register_buffer(b.name, b.value);
    for (const auto& c : m.named_children()) register_module(c.name, std::make_shared<ScriptModuleView>(c.value));
    torch::nn::Module::train(m.is_training());
  }
  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

 private:
  static std::string type_name(const jit::Module& m) {
    const auto& qn = m.type()->name();
    return qn ? qn->name() : std::string("ScriptModule");
  }
  jit::Module module_;  // a handle on the same object as the ScriptModel's
};

// Every node of a block, depth first, nested blocks included.
template <class Fn>
void for_each_node(jit::Block* b, Fn&& fn) {
  for (jit::Node* n : b->nodes()) {
    fn(n);
    for (jit::Block* sub : n->blocks()) for_each_node(sub, fn);
  }
}

// Inlines the calls of `self`'s own methods (forward -> _forward_impl), keeping the calls of
// child modules as they are.
void inline_self_calls(jit::Graph& g, const c10::ClassTypePtr& cls) {
  jit::Value* self = g.inputs()[0];
  for (int round = 0; round < 256; ++round) {
    jit::Node* call = nullptr;
    for_each_node(g.block(), [&](jit::Node* n) {
      if (call == nullptr && n->kind() == c10::prim::CallMethod && n->input(0) == self) call = n;
    });
    if (call == nullptr) return;
    jit::Function& fn = cls->getMethod(call->s(c10::attr::name));
    fn.ensure_defined();
    jit::GraphFunction& gf = jit::toGraphFunction(fn);
    jit::inlineCallTo(call, &gf, gf.graph().get());
  }
  GB_THROW(FailedPrecondition, "the TorchScript forward calls its own methods more than 256 times deep", "");
}

// The top-level node that contains n (n itself when it is top-level).
jit::Node* top_level(jit::Node* n, jit::Block* top) {
  while (n->owningBlock() != top) n = n->owningBlock()->owningNode();
  return n;
}

// Values a top-level node reads from outside itself: its inputs and the free variables of its
// nested blocks.
std::vector<jit::Value*> outer_inputs(jit::Node* n, jit::Block* top) {
  std::vector<jit::Value*> out(n->inputs().begin(), n->inputs().end());
  for (jit::Block* b : n->blocks()) {
    auto add = [&](jit::Node* inner) {
      for (jit::Value* v : inner->inputs())
        if (top_level(v->node(), top) != n) out.push_back(v);
    };
    for_each_node(b, add);
    add(b->return_node());
  }
  return out;
}

// The top-level nodes `target` needs when `stop` is given (a graph input, or a cut); sets
// *reaches_input when it needs graph input `input` other than through stop.
std::unordered_set<jit::Node*> slice(jit::Graph& g, jit::Value* target, jit::Value* stop, jit::Value* input,
                                     bool* reaches_input) {
  std::unordered_set<jit::Node*> nodes;
  std::unordered_set<jit::Value*> seen;
  std::vector<jit::Value*> todo{target};
  *reaches_input = false;
  while (!todo.empty()) {
    jit::Value* v = todo.back();
    todo.pop_back();
    if (v == stop || !seen.insert(v).second) continue;
    if (v->node() == g.param_node()) {
      if (v == input) *reaches_input = true;
      continue;
    }
    jit::Node* n = top_level(v->node(), g.block());
    if (!nodes.insert(n).second) continue;
    for (jit::Value* in : outer_inputs(n, g.block())) todo.push_back(in);
  }
  return nodes;
}

bool mutates(jit::Node* n) {
  if (n->kind() == c10::prim::SetAttr) return true;
  const c10::FunctionSchema* s = n->maybeSchema();
  return s != nullptr && s->is_mutable();
}

struct StageGraph {
  std::string name;
  std::shared_ptr<jit::Graph> graph;  // (self, x) -> y
  c10::IValue self;                   // the module the graph's `self` is
};

// The forward of `module` as stages between cuts, or {} with a reason in *note. A stage that is
// only the call of a child whose own forward is a chain (a Sequential, torchvision's layer1) is
// replaced by the child's stages, named "<child>.<grandchild>" ("layer4.1", "features.relu1_1").
std::vector<StageGraph> split_forward(const jit::Module& module, const std::string& prefix, std::string* note,
                                      int depth) {
  jit::Method forward = module.get_method("forward");
  forward.function().ensure_defined();
  std::shared_ptr<jit::Graph> g = forward.graph()->copy();
  if (g->inputs().size() != 2 || g->outputs().size() != 1) {
    *note = fmt::format("its forward takes {} inputs and returns {} values, not one tensor to one tensor",
                        g->inputs().size() - 1, g->outputs().size());
    return {};
  }
  inline_self_calls(*g, module.type());
  jit::Value* self = g->inputs()[0];
  jit::Value* input = g->inputs()[1];
  jit::Value* output = g->outputs()[0];

  // Candidates: top-level calls of a child module's forward with one tensor output.
  struct Cut {
    std::string name;       // stage name (the child's, "@2" for its second call)
    std::string attribute;  // the child's attribute name
    jit::Node* node;
    jit::Value* value;
  };
  std::vector<Cut> cuts;
  std::unordered_map<std::string, int> calls;
  for (jit::Node* n : g->nodes()) {
    if (n->kind() != c10::prim::CallMethod || n->s(c10::attr::name) != "forward" || n->outputs().size() != 1) continue;
    jit::Node* owner = n->input(0)->node();
    if (owner->kind() != c10::prim::GetAttr || owner->input(0) != self) continue;
    if (!n->output()->type()->isSubtypeOf(*c10::TensorType::get())) continue;
    bool reaches = false;
    slice(*g, output, n->output(), input, &reaches);
    if (reaches) continue;  // the rest also reads something computed before it: not a cut
    const std::string attribute = owner->s(c10::attr::name);
    std::string name = attribute;
    if (const int k = ++calls[name]; k > 1) name += "@" + std::to_string(k);  // a child called twice
    cuts.push_back({name, attribute, n, n->output()});
  }
  if (cuts.empty()) {
    *note = "its forward calls no child module whose output the rest depends on alone";
    return {};
  }
  if (cuts.back().value != output) cuts.push_back({"output", "", nullptr, output});

  std::vector<StageGraph> out;
  std::unordered_set<jit::Node*> covered;
  jit::Value* prev = input;
  for (const Cut& c : cuts) {
    bool reaches = false;
    const std::unordered_set<jit::Node*> needed = slice(*g, c.value, prev, input, &reaches);
    if (reaches && prev != input) {
      *note = fmt::format("'{}{}' reads the input other than through the stage before it", prefix, c.name);
      return {};
    }
    covered.insert(needed.begin(), needed.end());
    const bool call_only = c.node != nullptr && std::all_of(needed.begin(), needed.end(), [&](jit::Node* n) {
                             return n == c.node || n == c.node->input(0)->node() || n->kind() == c10::prim::Constant;
                           });
    if (call_only && depth < 16) {
      std::string ignored;
      std::vector<StageGraph> inner =
          split_forward(module.attr(c.attribute).toModule(), prefix + c.name + ".", &ignored, depth + 1);
      if (inner.size() >= 2) {
        for (auto& s : inner) out.push_back(std::move(s));
        prev = c.value;
        continue;
      }
    }
    auto sg = std::make_shared<jit::Graph>();
    std::unordered_map<jit::Value*, jit::Value*> env;
    env[self] = sg->addInput("self")->setType(self->type());
    // A traced graph's input carries the example's sizes: the stages take any tensor.
    const bool tensor = prev->type()->isSubtypeOf(*c10::TensorType::get());
    env[prev] = sg->addInput("x")->setType(tensor ? c10::TensorType::get() : prev->type());
    for (jit::Node* n : g->nodes()) {
      if (needed.count(n) == 0) continue;
      jit::Node* copy = sg->insertNode(sg->createClone(n, [&](jit::Value* v) { return env.at(v); }));
      for (std::size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = copy->outputs()[i];
    }
    sg->registerOutput(env.at(c.value));
    sg->lint();
    out.push_back({prefix + c.name, sg, module._ivalue()});
    prev = c.value;
  }
  // A top-level in-place update or attribute write that no stage runs would be lost.
  for (jit::Node* n : g->nodes()) {
    if (covered.count(n) != 0) continue;
    bool writes = mutates(n);
    for (jit::Block* b : n->blocks()) for_each_node(b, [&](jit::Node* inner) { writes = writes || mutates(inner); });
    if (writes) {
      *note = fmt::format("its forward updates a value in place ({}) outside the stages", n->kind().toQualString());
      return {};
    }
  }
  return out;
}

}  // namespace

ScriptModel::ScriptModel(jit::Module module, ScriptModelOptions options)
    : module_(std::move(module)), options_(std::move(options)), view_(std::make_shared<ScriptModuleView>(module_)) {
  GB_CHECK(module_.find_method("forward").has_value(), InvalidArgument, "the TorchScript module has no forward method",
           "script a module with a forward(x) method");
}

at::Tensor ScriptModel::forward(const at::Tensor& x) {
  const at::Tensor in = options_.flip_channels ? x.flip(1) : x;
  c10::IValue out;
  try {
    out = module_.forward({in});
  } catch (const std::exception& e) {  // c10::Error, or the interpreter's runtime_error with a TorchScript traceback
    GB_THROW(InvalidArgument,
             "the TorchScript model failed on an input of shape " << x.sizes() << ": " << last_line(e.what()),
             "check the input shape and preprocessing in the contract (model.json) or the flags");
  }
  return check_output(out, x.size(0));
}

at::Tensor ScriptModel::check_output(const c10::IValue& out, std::int64_t batch) const {
  const std::string hint = "make forward() return the logits as one [batch, classes] tensor";
  if (!out.isTensor()) {
    std::string what = out.tagKind();
    if (out.isTuple()) what = fmt::format("a tuple of {} values", out.toTupleRef().elements().size());
    if (out.isList()) what = fmt::format("a list of {} values", out.toListRef().size());
    if (out.isGenericDict()) what = fmt::format("a dict of {} entries", out.toGenericDict().size());
    GB_THROW(FailedPrecondition, "the TorchScript model returned " << what << ", not a [N, K] tensor", hint);
  }
  at::Tensor t = out.toTensor();
  GB_CHECK(t.dim() == 2 && t.size(0) == batch, FailedPrecondition,
           "the TorchScript model returned a tensor of shape " << t.sizes() << " for a batch of " << batch << ", not ["
                                                               << batch << ", K]",
           hint);
  GB_CHECK(options_.num_classes <= 0 || t.size(1) == options_.num_classes, FailedPrecondition,
           "the TorchScript model returns " << t.size(1) << " outputs per sample, the contract says "
                                            << options_.num_classes << " classes",
           "fix output.num_classes (and labels) in the contract");
  GB_CHECK(t.is_floating_point(), FailedPrecondition,
           "the TorchScript model returned " << t.scalar_type() << " values, not scores", hint);
  return t;
}

std::vector<Stage> ScriptModel::stages() {
  if (!stages_built_) {
    stages_built_ = true;
    try {
      build_stages();
    } catch (const std::exception& e) {
      stages_.clear();
      stages_note_ = "the forward graph could not be split: " + first_line(e.what());
    }
  }
  return stages_;
}

void ScriptModel::build_stages() {
  if (options_.sample_shape.empty()) {
    stages_note_ = "no input shape is known to probe the stages with";
    return;
  }
  std::vector<StageGraph> graphs = split_forward(module_, "", &stages_note_, 0);
  if (graphs.size() == 1)
    stages_note_ = "its forward is not a chain of child modules (the input reaches the output around them)";
  if (graphs.size() < 2) return;
  const bool flip = options_.flip_channels;
  std::vector<Stage> out;
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    auto fn = std::make_shared<jit::GraphFunction>(c10::QualifiedName("glassbox.stage." + graphs[i].name),
                                                   graphs[i].graph, nullptr);
    const bool first = i == 0 && flip;
    const c10::IValue self = graphs[i].self;
    out.push_back({graphs[i].name, [fn, self, first](const at::Tensor& x) {
                     jit::Stack stack{self, first ? x.flip(1) : x};
                     fn->run(stack);
                     return stack.back().toTensor();
                   }});
  }

  // Probe: each stage's output rank, and the chain against forward() on a seeded random batch.
  const bool was_training = module_.is_training();
  module_.train(false);
  torch::NoGradGuard no_grad;
  const auto params = module_.parameters();
  const torch::Device device = params.size() > 0 ? (*params.begin()).device() : torch::Device(torch::kCPU);
  std::vector<std::int64_t> shape{2};
  shape.insert(shape.end(), options_.sample_shape.begin(), options_.sample_shape.end());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(20240917);
  const at::Tensor x = torch::randn(shape, gen, torch::kFloat).to(device);
  std::string problem;
  try {
    at::Tensor y = x;
    for (Stage& s : out) {
      y = s.run(y);
      s.spatial = y.dim() == 4;
    }
    const at::Tensor ref = forward(x);
    if (!y.sizes().equals(ref.sizes()) || !torch::allclose(y, ref, 1e-5, 1e-6))
      problem = fmt::format("running its stages does not reproduce forward() (max difference {})",
                            y.sizes().equals(ref.sizes()) ? (y - ref).abs().max().item<double>() : -1.0);
  } catch (const std::exception& e) {
    problem = "its stages fail on a probe input: " + last_line(e.what());
  }
  module_.train(was_training);
  if (!problem.empty()) {
    stages_note_ = problem;
    return;
  }
  stages_ = std::move(out);
}

std::unique_ptr<ScriptModel> load_script_model(const fs::path& file, ScriptModelOptions options) {
  const std::string hint = "save the model with torch.jit.save(torch.jit.script(model), \"model.pt\") (docs/import.md)";
  GB_CHECK(fs::is_regular_file(file), NotFound, "no TorchScript file at " << file.string(), hint);
  jit::Module m;
  try {
    m = jit::load(file.string(), torch::Device(torch::kCPU));
  } catch (const std::exception& e) {
    const std::string why = first_line(e.what());
    const bool pickle = why.find("constants.pkl") != std::string::npos || why.find("code/") != std::string::npos;
    GB_THROW(DataLoss, file.string() << " is not a TorchScript file (" << why << ")",
             pickle ? "it looks like torch.save of a model or state dict: " + hint : hint);
  }
  return std::make_unique<ScriptModel>(std::move(m), std::move(options));
}

}  // namespace glassbox::nn
