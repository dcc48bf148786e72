// ScriptModel: a TorchScript file (torch.jit.save of a scripted or traced PyTorch model, or
// `glassbox export --format torchscript`) behind glassbox's Model interface, so that eval,
// explain and serve use it as they use a zoo model.
//
//   ScriptModelOptions o; o.sample_shape = {1, 28, 28}; o.num_classes = 10;
//   std::unique_ptr<ScriptModel> m = load_script_model("model.pt", o);   // NotFound / DataLoss
//   at::Tensor logits = m->forward(x);            // x: [N, 1, 28, 28] float32 -> [N, 10]
//   m->module()->eval();                          // also switches the TorchScript module
//   for (const Stage& s : m->stages()) ...        // "conv1", "bn1", ..., "layer4", "avgpool", "fc"
//
// module(): a plain torch::nn::Module mirroring the TorchScript module's tree — same child names,
// the SAME parameter and buffer tensors (so named_parameters() keys are the state_dict keys,
// to(device) moves the TorchScript module's tensors in place, and train()/eval() also set the
// TorchScript module's `training` flags). It has no forward of its own: call the Model's.
//
// stages(): the C++ frontend has no hooks and a TorchScript module none that C++ can add, so
// Grad-CAM splits the forward graph instead. The forward graph is copied, calls on `self`
// (torchvision's forward calls self._forward_impl) are inlined, and every top-level call of a
// child module's forward (prim::CallMethod on prim::GetAttr(self)) whose output is a cut — the
// rest of the forward depends on the input only through it — ends a stage. Each stage is a new
// graph (the previous cut as its input, the nodes it needs, the cut as its output) run by a
// torch::jit::GraphFunction with the module as `self`. Stage names are the children's names
// ("layer4"); a trailing computation after the last cut is a stage named "output". Stages are
// built once, on the first call, and checked: they run once on a seeded random batch of
// sample_shape in eval mode (no gradients; `spatial` = the output is 4-D) and must reproduce
// forward() (1e-5 relative); otherwise, or when the forward is not such a chain (a skip
// connection around top-level children, several inputs, no sample shape), stages() is empty
// and stages_note() says why (explain then falls back to saliency maps).
//
// Errors: a missing file is NotFound; a file that is not TorchScript (a torch.save state dict,
// another format, a truncated file) is DataLoss naming the file; forward() whose result is not a
// [N, K] tensor (a tuple, a dict, [N, K, 1], K != num_classes) is FailedPrecondition naming what
// came back; a failure inside the TorchScript interpreter is InvalidArgument with the
// interpreter's last message line.
// Thread safety: as Model (forward from several threads only in eval mode under no_grad);
// stages() is built on the first call — make that call from one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>

#include "glassbox/nn/model.h"

namespace glassbox::nn {

struct ScriptModelOptions {
  std::vector<std::int64_t> sample_shape;  // one input sample without the batch axis; needed by stages()
  std::int64_t num_classes = 0;            // the output width forward() must have; 0: any
  bool flip_channels = false;              // reverse the channel axis first (a BGR model fed RGB data)
  std::string name;                        // name(); empty: "torchscript"
};

class ScriptModel final : public Model {
 public:
  ScriptModel(torch::jit::Module module, ScriptModelOptions options);
  at::Tensor forward(const at::Tensor& x) override;
  std::shared_ptr<torch::nn::Module> module() override { return view_; }
  std::string name() const override { return options_.name.empty() ? "torchscript" : options_.name; }
  std::vector<Stage> stages() override;
  // Why stages() is empty ("" when it is not, or before the first call).
  const std::string& stages_note() const { return stages_note_; }
  torch::jit::Module& script() { return module_; }
  const ScriptModelOptions& options() const { return options_; }

 private:
  void build_stages();
  at::Tensor check_output(const c10::IValue& out, std::int64_t batch) const;

  torch::jit::Module module_;
  ScriptModelOptions options_;
  std::shared_ptr<torch::nn::Module> view_;
  bool stages_built_ = false;
  std::vector<Stage> stages_;
  std::string stages_note_;
};

// Loads a TorchScript file on the CPU (move it with module()->to(device)).
std::unique_ptr<ScriptModel> load_script_model(const std::filesystem::path& file, ScriptModelOptions options = {});

}  // namespace glassbox::nn
