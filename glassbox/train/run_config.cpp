#include "glassbox/train/run_config.h"

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/train/eval_metrics.h"

namespace glassbox::train {

void RunConfig::visit(FieldVisitor& v) {
  v.section("run", [this](FieldVisitor& s) { s.field("name", name, "run directory name under runs/"); });
  v.section("data", [this](FieldVisitor& s) { data.visit(s); });
  v.section("model", [this](FieldVisitor& s) { model.visit(s); });
  v.section("loss", [this](FieldVisitor& s) { loss.visit(s); });
  v.section("optim", [this](FieldVisitor& s) { optim.visit(s); });
  v.section("scheduler", [this](FieldVisitor& s) { scheduler.visit(s); });
  v.section("trainer", [this](FieldVisitor& s) { trainer.visit(s); });
  v.section("checkpoint", [this](FieldVisitor& s) { checkpoint.visit(s); });
  v.section("early_stopping", [this](FieldVisitor& s) { early_stopping.visit(s); });
  v.section("ema", [this](FieldVisitor& s) { ema.visit(s); });
  v.section("swa", [this](FieldVisitor& s) { swa.visit(s); });
  v.section("diagnostics", [this](FieldVisitor& s) { diagnostics.visit(s); });
}

void RunConfig::validate() const {
  GB_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..", InvalidArgument,
           "run.name = \"" << name << "\" is not a valid directory name", "use letters, digits, - and _");
  data.validate();
  model.validate();
  loss.validate();
  optim.validate();
  scheduler.validate();
  trainer.validate();
  checkpoint.validate();
  early_stopping.validate();
  ema.validate_options();
  swa.validate();
  GB_CHECK(!(ema.enabled && swa.enabled), InvalidArgument, "ema.enabled and swa.enabled are both set",
           "average the weights one way: EMA (every step) or SWA (every epoch from swa.epoch_start)");
  diagnostics.validate();
  nn::check_loss_for_task(loss, data.source.task);
  // A monitor that keeps the worst model is a silent mistake: the mode must fit the metric.
  const auto check_mode = [](const std::string& section, const std::string& monitor, MetricMode mode) {
    if (monitor.empty()) return;
    const bool higher = higher_is_better(monitor);
    GB_CHECK(higher == (mode == MetricMode::kMax), InvalidArgument,
             section << ".monitor = \"" << monitor << "\" is better when " << (higher ? "higher" : "lower") << ", but "
                     << section << ".mode = \"" << name_of(mode) << "\" keeps the " << (higher ? "lowest" : "highest"),
             "set " + section + ".mode = \"" + (higher ? "max" : "min") + "\"");
  };
  check_mode("checkpoint", checkpoint.monitor, checkpoint.mode);
  check_mode("early_stopping", early_stopping.monitor, early_stopping.mode);
}

void DiagnosticsOptions::validate() const {
  GB_CHECK(probe_every_n_steps >= 0, InvalidArgument,
           "diagnostics.probe_every_n_steps must be >= 0, got " << probe_every_n_steps, "use 0 (off) or e.g. 50");
  GB_CHECK(histogram_every_n_steps >= 1, InvalidArgument,
           "diagnostics.histogram_every_n_steps must be >= 1, got " << histogram_every_n_steps, "use e.g. 500");
  GB_CHECK(dead_after_probes >= 1, InvalidArgument,
           "diagnostics.dead_after_probes must be >= 1, got " << dead_after_probes, "use e.g. 5");
  GB_CHECK(grad_norm_low >= 0 && grad_norm_high > grad_norm_low, InvalidArgument,
           "diagnostics.grad_norm_low (" << grad_norm_low << ") must be >= 0 and below grad_norm_high ("
                                         << grad_norm_high << ")",
           "use 0.01 and 100");
  GB_CHECK(images >= 0 && images <= 256, InvalidArgument, "diagnostics.images must be in [0, 256], got " << images,
           "use 16");
}

std::string RunConfig::to_toml_text() { return glassbox::to_toml(visit_fn(*this)); }

RunConfig parse_run_config(std::string_view text, std::string_view source, const std::vector<std::string>& overrides) {
  RunConfig cfg;
  load_config(text, source, overrides, visit_fn(cfg));
  cfg.validate();
  cfg.loss.name = nn::resolve_loss(cfg.loss.name, cfg.data.source.task);  // the stored config names it
  return cfg;
}

RunConfig load_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse_run_config("", "defaults", overrides);
  GB_CHECK(std::filesystem::exists(path), NotFound, "config file " << path.string() << " does not exist",
           "pass a TOML file, e.g. configs/quickstart.toml");
  return parse_run_config(read_file(path), path.string(), overrides);
}

}  // namespace glassbox::train
