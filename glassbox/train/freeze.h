// Freezing for fine-tuning: which parameters a run does not train, and BatchNorm layers kept in
// eval mode. The one place behind the Trainer, export's --trainable-only and anything else that
// must know which parameters a run trained.
//
//   trainer.freeze = ["features.*"]   glob patterns over parameter names
//   trainer.freeze_fraction = 0.7     whole layers from the input side until 70 % of the parameters
//   trainer.freeze_blocks = 3         the model's first three blocks (stages with parameters)
//
//   FreezeReport r = apply_freeze(module, options, blocks);   // InvalidArgument for a pattern matching nothing
//   keep_frozen_batchnorm_eval(module);                       // after module.train()
//
// Thread safety: reentrant (fnmatch); the module must not be used concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "glassbox/train/trainer_options.h"

namespace glassbox::train {

// True when `name` matches one of the patterns (shell globs, as fnmatch without flags).
bool is_frozen(const std::string& name, const std::vector<std::string>& patterns);

// Sets requires_grad(false) on every parameter whose name matches a pattern; returns the patterns
// that matched no parameter (the caller decides whether that is an error).
std::vector<std::string> freeze_matching(torch::nn::Module& module, const std::vector<std::string>& patterns);

// Freezes whole layers (a module's own parameters together), in registration order, until at
// least `fraction` of all parameters is frozen. The head (the last Linear layer) is never frozen.
void freeze_fraction(torch::nn::Module& module, double fraction);

// Freezes the parameters under the first n of `blocks` (module paths in forward order).
// Parameters outside every block that come before the last frozen block in registration order,
// or that sit at the root before any block (a ViT's class token and position embedding), count
// as input side and are frozen too.
void freeze_first_blocks(torch::nn::Module& module, const std::vector<std::string>& blocks, std::int64_t n);

struct FreezeReport {
  std::int64_t frozen = 0;  // parameters (elements)
  std::int64_t total = 0;
  std::vector<std::string> frozen_names;
  double fraction() const { return total > 0 ? static_cast<double>(frozen) / static_cast<double>(total) : 0.0; }
};

// trainer.freeze, freeze_fraction and freeze_blocks together (blocks: the model's, for
// freeze_blocks). InvalidArgument for a pattern that matches nothing or freeze_blocks beyond the
// model's blocks.
FreezeReport apply_freeze(torch::nn::Module& module, const TrainerOptions& options,
                          const std::vector<std::string>& blocks);

// BatchNorm layers whose parameters are all frozen back to eval mode (running statistics fixed).
void keep_frozen_batchnorm_eval(torch::nn::Module& module);

}  // namespace glassbox::train
