// Tested by train_test (Freeze.*, the Trainer's trainer.freeze tests) and cli_test
// (Export.TrainableOnlyWeightsLeaveTheFrozenLayersOut).
#include "glassbox/train/freeze.h"

#include <fnmatch.h>

#include <torch/torch.h>

#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/nn/pretrained.h"

namespace glassbox::train {

namespace {

std::string owner(const std::string& param) {
  const std::size_t dot = param.rfind('.');
  return dot == std::string::npos ? "" : param.substr(0, dot);
}

bool under(const std::string& name, const std::string& prefix) {
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.';
}

}  // namespace

bool is_frozen(const std::string& name, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

std::vector<std::string> freeze_matching(torch::nn::Module& module, const std::vector<std::string>& patterns) {
  std::vector<bool> used(patterns.size(), false);
  for (auto& p : module.named_parameters(true)) {
    for (std::size_t i = 0; i < patterns.size(); ++i) {
      if (fnmatch(patterns[i].c_str(), p.key().c_str(), 0) == 0) {
        p.value().set_requires_grad(false);
        used[i] = true;
      }
    }
  }
  std::vector<std::string> unused;
  for (std::size_t i = 0; i < patterns.size(); ++i)
    if (!used[i]) unused.push_back(patterns[i]);
  return unused;
}

void freeze_fraction(torch::nn::Module& module, double fraction) {
  if (fraction <= 0) return;
  auto params = module.named_parameters(true);
  std::int64_t total = 0;
  for (const auto& p : params) total += p.value().numel();
  const std::string head = nn::head_module(module);
  const double target = fraction * static_cast<double>(total);
  std::int64_t frozen = 0;
  std::size_t i = 0;
  while (i < params.size() && static_cast<double>(frozen) < target) {
    const std::string layer = owner(params[i].key());
    if (!head.empty() && (layer == head || under(layer, head))) break;
    for (; i < params.size() && owner(params[i].key()) == layer; ++i) {
      params[i].value().set_requires_grad(false);
      frozen += params[i].value().numel();
    }
  }
}

void freeze_first_blocks(torch::nn::Module& module, const std::vector<std::string>& blocks, std::int64_t n) {
  if (n <= 0) return;
  GB_CHECK(!blocks.empty(), InvalidArgument, "trainer.freeze_blocks: this model does not list its blocks",
           "use trainer.freeze_fraction or trainer.freeze patterns");
  GB_CHECK(n < static_cast<std::int64_t>(blocks.size()), InvalidArgument,
           "trainer.freeze_blocks = " << n << " would freeze every block (the model has " << blocks.size() << ")",
           "use at most " + std::to_string(blocks.size() - 1));
  auto block_of = [&](const std::string& name) -> std::int64_t {
    for (std::size_t b = 0; b < blocks.size(); ++b)
      if (under(name, blocks[b])) return static_cast<std::int64_t>(b);
    return -1;
  };
  auto params = module.named_parameters(true);
  // The registration index of the last parameter of the last frozen block.
  std::int64_t last = -1;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::int64_t b = block_of(params[i].key());
    if (b >= 0 && b < n) last = static_cast<std::int64_t>(i);
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::int64_t b = block_of(params[i].key());
    const bool root_param = params[i].key().find('.') == std::string::npos;
    const bool input_side = b < 0 && (static_cast<std::int64_t>(i) < last || root_param);
    if ((b >= 0 && b < n) || input_side) params[i].value().set_requires_grad(false);
  }
}

FreezeReport apply_freeze(torch::nn::Module& module, const TrainerOptions& options,
                          const std::vector<std::string>& blocks) {
  for (const auto& unused : freeze_matching(module, options.freeze)) {
    std::vector<std::string> names;
    for (const auto& p : module.named_parameters(true)) names.push_back(p.key());
    const std::string near = closest_match(unused, names);
    GB_THROW(InvalidArgument, "trainer.freeze pattern \"" << unused << "\" matches no parameter",
             near.empty() ? "patterns are globs over parameter names such as \"features.*\""
                          : "did you mean \"" + near + "\"?");
  }
  freeze_fraction(module, options.freeze_fraction);
  freeze_first_blocks(module, blocks, options.freeze_blocks);
  FreezeReport r;
  for (const auto& p : module.named_parameters(true)) {
    r.total += p.value().numel();
    if (!p.value().requires_grad()) {
      r.frozen += p.value().numel();
      r.frozen_names.push_back(p.key());
    }
  }
  return r;
}

void keep_frozen_batchnorm_eval(torch::nn::Module& module) {
  for (auto& m : module.modules(/*include_self=*/true)) {
    const bool bn = m->as<torch::nn::BatchNorm2d>() || m->as<torch::nn::BatchNorm1d>();
    if (!bn) continue;
    bool any = false, all_frozen = true;
    for (const auto& p : m->parameters(/*recurse=*/false)) {
      any = true;
      all_frozen = all_frozen && !p.requires_grad();
    }
    if (any && all_frozen) m->eval();
  }
}

}  // namespace glassbox::train
