// Tested by nn_test (Checkpointing.GivesTheSameGradientsAndStatistics).
#include "glassbox/nn/checkpointing.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/torch.h>

#include "glassbox/core/seed.h"

namespace glassbox::nn {

namespace {

// BatchNorm layers of a block with momentum 0 (running statistics untouched) for a scope.
class FreezeRunningStats {
 public:
  explicit FreezeRunningStats(torch::nn::Module& m) {
    for (auto& sub : m.modules(true)) {
      if (auto* b = sub->as<torch::nn::BatchNorm2d>()) add(b->options, b->num_batches_tracked);
      if (auto* b = sub->as<torch::nn::BatchNorm1d>()) add(b->options, b->num_batches_tracked);
    }
  }
  ~FreezeRunningStats() {
    torch::NoGradGuard ng;
    for (auto& s : saved_) {
      s.options->momentum(s.momentum);
      if (s.tracked.defined()) s.tracked.fill_(s.count);
    }
  }
  FreezeRunningStats(const FreezeRunningStats&) = delete;
  FreezeRunningStats& operator=(const FreezeRunningStats&) = delete;

 private:
  struct Saved {
    torch::nn::BatchNormOptions* options;
    std::optional<double> momentum;
    at::Tensor tracked;
    std::int64_t count;
  };
  void add(torch::nn::BatchNormOptions& o, const at::Tensor& tracked) {
    saved_.push_back({&o, o.momentum(), tracked, tracked.defined() ? tracked.item<std::int64_t>() : 0});
    o.momentum(0.0);
  }
  std::vector<Saved> saved_;
};

// The backward of a checkpointed block: run it again with the first run's random state, then
// back-propagate through the recomputation (the parameters' gradients accumulate there).
class CheckpointBackward final : public torch::autograd::Node {
 public:
  CheckpointBackward(torch::nn::Module& block, std::function<at::Tensor(const at::Tensor&)> forward,
                     const at::Tensor& x)
      : block_(block),
        forward_(std::move(forward)),
        x_(x.detach()),
        x_requires_grad_(x.requires_grad()),
        cpu_rng_(cpu_rng_state()),
        cuda_rng_(cuda_rng_states()) {}
  std::string name() const override { return "glassbox::CheckpointBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    at::Tensor input = x_.detach().requires_grad_(x_requires_grad_);
    const at::Tensor now_cpu = cpu_rng_state();
    const std::vector<at::Tensor> now_cuda = cuda_rng_states();
    set_cpu_rng_state(cpu_rng_);
    set_cuda_rng_states(cuda_rng_);
    at::Tensor y;
    {
      torch::AutoGradMode grad(true);
      FreezeRunningStats keep(block_);
      y = forward_(input);
    }
    set_cpu_rng_state(now_cpu);
    set_cuda_rng_states(now_cuda);
    if (y.requires_grad()) torch::autograd::backward({y}, {grads[0]});
    return {x_requires_grad_ ? input.grad() : at::Tensor(), at::Tensor()};
  }

  void release_variables() override { x_.reset(); }

 private:
  torch::nn::Module& block_;
  std::function<at::Tensor(const at::Tensor&)> forward_;
  at::Tensor x_;
  bool x_requires_grad_;
  at::Tensor cpu_rng_;
  std::vector<at::Tensor> cuda_rng_;
};

}  // namespace

at::Tensor checkpoint(torch::nn::Module& block, const std::function<at::Tensor(const at::Tensor&)>& forward,
                      const at::Tensor& x) {
  if (!block.is_training() || !torch::GradMode::is_enabled()) return forward(x);
  // A frozen block on frozen input has nothing to back-propagate: no activations are kept anyway.
  bool trainable = x.requires_grad();
  for (const auto& p : block.parameters(true)) trainable = trainable || p.requires_grad();
  if (!trainable) return forward(x);
  // The anchor requires grad so that backward reaches the block even when x does not (the
  // first block's input): the block's parameters need it.
  static thread_local at::Tensor anchor = torch::zeros({}, torch::requires_grad());
  auto node =
      std::shared_ptr<CheckpointBackward>(new CheckpointBackward(block, forward, x), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(x, anchor));
  at::Tensor y;
  {
    torch::NoGradGuard ng;
    y = forward(x);
  }
  torch::autograd::set_history(y, node);
  return y;
}

}  // namespace glassbox::nn
