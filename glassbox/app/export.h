// `glassbox export` as a call: a checkpoint's model (or the model a config builds, with its
// model.init_from weights when given) as TorchScript, ONNX, a Triton-style model repository or
// safetensors weights, each with its contract. A checkpoint carries its contract, so no training
// data is read.
//
//   ExportJob j; j.checkpoint = "runs/cnn/checkpoints/last.ckpt"; j.format = "all";
//   ExportOutcome o = run_export(j);     // RUN_DIR/export/{model.pt, model.onnx, repository/}
//   for (const auto& f : o.formats) std::cout << f.format << " " << f.bytes << "\n";
//
//   ExportJob c; c.config_file = "configs/cnn.toml"; c.format = "onnx"; c.out = "cnn.onnx";
//   run_export(c);                       // the config's model, untrained or from model.init_from
//
// Formats: torchscript | onnx | repository | weights | all (the first three). out: a file
// (torchscript, onnx, weights) or a folder (repository, all); default RUN_DIR/export/... for a
// checkpoint, export/<name>/... for a config. request.trainable_only keeps only the tensors the run
// trained (its trainer.freeze patterns). A repository of a classifier gets its reference profile
// (profile.json + profile.npy in the version folder, app/profile.h) unless job.profile is false. Errors:
// InvalidArgument/NotFound naming the flag. Thread safety: one export per thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/app/profile.h"
#include "glassbox/export/package.h"

namespace glassbox::app {

struct ExportJob {
  std::filesystem::path checkpoint;   // a checkpoint, or:
  std::filesystem::path config_file;  // a config (with `config_given`; empty path: the defaults)
  bool config_given = false;
  std::vector<std::string> overrides;  // with a config: --set values
  std::string format = "torchscript";
  std::filesystem::path out;
  exporter::ExportRequest request;  // name, version, repository settings, trainable_only, platform
  // A repository's version folder also gets the model's reference profile (its validation split
  // through the model) for the server's monitor; when the data is not at hand the export goes on
  // without it and says why (ExportedFormat::profile_note).
  bool profile = true;
  ProfileJob profile_job;
};

struct ExportedFormat {
  std::string format;
  exporter::ExportResult result;
  std::filesystem::path repository;  // for "repository"
  std::uintmax_t bytes = 0;          // all artefacts
  std::filesystem::path profile;     // the profile's folder (repository), empty when none was written
  std::int64_t profile_samples = 0;
  std::string profile_note;  // why no profile was written
};

struct ExportOutcome {
  std::vector<ExportedFormat> formats;
  nlohmann::json to_json() const;
};

ExportOutcome run_export(const ExportJob& job);

}  // namespace glassbox::app
