// Checkpoints: one directory per checkpoint, written atomically.
//
//   epoch=3-step=1290.ckpt/
//     model.safetensors      parameters and buffers by module path (Python: safetensors.torch.load_file)
//     optimizer.safetensors  optimiser slots ("<param>.exp_avg", ...)
//     extra.safetensors      RNG states and other binary state
//     state.json             epoch, global step, sampler position, optimiser/scheduler/callback
//                            state, the config, glassbox and LibTorch versions
//
//   write_checkpoint(dir, contents);           // built as a temp dir, then swapped in
//   Checkpoint c = read_checkpoint(dir);       // validates every file
//   load_module_state(module, c.model, c.state.value("trainable_only", false));
//
// A failed write leaves the previous checkpoint intact. Loading into another architecture is a
// FailedPrecondition error naming the tensors that do not fit.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "glassbox/core/safetensors.h"

namespace glassbox::train {

struct Checkpoint {
  std::filesystem::path path;
  SafetensorsFile model;
  SafetensorsFile optimizer;
  SafetensorsFile extra;
  nlohmann::json state;
};

constexpr int kCheckpointFormat = 1;

// Parameters and buffers (all, or only trainable parameters) keyed by module path.
TensorMap module_state(const torch::nn::Module& module, bool trainable_only);
// Copies tensors into the module. With `partial`, missing entries are allowed for frozen
// parameters and buffers (a trainable-only checkpoint). Names every mismatch in the error.
void load_module_state(torch::nn::Module& module, const SafetensorsFile& weights, bool partial);

void write_checkpoint(const std::filesystem::path& dir, const Checkpoint& contents);
Checkpoint read_checkpoint(const std::filesystem::path& dir);

// What a checkpoint lacks to resume training exactly, one entry per missing part ("optimiser
// state (optimizer.safetensors: 4 of 8 tensors)", "RNG state", ...); empty when it can.
std::vector<std::string> missing_for_resume(const Checkpoint& c);

}  // namespace glassbox::train
