// glassbox export
#include <fnmatch.h>

#include <iomanip>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/cli/commands.h"
#include "glassbox/export/package.h"
#include "glassbox/train/inference.h"

namespace glassbox::cli {

namespace fs = std::filesystem;

nn::ModelContract contract_for_checkpoint(const train::LoadedModel& m) {
  nn::ModelContract c;
  // The run directory's name (runs/<run.name> unless --run-dir chose another).
  c.name = m.run_dir.filename().string();
  if (c.name.empty()) c.name = m.config.model.name;
  for (char& ch : c.name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.') ch = '_';
  c.architecture = m.config.model.name;
  c.input_shape = m.info.sample_shape;
  c.layout = c.input_shape.size() == 3 ? "NCHW" : "NC";
  c.num_classes = m.info.num_classes;
  c.output_kind = m.outputs_probabilities ? "probabilities" : "logits";
  c.output_name = m.outputs_probabilities ? "probabilities" : "logits";
  // What the data module does to a raw sample: uint8 pixels are scaled to [0, 1] first.
  c.scale = train::data_scale(m.config.data.source);
  c.mean = m.info.mean;
  c.std = m.info.std;
  if (c.layout == "NC") {
    c.channel_order = "none";
  } else {
    // glassbox's image data (IDX, npy) is read as it is stored; 3 channels are taken as RGB.
    c.channel_order = c.input_shape[0] == 1 ? "gray" : c.input_shape[0] == 3 ? "RGB" : "none";
  }
  c.labels = m.info.class_names;
  if (static_cast<std::int64_t>(c.labels.size()) != c.num_classes) c.labels.clear();
  return c;
}

namespace {

// The run's trainer.freeze patterns, as the Trainer applied them, so --trainable-only keeps
// exactly the tensors that were trained.
void apply_freeze(train::LoadedModel& m) {
  for (auto& p : m.model->module()->named_parameters()) {
    bool frozen = false;
    for (const auto& pattern : m.config.trainer.freeze)
      frozen = frozen || fnmatch(pattern.c_str(), p.key().c_str(), 0) == 0;
    p.value().set_requires_grad(!frozen);
  }
}

struct ExportArgs {
  std::string checkpoint;
  std::string format = "torchscript";
  std::string out;
  std::string name;
  std::int64_t version = 1;
  std::int32_t max_batch_size = 64;
  std::uint64_t max_queue_delay_us = 100;
  std::int32_t instances = 1;
  bool gpu = false;
  bool trainable_only = false;
  bool json = false;
};

fs::path default_out(const fs::path& run_dir, const std::string& format, bool trainable_only) {
  const fs::path dir = run_dir / "export";
  if (format == "torchscript") return dir / "model.pt";
  if (format == "onnx") return dir / "model.onnx";
  if (format == "weights") return dir / (trainable_only ? "trainable.safetensors" : "model.safetensors");
  if (format == "repository") return dir / "repository";
  return dir;
}

}  // namespace

nlohmann::json run_export(const fs::path& checkpoint, const std::string& format, const fs::path& out_arg,
                          const exporter::ExportRequest& base, bool print) {
  train::LoadedModel m = train::load_checkpoint_for_inference(checkpoint, "cpu");
  if (base.trainable_only) apply_freeze(m);
  nn::ModelContract contract = contract_for_checkpoint(m);
  std::vector<std::string> formats{format};
  if (format == "all") formats = {"torchscript", "onnx", "repository"};
  const fs::path out_dir = out_arg.empty() ? m.run_dir / "export" : out_arg;
  nlohmann::json report = nlohmann::json::array();
  for (const auto& f : formats) {
    exporter::ExportRequest r = base;
    r.format = f;
    if (format == "all") {
      r.out = default_out(m.run_dir, f, false);
      r.out = out_dir / r.out.filename();
    } else {
      r.out = out_arg.empty() ? default_out(m.run_dir, f, base.trainable_only) : out_arg;
    }
    const exporter::ExportResult res = exporter::export_model(*m.model, contract, r);
    nlohmann::json j{{"format", f}, {"parameters", res.parameters}, {"all_parameters", res.all_parameters}};
    if (res.max_abs_difference >= 0) j["verified_max_abs_difference"] = res.max_abs_difference;
    if (res.full_bytes) j["full_bytes"] = res.full_bytes;
    std::uintmax_t total = 0;
    for (const auto& a : res.artefacts) {
      j["artefacts"].push_back({{"kind", a.kind}, {"path", a.path.string()}, {"bytes", a.bytes}});
      total += a.bytes;
    }
    j["bytes"] = total;
    if (f == "repository") j["repository"] = r.out.string();
    report.push_back(j);
    if (print) {
      std::cout << f << ":\n";
      for (const auto& a : res.artefacts)
        std::cout << "  " << std::left << std::setw(12) << a.kind << std::right << std::setw(10)
                  << exporter::human_bytes(a.bytes) << "  " << a.path.string() << "\n";
      if (f == "weights" && base.trainable_only) {
        const std::uintmax_t kept = res.artefacts.front().bytes;
        std::cout << "  trainable only: " << res.parameters << " of " << res.all_parameters << " parameters, "
                  << exporter::human_bytes(kept) << " instead of " << exporter::human_bytes(res.full_bytes) << " ("
                  << std::setprecision(2)
                  << 100.0 * static_cast<double>(kept) /
                         static_cast<double>(std::max<std::uintmax_t>(1, res.full_bytes))
                  << " %)\n"
                  << std::setprecision(6);
      }
      if (res.max_abs_difference >= 0)
        std::cout << "  verified: reloaded TorchScript matches the model within " << res.max_abs_difference << "\n";
    }
  }
  return report;
}

void add_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd =
      app.add_subcommand("export", "A checkpoint as TorchScript, ONNX, a Triton-style model repository, or weights");
  cmd->add_option("--checkpoint", a->checkpoint, "checkpoint directory, e.g. runs/cnn/checkpoints/last.ckpt")
      ->required();
  cmd->add_option("--format", a->format, "torchscript | onnx | repository | weights | all (the first three)")
      ->check(CLI::IsMember({"torchscript", "onnx", "repository", "weights", "all"}));
  cmd->add_option("--out", a->out,
                  "file (torchscript, onnx, weights) or folder (repository, all); default: RUN_DIR/export/...");
  cmd->add_option("--name", a->name, "repository: the model's name (default: the run's name)");
  cmd->add_option("--version", a->version, "repository: the version folder to write (replaces it atomically)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-batch-size", a->max_batch_size, "repository: config.pbtxt max_batch_size")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-queue-delay-us", a->max_queue_delay_us,
                  "repository: dynamic_batching max_queue_delay_microseconds");
  cmd->add_option("--instances", a->instances, "repository: instance_group count")->check(CLI::PositiveNumber);
  cmd->add_flag("--gpu", a->gpu, "repository: instance_group kind KIND_GPU (default KIND_CPU)");
  cmd->add_flag("--trainable-only", a->trainable_only,
                "weights: only the tensors that were trained (trainer.freeze left out)");
  cmd->add_flag("--json", a->json, "print what was written as JSON");
  cmd->footer(
      "Every model file gets its contract (input shape, preprocessing, labels) as a .json beside it.\n"
      "Examples:\n"
      "  glassbox export --checkpoint runs/cnn/checkpoints/last.ckpt --format torchscript --out model.pt\n"
      "  glassbox export --checkpoint runs/cnn/checkpoints/last.ckpt --format onnx --out model.onnx\n"
      "  glassbox export --checkpoint runs/cnn/checkpoints/last.ckpt --format repository --out models --name "
      "fashion_cnn --version 2\n"
      "  glassbox export --checkpoint runs/ft/checkpoints/last.ckpt --format weights --trainable-only");
  cmd->callback([a] {
    exporter::ExportRequest r;
    r.name = a->name;
    r.version = a->version;
    r.trainable_only = a->trainable_only;
    r.repository.max_batch_size = a->max_batch_size;
    r.repository.max_queue_delay_microseconds = a->max_queue_delay_us;
    r.repository.instance_count = a->instances;
    r.repository.instance_kind = a->gpu ? exporter::InstanceKind::kGpu : exporter::InstanceKind::kCpu;
    const nlohmann::json j = run_export(a->checkpoint, a->format, a->out, r, !a->json);
    if (a->json) std::cout << j.dump(2) << "\n";
  });
}

}  // namespace glassbox::cli
