// Tested by nn_test (zoo_test.cpp: ZooReference.*, Checkpointing.*; nn_test.cpp: Stages.*) and
// train_test (Freeze.FirstBlocksFollowTheModelsStages: parameter_blocks).
#include "glassbox/nn/blocks.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/batchnorm.h"
#include "glassbox/nn/checkpointing.h"

namespace glassbox::nn {

namespace tnn = torch::nn;

at::Tensor HardswishImpl::forward(const at::Tensor& x) { return torch::hardswish(x); }
at::Tensor HardsigmoidImpl::forward(const at::Tensor& x) { return torch::hardsigmoid(x); }

tnn::AnyModule activation_module(BlockAct a) {
  switch (a) {
    case BlockAct::kRelu: return tnn::AnyModule(tnn::ReLU());
    case BlockAct::kHardswish: return tnn::AnyModule(Hardswish());
    case BlockAct::kHardsigmoid: return tnn::AnyModule(Hardsigmoid());
    case BlockAct::kSilu: return tnn::AnyModule(tnn::SiLU());
    case BlockAct::kSigmoid: return tnn::AnyModule(tnn::Sigmoid());
    case BlockAct::kNone: break;
  }
  GB_THROW(Internal, "no module for the identity activation", "");
}

at::Tensor activate(const at::Tensor& x, BlockAct a) {
  switch (a) {
    case BlockAct::kNone: return x;
    case BlockAct::kRelu: return torch::relu(x);
    case BlockAct::kHardswish: return torch::hardswish(x);
    case BlockAct::kHardsigmoid: return torch::hardsigmoid(x);
    case BlockAct::kSilu: return torch::silu(x);
    case BlockAct::kSigmoid: return torch::sigmoid(x);
  }
  return x;
}

Seq conv_norm_act(const ConvSpec& c, const BnSettings& bn, BlockAct act) {
  Seq s;
  s->push_back("0", tnn::Conv2d(tnn::Conv2dOptions(c.in, c.out, c.kernel)
                                    .stride(c.stride)
                                    .padding((c.kernel - 1) / 2)
                                    .groups(c.groups)
                                    .bias(false)));
  s->push_back("1", BatchNorm2d(tnn::BatchNorm2dOptions(c.out).eps(bn.eps).momentum(bn.momentum)));
  if (act != BlockAct::kNone) s->push_back("2", activation_module(act));
  return s;
}

SqueezeExcitationImpl::SqueezeExcitationImpl(std::int64_t channels, std::int64_t squeeze, BlockAct act, BlockAct scale)
    : act_(act), scale_(scale) {
  fc1_ = register_module("fc1", tnn::Conv2d(tnn::Conv2dOptions(channels, squeeze, 1)));
  fc2_ = register_module("fc2", tnn::Conv2d(tnn::Conv2dOptions(squeeze, channels, 1)));
}

at::Tensor SqueezeExcitationImpl::forward(const at::Tensor& x) {
  at::Tensor s = torch::adaptive_avg_pool2d(x, {1, 1});
  s = activate(fc2_->forward(activate(fc1_->forward(s), act_)), scale_);
  return s * x;
}

// GCC 12 at -O1 (the sanitizer build) sees bernoulli_'s default std::optional<Generator> as maybe
// uninitialised: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
at::Tensor stochastic_depth(const at::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  const double survival = 1.0 - p;
  std::vector<std::int64_t> size(static_cast<std::size_t>(x.dim()), 1);
  size[0] = x.size(0);
  at::Tensor noise = torch::empty(size, x.options()).bernoulli_(survival);
  if (survival > 0.0) noise.div_(survival);
  return x * noise;
}
#pragma GCC diagnostic pop

std::int64_t make_divisible(double v, std::int64_t divisor) {
  std::int64_t n =
      std::max(divisor, static_cast<std::int64_t>(v + static_cast<double>(divisor) / 2.0) / divisor * divisor);
  if (static_cast<double>(n) < 0.9 * v) n += divisor;
  return n;
}

at::Tensor forward_blocks(tnn::SequentialImpl& seq, const at::Tensor& x, bool checkpointing, bool descend) {
  if (!checkpointing) return seq.forward(x);
  at::Tensor y = x;
  for (auto it = seq.begin(); it != seq.end(); ++it) {
    tnn::AnyModule m = *it;
    auto inner = std::dynamic_pointer_cast<SeqImpl>(m.ptr());
    if (descend && inner) {
      y = forward_blocks(*inner, y, true, false);
    } else {
      y = checkpoint(
          *m.ptr(), [m](const at::Tensor& t) mutable { return m.forward(t); }, y);
    }
  }
  return y;
}

std::vector<Stage> sequential_stages(const std::string& prefix, const tnn::Sequential& seq) {
  std::vector<Stage> out;
  const auto names = seq->named_children();
  std::size_t i = 0;
  for (auto it = seq->begin(); it != seq->end(); ++it, ++i) {
    tnn::AnyModule m = *it;  // shares the module
    out.push_back({prefix + "." + names[i].key(), [m](const at::Tensor& x) mutable { return m.forward(x); }, true});
  }
  return out;
}

std::vector<std::string> parameter_blocks(Model& model) {
  const auto params = model.module()->named_parameters(true);
  std::vector<std::string> out;
  for (const Stage& s : model.stages()) {
    const std::string prefix = s.name + ".";
    for (const auto& p : params) {
      if (p.key().compare(0, prefix.size(), prefix) == 0) {
        out.push_back(s.name);
        break;
      }
    }
  }
  return out;
}

void init_conv_net(tnn::Module& m) {
  for (auto& sub : m.modules(/*include_self=*/false)) {
    if (auto* conv = sub->as<tnn::Conv2d>()) {
      tnn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      if (conv->bias.defined()) tnn::init::zeros_(conv->bias);
    } else if (auto* bn = sub->as<tnn::BatchNorm2d>()) {
      tnn::init::ones_(bn->weight);
      tnn::init::zeros_(bn->bias);
    } else if (auto* gn = sub->as<tnn::GroupNorm>()) {
      tnn::init::ones_(gn->weight);
      tnn::init::zeros_(gn->bias);
    }
  }
}

}  // namespace glassbox::nn
