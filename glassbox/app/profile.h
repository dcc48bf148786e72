// The reference profile of a trained model: what the server's monitor compares served traffic
// with. Computed on the validation split through the model, in the space the served model's
// input has (the data module's normalised tensors), written beside the model in a repository's
// version folder (profile.json + profile.npy, glassbox/monitor/profile.h).
//
//   LoadedModel m = load_checkpoint_for_inference(ckpt, "cpu");
//   ProfileOutcome p = write_model_profile(m, repo / "fashion" / "1", "INPUT__0", "OUTPUT__0", {});
//
// Classification models only (the monitor watches class confidences); the input is profiled
// when the served input is a tensor (a repository of encoded images is profiled on its outputs
// alone). Errors: NotFound when the split is not at hand, InvalidArgument for other tasks.
// Thread safety: one call per LoadedModel at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "glassbox/app/inference.h"

namespace glassbox::app {

struct ProfileJob {
  std::string split = "val";
  std::int64_t max_samples = 20000;  // the first N of the split (a validation split is already shuffled)
  std::int64_t batch_size = 512;
  bool profile_input = true;  // false: the served input is not a tensor (encoded images)
};

struct ProfileOutcome {
  std::filesystem::path dir;
  std::int64_t samples = 0;
  std::vector<std::string> features;  // the monitored input features
};

ProfileOutcome write_model_profile(LoadedModel& m, const std::filesystem::path& dir, const std::string& input_name,
                                   const std::string& output_name, const ProfileJob& job);

}  // namespace glassbox::app
