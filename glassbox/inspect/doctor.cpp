#include "glassbox/inspect/doctor.h"

#include <algorithm>
#include <ostream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/seed.h"
#include "glassbox/inspect/doctor_internal.h"
#include "glassbox/nn/registry.h"

namespace glassbox::inspect {

namespace {

bool before(const Finding& a, const Finding& b) {
  if (a.severity != b.severity) return static_cast<int>(a.severity) < static_cast<int>(b.severity);
  return a.confidence > b.confidence;
}

}  // namespace

nlohmann::json Finding::to_json() const {
  nlohmann::json acts = nlohmann::json::array();
  for (const auto& a : actions) acts.push_back({{"setting", a.setting}, {"direction", a.direction}});
  return {{"id", id},
          {"severity", std::string(name_of(severity))},
          {"confidence", confidence},
          {"where", where},
          {"evidence", evidence},
          {"fix", fix},
          {"because_of", because_of},
          {"actions", acts}};
}

void DoctorReport::sort() {
  // Causes stay above the symptoms they explain; otherwise by severity, then confidence.
  std::vector<Finding> ordered;
  std::vector<bool> used(findings.size(), false);
  while (ordered.size() < findings.size()) {
    std::ptrdiff_t pick = -1;
    for (std::size_t i = 0; i < findings.size(); ++i) {
      if (used[i]) continue;
      const bool ready =
          std::all_of(findings[i].because_of.begin(), findings[i].because_of.end(), [&](const std::string& c) {
            return std::none_of(findings.begin(), findings.end(), [&](const Finding& f) { return f.id == c; }) ||
                   std::any_of(ordered.begin(), ordered.end(), [&](const Finding& f) { return f.id == c; });
          });
      if (ready && (pick < 0 || before(findings[i], findings[static_cast<std::size_t>(pick)])))
        pick = static_cast<std::ptrdiff_t>(i);
    }
    if (pick < 0)
      for (std::size_t i = 0; i < findings.size(); ++i)
        if (!used[i] && (pick < 0 || before(findings[i], findings[static_cast<std::size_t>(pick)])))
          pick = static_cast<std::ptrdiff_t>(i);
    used[static_cast<std::size_t>(pick)] = true;
    ordered.push_back(findings[static_cast<std::size_t>(pick)]);
  }
  findings = std::move(ordered);
}

const Finding* DoctorReport::find(const std::string& id) const {
  for (const auto& f : findings)
    if (f.id == id) return &f;
  return nullptr;
}

bool DoctorReport::has_errors() const {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.severity == Severity::kError; });
}

nlohmann::json DoctorReport::to_json() const {
  nlohmann::json j;
  j["findings"] = nlohmann::json::array();
  for (const auto& f : findings) j["findings"].push_back(f.to_json());
  j["context"] = context;
  return j;
}

std::string DoctorReport::to_text() const {
  std::size_t errors = 0, warnings = 0;
  for (const auto& f : findings) {
    errors += f.severity == Severity::kError;
    warnings += f.severity == Severity::kWarning;
  }
  const std::size_t notes = findings.size() - errors - warnings;
  std::ostringstream os;
  os << fmt::format("glassbox doctor: {} error{}, {} warning{}, {} note{}", errors, errors == 1 ? "" : "s", warnings,
                    warnings == 1 ? "" : "s", notes, notes == 1 ? "" : "s");
  if (context.contains("steps"))
    os << fmt::format(" ({} steps in {:.1f} s)", context["steps"].get<std::int64_t>(),
                      context["seconds"].get<double>());
  os << "\n";
  if (findings.empty()) os << "  nothing wrong found in the data, the setup or a short run\n";
  for (const auto& f : findings) {
    std::string where;
    for (auto it = f.where.begin(); it != f.where.end(); ++it)
      where += (where.empty() ? "" : " ") + it.key() + "=" + it.value().dump();
    os << fmt::format("\n{:<8}{}{}\n", name_of(f.severity), f.id, where.empty() ? "" : "  [" + where + "]");
    if (!f.because_of.empty()) os << "        because of: " << fmt::format("{}", fmt::join(f.because_of, ", ")) << "\n";
    os << "        evidence: " << f.evidence << "\n";
    os << "        fix:      " << f.fix << "\n";
  }
  return os.str();
}

DoctorReport run_doctor(train::TaskModule& task, train::DataModule& data, const train::RunConfig& config,
                        const DoctorOptions& options, std::ostream* log) {
  DoctorReport report;
  detail::DataFacts d;
  if (log != nullptr) *log << "doctor: examining the data\n" << std::flush;
  detail::gather_data_facts(task, data, options, d);
  detail::RunFacts r;
  if (options.run) {
    if (log != nullptr) *log << "doctor: instrumented run (at most " << options.max_steps << " steps)\n" << std::flush;
    detail::run_instrumented(task, data, config, options, d, r, log);
  }
  report.findings = detail::diagnose(detail::make_facts(d, r, config));
  report.context = {{"train_samples", d.train.size},
                    {"val_samples", d.val.size},
                    {"test_samples", d.test.size},
                    {"model_outputs", d.outputs},
                    {"batch_size", d.batch_size},
                    {"input_mean", d.mean},
                    {"input_std", d.std},
                    {"knn_label_agreement", d.knn_agreement},
                    {"knn_chance", d.knn_chance},
                    {"baseline", d.baseline_name},
                    {"baseline_accuracy", d.baseline_acc},
                    {"label_noise_rate", r.noise_rate},
                    {"label_noise_model_accuracy", r.noise_model_acc},
                    {"steps", r.steps},
                    {"bn_large_batch_acc", r.bn_train_mode_acc},
                    {"bn_running_stats_acc", r.bn_eval_mode_acc},
                    {"bn_large_batch_loss", r.bn_train_mode_loss},
                    {"bn_running_stats_loss", r.bn_eval_mode_loss},
                    {"seconds", r.seconds},
                    {"ran", options.run}};
  if (!r.error.empty()) report.context["run_error"] = r.error.substr(0, r.error.find('\n'));
  return report;
}

DoctorReport run_doctor(train::RunConfig config, const DoctorOptions& options, std::ostream* log) {
  config.validate();
  GB_CHECK(config.data.source.task == TaskKind::kClassification, InvalidArgument,
           "the doctor's checks read class labels; data.task = \"" << name_of(config.data.source.task)
                                                                   << "\" is not covered by them",
           "train it with glassbox train: probes, the non-finite monitor and the report watch every task");
  train::DataModuleOptions dopts = config.data;
  dopts.source.check_labels = false;  // report bad labels instead of failing on them
  train::StandardDataModule data(dopts);
  data.setup();
  const train::DataInfo info = data.info();
  seed_everything(static_cast<std::uint64_t>(config.trainer.seed));
  auto model = nn::make_model(config.model, nn::ModelShape{info.sample_shape, info.num_classes});
  train::ClassificationTask task(std::move(model), nn::Loss(config.loss, info.num_classes));
  return run_doctor(task, data, config, options, log);
}

}  // namespace glassbox::inspect
