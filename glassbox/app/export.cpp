// Tested by app_test (ExportWorkflow, workflows_test.cpp), cli_test (Export.*) and serve_raw_platform.
#include "glassbox/app/export.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/app/inference.h"
#include "glassbox/app/init_weights.h"
#include "glassbox/app/run.h"
#include "glassbox/base/error.h"
#include "glassbox/base/progress.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/export/repository.h"
#include "glassbox/nn/blocks.h"
#include "glassbox/train/checkpoint.h"
#include "glassbox/train/freeze.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

fs::path default_out(const fs::path& dir, const std::string& format, bool trainable_only) {
  if (format == "torchscript") return dir / "model.pt";
  if (format == "onnx") return dir / "model.onnx";
  if (format == "weights") return dir / (trainable_only ? "trainable.safetensors" : "model.safetensors");
  if (format == "repository") return dir / "repository";
  return dir;
}

// The model a config builds, with its model.init_from weights: the data module is set up once for
// the shapes and normalisation (a checkpoint carries them; a config does not).
LoadedModel model_of_config(const ExportJob& job) {
  LoadedModel m;
  m.config = train::load_run_config(job.config_file, job.overrides);
  m.data = std::make_shared<train::StandardDataModule>(m.config.data);
  m.data->setup();
  m.info = m.data->info();
  m.scale = data_scale(m.config.data.source);
  m.model = nn::make_model(m.config.model, nn::ModelShape{m.info.sample_shape, m.info.num_classes});
  if (!m.config.model.init_from.empty()) load_initial_weights(*m.model->module(), m.config.model);
  m.model->module()->eval();
  m.outputs_probabilities = m.config.model.name == "mlp" && m.config.model.mlp.output == nn::MlpOutput::kSoftmax;
  m.run_dir = fs::path("export") / m.config.name;
  return m;
}

// The reference profile in the repository's version folder, or the note saying why there is none.
void add_profile(LoadedModel& m, const exporter::ExportRequest& r, const nn::ModelContract& contract,
                 const ExportJob& job, ExportedFormat& e) {
  if (m.task != TaskKind::kClassification) {
    e.profile_note = "the monitor watches classifiers; this model is " + std::string(name_of(m.task));
    return;
  }
  const std::string name = r.name.empty() ? contract.name : r.name;
  const fs::path model_dir = r.out / name;
  try {
    const exporter::RepositoryEntry entry = exporter::read_model_repository_entry(model_dir);
    ProfileJob pj = job.profile_job;
    pj.profile_input = !r.repository.raw_input;
    const ProfileOutcome p = write_model_profile(m, model_dir / std::to_string(r.version), entry.config.input(0).name(),
                                                 entry.config.output(0).name(), pj);
    e.profile = p.dir;
    e.profile_samples = p.samples;
  } catch (const Error& err) {
    e.profile_note = err.one_line();
  } catch (const std::exception& err) {
    e.profile_note = std::string("the validation data could not be read: ") + err.what();
  }
}

}  // namespace

nlohmann::json ExportOutcome::to_json() const {
  nlohmann::json report = nlohmann::json::array();
  for (const auto& f : formats) {
    const auto& res = f.result;
    nlohmann::json j{{"format", f.format}, {"parameters", res.parameters}, {"all_parameters", res.all_parameters}};
    if (res.max_abs_difference >= 0) j["verified_max_abs_difference"] = res.max_abs_difference;
    if (res.full_bytes) j["full_bytes"] = res.full_bytes;
    for (const auto& a : res.artefacts)
      j["artefacts"].push_back({{"kind", a.kind}, {"path", a.path.string()}, {"bytes", a.bytes}});
    j["bytes"] = f.bytes;
    if (f.format == "repository") {
      j["repository"] = f.repository.string();
      if (!f.profile.empty()) j["profile"] = {{"dir", f.profile.string()}, {"samples", f.profile_samples}};
      if (!f.profile_note.empty()) j["profile_note"] = f.profile_note;
    }
    report.push_back(j);
  }
  return report;
}

ExportOutcome run_export(const ExportJob& job) {
  GB_CHECK(job.checkpoint.empty() || !job.config_given, InvalidArgument,
           "--checkpoint and CONFIG are mutually exclusive",
           "export a trained checkpoint (--checkpoint), or the model a config builds (CONFIG), not both");
  GB_CHECK(
      !job.checkpoint.empty() || job.config_given, InvalidArgument, "nothing to export",
      "pass --checkpoint runs/NAME/checkpoints/last.ckpt, or a CONFIG whose model (and model.init_from) to export");
  GB_CHECK(job.checkpoint.empty() || job.overrides.empty(), InvalidArgument, "--set applies to CONFIG only",
           "a checkpoint carries its own configuration; drop --set");
  const std::vector<std::string> known{"torchscript", "onnx", "repository", "weights", "all"};
  GB_CHECK(std::find(known.begin(), known.end(), job.format) != known.end(), InvalidArgument,
           "unknown export format '" << job.format << "'", "use torchscript, onnx, repository, weights or all");
  GB_CHECK(!job.request.repository.raw_input || job.format == "repository" || job.format == "all", InvalidArgument,
           "--platform glassbox applies to a model repository, not to --format " << job.format,
           "use --format repository (or all)");
  LoadedModel m = job.config_given ? model_of_config(job) : load_checkpoint_for_inference(job.checkpoint, "cpu");
  if (job.request.trainable_only) {
    for (auto& p : m.model->module()->named_parameters()) p.value().set_requires_grad(true);
    train::apply_freeze(*m.model->module(), m.config.trainer, nn::parameter_blocks(*m.model));
  }
  const nn::ModelContract contract = contract_for_checkpoint(m);
  std::vector<std::string> formats{job.format};
  if (job.format == "all") formats = {"torchscript", "onnx", "repository"};
  // A checkpoint's exports go into its run directory; a config's into export/<run.name>.
  const fs::path base = job.config_given ? m.run_dir : m.run_dir / "export";
  const fs::path out_dir = job.out.empty() ? base : job.out;
  ExportOutcome outcome;
  ProgressBar bar(std::cerr, true);  // each format traces, writes and verifies the model (seconds each)
  bar.set_unit("formats");
  bar.start("exporting", static_cast<std::int64_t>(formats.size()));
  for (const auto& f : formats) {
    bar.update(static_cast<std::int64_t>(outcome.formats.size()), f, 0.0);
    exporter::ExportRequest r = job.request;
    r.format = f;
    if (job.format == "all") {
      r.out = out_dir / default_out(out_dir, f, false).filename();
    } else {
      r.out = job.out.empty() ? default_out(base, f, job.request.trainable_only) : job.out;
    }
    ExportedFormat e;
    e.format = f;
    e.result = exporter::export_model(*m.model, contract, r);
    for (const auto& a : e.result.artefacts) e.bytes += a.bytes;
    if (f == "repository") {
      e.repository = r.out;
      if (job.profile) add_profile(m, r, contract, job, e);
    }
    outcome.formats.push_back(std::move(e));
  }
  bar.finish(fmt::format("{}", fmt::join(formats, ", ")));
  return outcome;
}

}  // namespace glassbox::app
