#include "glassbox/inspect/loop_monitor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/inspect/layer_map.h"

namespace glassbox::inspect {

LoopMonitor::LoopMonitor(torch::nn::Module& module) : module_(module) {}

void LoopMonitor::before_backward() {
  if (!stepped_ || reported_grads_) return;
  stepped_ = false;
  std::vector<at::Tensor> grads;
  std::vector<std::string> names;
  std::size_t total = 0;
  for (const auto& p : module_.named_parameters(true)) {
    if (!p.value().requires_grad()) continue;
    ++total;
    const at::Tensor& g = p.value().grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    names.push_back(p.key());
  }
  if (grads.empty()) return;
  torch::NoGradGuard ng;
  const at::Tensor norms = torch::stack(at::_foreach_norm(grads, 2)).to(torch::kCPU, torch::kDouble);
  std::size_t nonzero = 0;
  std::string first;
  for (std::int64_t i = 0; i < norms.numel(); ++i) {
    if (norms[i].item<double>() > 0) {
      if (first.empty()) first = names[static_cast<std::size_t>(i)];
      ++nonzero;
    }
  }
  if (nonzero == 0) return;
  reported_grads_ = true;
  Finding f{.id = "gradients-not-zeroed",
            .severity = Severity::kError,
            .confidence = 0.95,
            .where = {{"step", steps_}, {"parameter", first}}};
  f.evidence = fmt::format(
      "before the backward pass after step {}, {} of {} parameters still held the gradients of earlier steps (total "
      "norm "
      "{:.4g}, e.g. {}): each step adds to them instead of starting from zero",
      steps_, nonzero, total, norms.norm().item<double>(), first);
  f.fix =
      "call optimizer.zero_grad() (or zero every parameter's grad) before each backward pass, or after each optimiser "
      "step";
  findings_.push_back(std::move(f));
}

void LoopMonitor::after_step() {
  ++steps_;
  stepped_ = true;
}

void LoopMonitor::check_eval_mode(const std::string& where) {
  if (reported_mode_) return;
  std::vector<std::string> training;
  for (const auto& item : module_.named_modules("", /*include_self=*/true)) {
    const std::string type = LayerMap::short_type(item.value()->name());
    const bool stateful = type.rfind("BatchNorm", 0) == 0 || type.rfind("Dropout", 0) == 0 || type == "AlphaDropout" ||
                          type.rfind("InstanceNorm", 0) == 0;
    if (stateful && item.value()->is_training())
      training.push_back(item.key().empty() ? type : item.key() + " (" + type + ")");
  }
  if (training.empty()) return;
  reported_mode_ = true;
  Finding f{.id = "eval-in-train-mode",
            .severity = Severity::kError,
            .confidence = 0.9,
            .where = {{"where", where}, {"modules", training}}};
  f.evidence = fmt::format(
      "at {}, {} module{} that behave differently in training are still in training mode: {} — BatchNorm normalises "
      "with the evaluation batch and updates its running statistics, Dropout drops units",
      where, training.size(), training.size() == 1 ? "" : "s", fmt::format("{}", fmt::join(training, ", ")));
  f.fix =
      "call module->eval() before evaluating (and module->train() before training again), and evaluate under "
      "torch::NoGradGuard";
  findings_.push_back(std::move(f));
}

}  // namespace glassbox::inspect
