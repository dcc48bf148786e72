// A trained model back from its checkpoint, with the data it was trained on: what `glassbox
// eval` and `glassbox explain` start from.
//
//   LoadedModel m = load_checkpoint_for_inference("runs/quickstart/checkpoints/last.ckpt", "cpu");
//   at::Tensor probs = predict_probabilities(m, *m.data->test_dataset(), 512);   // [N, K] float64
//
// The checkpoint's state.json carries the run's configuration: the data module is set up from it
// (same files, same validation split, same normalisation) and the model built from it, then the
// weights are loaded (a checkpoint of another architecture is an error naming the tensors that do
// not fit) and the model put in evaluation mode. run_dir is the run directory the checkpoint
// lives in (<run>/checkpoints/<name>.ckpt), or the checkpoint's parent when it is elsewhere.
// Thread safety: one LoadedModel per thread.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "glassbox/nn/model.h"
#include "glassbox/train/datamodule.h"
#include "glassbox/train/run_config.h"

namespace glassbox::train {

struct LoadedModel {
  std::filesystem::path checkpoint;
  std::filesystem::path run_dir;
  RunConfig config;
  std::unique_ptr<StandardDataModule> data;
  DataInfo info;
  std::unique_ptr<nn::Model> model;
  c10::Device device = c10::Device(c10::kCPU);
  bool outputs_probabilities = false;  // the model ends in softmax (model.mlp.output = "softmax")
  std::int64_t global_step = 0;
};

LoadedModel load_checkpoint_for_inference(const std::filesystem::path& checkpoint, const std::string& device = "cpu");

// The split by name: "test", "val" or "train" (an error names the ones that exist).
std::shared_ptr<const data::Dataset> split_dataset(const LoadedModel& m, const std::string& split);

// Class probabilities of every sample of a dataset, in order: [N, K] float64 on the CPU (softmax
// of the logits, or the outputs themselves for a model that ends in softmax).
at::Tensor predict_probabilities(LoadedModel& m, const data::Dataset& dataset, std::int64_t batch_size);

}  // namespace glassbox::train
