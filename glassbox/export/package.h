// export_model: one call from a model and its contract to the deployable files.
//
//   ExportRequest r; r.format = "onnx"; r.out = "runs/cnn/export/model.onnx";
//   ExportResult res = export_model(*model, contract, r);
//   for (const auto& a : res.artefacts) std::cout << a.path << " " << a.bytes << "\n";
//
// Formats and files (each written atomically; a failed export leaves what was there intact):
//   torchscript  OUT (model.pt; the contract embedded as extra/contract.json) + OUT's stem .json
//   onnx         OUT (model.onnx, opset 17, dynamic batch) + OUT's stem .json
//   repository   OUT/NAME/config.pbtxt, OUT/NAME/VERSION/model.pt, labels.txt, contract.json
//   weights      OUT (safetensors): every parameter and buffer, or with trainable_only the
//                parameters that require gradients and the buffers of the layers that own them
//                (a fine-tuned head without its frozen backbone; load it over the base weights).
// The model is exported in evaluation mode; its own mode is restored afterwards.
// Thread safety: none; export from one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "glassbox/export/model_config.h"
#include "glassbox/nn/contract.h"
#include "glassbox/nn/model.h"

namespace glassbox::exporter {

struct ExportRequest {
  std::string format = "torchscript";  // torchscript | onnx | repository | weights
  std::filesystem::path out;
  std::string name;               // repository model name; empty: the contract's name
  std::int64_t version = 1;       // repository version
  ModelConfigOptions repository;  // config.pbtxt: batching, instance groups, versions
  bool trainable_only = false;    // weights only
  bool verify = true;             // reload the export and compare it with the model on a random batch
};

struct Artefact {
  std::string kind;  // "torchscript", "onnx", "contract", "config", "labels", "weights"
  std::filesystem::path path;
  std::uintmax_t bytes = 0;
};

struct ExportResult {
  std::vector<Artefact> artefacts;
  std::int64_t parameters = 0;      // parameters in the file (all, or trainable only)
  std::int64_t all_parameters = 0;  // parameters of the model
  std::uintmax_t full_bytes = 0;    // weights only: the size with every tensor, for comparison
  double max_abs_difference = -1;   // verification (TorchScript reloaded with torch::jit::load); -1: not run
};

ExportResult export_model(nn::Model& model, const nn::ModelContract& contract, const ExportRequest& request);

// "model.pt" -> "model.json": where a model file's contract sidecar lives.
std::filesystem::path contract_path_for(const std::filesystem::path& model_file);

// "12.3 MB"
std::string human_bytes(std::uintmax_t bytes);

}  // namespace glassbox::exporter
