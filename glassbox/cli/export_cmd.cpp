// glassbox export: flags -> app::run_export -> a table of the files written.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "glassbox/app/export.h"
#include "glassbox/cli/commands.h"

namespace glassbox::cli {

namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string config;
  std::vector<std::string> sets;
  std::string format = "torchscript";
  std::string out;
  std::string name;
  std::int64_t version = 1;
  std::int32_t max_batch_size = 64;
  std::uint64_t max_queue_delay_us = 100;
  std::int32_t instances = 1;
  bool gpu = false;
  std::string platform = "pytorch_libtorch";
  std::string image_input = "encoded";
  bool trainable_only = false;
  bool json = false;
  bool profile = true;
  std::int64_t profile_samples = 20000;
};

}  // namespace

void add_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd =
      app.add_subcommand("export", "A checkpoint as TorchScript, ONNX, a Triton-style model repository, or weights");
  cmd->add_option("--checkpoint", a->checkpoint, "checkpoint directory, e.g. runs/cnn/checkpoints/last.ckpt");
  cmd->add_option("config", a->config,
                  "instead of --checkpoint: a TOML config whose model to export, untrained or from model.init_from");
  cmd->add_option("--set", a->sets, "with CONFIG: override a key, e.g. --set model.init_from=weights.safetensors");
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
  cmd->add_option("--platform", a->platform,
                  "repository: pytorch_libtorch (preprocessed FP32 input, as Triton serves it) or glassbox (raw input: "
                  "the server applies the contract's preprocessing and answers probabilities)")
      ->check(CLI::IsMember({"pytorch_libtorch", "glassbox"}));
  cmd->add_option("--image-input", a->image_input,
                  "repository, platform glassbox, a run on image files: encoded (the input is the JPEG/PNG file's "
                  "bytes, decoded and transformed by the server as in training) or pixels (uint8 [C, H, W])")
      ->check(CLI::IsMember({"encoded", "pixels"}))
      ->capture_default_str();
  cmd->add_flag("--trainable-only", a->trainable_only,
                "weights: only the tensors that were trained (trainer.freeze left out)");
  cmd->add_flag("--profile,!--no-profile", a->profile,
                "repository: write the model's reference profile (its validation split through the model) beside it, "
                "which glassbox serve watches the served traffic against (default: on)");
  cmd->add_option("--profile-samples", a->profile_samples, "repository: validation samples in the profile, at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "print what was written as JSON");
  cmd->footer(
      "Every model file gets its contract (input shape, preprocessing, labels) as a .json beside it.\n"
      "Examples:\n"
      "  glassbox export --checkpoint runs/cnn/checkpoints/last.ckpt --format torchscript --out model.pt\n"
      "  glassbox export --checkpoint runs/cnn/checkpoints/last.ckpt --format onnx --out model.onnx\n"
      "  glassbox export --checkpoint runs/cnn/checkpoints/last.ckpt --format repository --out models --name "
      "fashion_cnn --version 2\n"
      "  glassbox export --checkpoint runs/ft/checkpoints/last.ckpt --format weights --trainable-only\n"
      "  glassbox export --checkpoint runs/adult/checkpoints/last.ckpt --format repository --platform glassbox\n"
      "  glassbox export configs/cnn.toml --set model.init_from=runs/cnn/checkpoints/last.ckpt --format onnx");
  cmd->callback([a, cmd] {
    app::ExportJob job;
    job.checkpoint = a->checkpoint;
    job.config_file = a->config;
    job.config_given = cmd->count("config") > 0;
    job.overrides = a->sets;
    job.format = a->format;
    job.out = a->out;
    exporter::ExportRequest& r = job.request;
    r.name = a->name;
    r.version = a->version;
    r.trainable_only = a->trainable_only;
    r.repository.max_batch_size = a->max_batch_size;
    r.repository.max_queue_delay_microseconds = a->max_queue_delay_us;
    r.repository.instance_count = a->instances;
    r.repository.instance_kind = a->gpu ? exporter::InstanceKind::kGpu : exporter::InstanceKind::kCpu;
    r.repository.raw_input = a->platform == "glassbox";
    r.repository.encoded_images = a->image_input == "encoded";
    job.profile = a->profile;
    job.profile_job.max_samples = a->profile_samples;
    const app::ExportOutcome outcome = app::run_export(job);
    if (a->json) {
      std::cout << outcome.to_json().dump(2) << "\n";
      return;
    }
    for (const auto& f : outcome.formats) {
      const exporter::ExportResult& res = f.result;
      std::cout << f.format << ":\n";
      for (const auto& x : res.artefacts)
        std::cout << "  " << std::left << std::setw(12) << x.kind << std::right << std::setw(10)
                  << exporter::human_bytes(x.bytes) << "  " << x.path.string() << "\n";
      if (f.format == "weights" && r.trainable_only) {
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
      if (!f.profile.empty())
        std::cout << "  profile:    " << f.profile_samples << " validation samples in " << f.profile.string()
                  << " (glassbox serve monitors the model against it)\n";
      if (!f.profile_note.empty()) std::cout << "  no profile: " << f.profile_note << "\n";
    }
  });
}

}  // namespace glassbox::cli
