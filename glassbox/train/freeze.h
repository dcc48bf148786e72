// trainer.freeze: glob patterns over parameter names ("features.*", "layer[12].*") whose
// parameters are not trained. The one matcher behind the Trainer, export's --trainable-only and
// anything else that must know which parameters a run trained.
//
//   std::vector<std::string> unused = freeze_matching(module, {"features.*"});
//   if (is_frozen("features.0.weight", patterns)) ...
//
// Thread safety: reentrant (fnmatch).
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>

namespace glassbox::train {

// True when `name` matches one of the patterns (shell globs, as fnmatch without flags).
bool is_frozen(const std::string& name, const std::vector<std::string>& patterns);

// Sets requires_grad(false) on every parameter whose name matches a pattern; returns the patterns
// that matched no parameter (the caller decides whether that is an error).
std::vector<std::string> freeze_matching(torch::nn::Module& module, const std::vector<std::string>& patterns);

}  // namespace glassbox::train
