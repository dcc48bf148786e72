// Tested by train_test (the Trainer's trainer.freeze tests) and cli_test
// (Export.TrainableOnlyWeightsLeaveTheFrozenLayersOut).
#include "glassbox/train/freeze.h"

#include <fnmatch.h>

namespace glassbox::train {

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

}  // namespace glassbox::train
