// TorchScript export without Python: a lowered model (graph.h) becomes a torch::jit::Module whose
// submodules mirror the C++ module tree (same names, so state_dict() keys equal glassbox's
// safetensors names) and whose forward methods are TorchScript source generated per module and
// compiled by LibTorch's own TorchScript compiler. The file loads with Python's torch.jit.load
// and with torch::jit::load.
//
//   torch::jit::Module m = to_torchscript(lower_model(*model->module(), "cnn"), *model->module());
//   std::cout << torchscript_source(graph);                      // the generated forward of each module
//   save_torchscript(m, "model.pt", {{"contract.json", json}});   // atomic
//
// Tensors are copied to the CPU (float32 as trained); the module is in eval mode. BatchNorm and
// Dropout use their inference behaviour whatever the mode.
// Thread safety: none; export from one thread.
#pragma once

#include <filesystem>
#include <string>
#include <unordered_map>

#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include "glassbox/export/graph.h"

namespace glassbox::exporter {

torch::jit::Module to_torchscript(const ExportGraph& graph, const torch::nn::Module& module);

// The generated forward source of every module, for docs and debugging: "path: code".
std::string torchscript_source(const ExportGraph& graph);

// The file's bytes (what save_torchscript writes), e.g. to check them before writing.
std::string serialize_torchscript(const torch::jit::Module& module,
                                  const std::unordered_map<std::string, std::string>& extra_files = {});

// Saves atomically (temp file + rename); extra_files land in the archive's extra/ folder
// (Python: torch.jit.load(f, _extra_files={"contract.json": ""})).
void save_torchscript(const torch::jit::Module& module, const std::filesystem::path& path,
                      const std::unordered_map<std::string, std::string>& extra_files = {});

}  // namespace glassbox::exporter
