#include "glassbox/inspect/doctor.h"

#include <algorithm>
#include <ostream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/seed.h"
#include "glassbox/inspect/doctor_internal.h"
#include "glassbox/nn/registry.h"

namespace glassbox::inspect {

namespace {

int severity_rank(const std::string& s) { return s == "error" ? 0 : s == "warning" ? 1 : 2; }

}  // namespace

nlohmann::json Finding::to_json() const {
  return {{"id", id},       {"severity", severity}, {"confidence", confidence},
          {"where", where}, {"evidence", evidence}, {"fix", fix}};
}

void DoctorReport::sort() {
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    if (severity_rank(a.severity) != severity_rank(b.severity))
      return severity_rank(a.severity) < severity_rank(b.severity);
    return a.confidence > b.confidence;
  });
}

const Finding* DoctorReport::find(const std::string& id) const {
  for (const auto& f : findings)
    if (f.id == id) return &f;
  return nullptr;
}

bool DoctorReport::has_errors() const {
  return std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.severity == "error"; });
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
    errors += f.severity == "error";
    warnings += f.severity == "warning";
  }
  std::ostringstream os;
  os << fmt::format("glassbox doctor: {} error{}, {} warning{}, {} note{}", errors, errors == 1 ? "" : "s", warnings,
                    warnings == 1 ? "" : "s", findings.size() - errors - warnings,
                    findings.size() - errors - warnings == 1 ? "" : "s");
  if (context.contains("steps"))
    os << fmt::format(" ({} steps in {:.1f} s)", context["steps"].get<std::int64_t>(),
                      context["seconds"].get<double>());
  os << "\n";
  if (findings.empty()) os << "  nothing wrong found in the data, the setup or a short run\n";
  for (const auto& f : findings) {
    std::string where;
    for (auto it = f.where.begin(); it != f.where.end(); ++it)
      where += (where.empty() ? "" : " ") + it.key() + "=" + it.value().dump();
    os << fmt::format("\n{:<8}{}{}\n", f.severity, f.id, where.empty() ? "" : "  [" + where + "]");
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
  detail::data_findings(d, config, report.findings);
  detail::RunFacts r;
  if (options.run) {
    if (log != nullptr) *log << "doctor: instrumented run (at most " << options.max_steps << " steps)\n" << std::flush;
    detail::run_instrumented(task, data, config, options, d, r, log);
    detail::run_findings(d, r, config, report.findings);
  }
  detail::skipped_findings(d.skipped, report.findings);
  detail::skipped_findings(r.skipped, report.findings);
  // A cause in the inputs explains trouble downstream: raise it when the run shows that trouble.
  const bool trouble = std::any_of(report.findings.begin(), report.findings.end(), [](const Finding& f) {
    return f.id == "nonfinite-activation" || f.id == "exploding-gradients" || f.id == "lr-too-high" ||
           f.id == "dead-relu" || f.id == "vanishing-gradients" || f.id == "lr-too-low";
  });
  const bool learning = [&] {
    if (r.loss.size() < 10) return true;
    double a = 0, b = 0;
    std::size_t na = 0, nb = 0;
    for (std::size_t i = 0; i < std::min<std::size_t>(10, r.loss.size()); ++i)
      if (std::isfinite(r.loss[i])) a += r.loss[i], ++na;
    for (std::size_t i = r.loss.size() - std::min<std::size_t>(30, r.loss.size()); i < r.loss.size(); ++i)
      if (std::isfinite(r.loss[i])) b += r.loss[i], ++nb;
    return na > 0 && nb > 0 && b / static_cast<double>(nb) < 0.85 * a / static_cast<double>(na);
  }();
  for (auto& f : report.findings) {
    if (f.id == "unnormalized-input" && (trouble || !learning || r.nonfinite)) {
      f.severity = "error";
      f.confidence = std::max(f.confidence, 0.92);
    }
  }
  // Symptoms explained by a cause found with them lose confidence: unnormalised inputs explain
  // what happens downstream; exploding gradients explain the NaN that follows; a divergent
  // learning rate explains dead units; vanishing gradients explain tiny updates.
  auto has = [&](const std::string& id) {
    return std::any_of(report.findings.begin(), report.findings.end(),
                       [&](const Finding& f) { return f.id == id && f.severity == "error"; });
  };
  auto demote = [&](std::initializer_list<const char*> ids, double factor) {
    for (auto& f : report.findings)
      for (const char* id : ids)
        if (f.id == id) f.confidence *= factor;
  };
  if (has("unnormalized-input"))
    demote({"dead-relu", "exploding-gradients", "nonfinite-activation", "lr-too-high", "lr-too-low",
            "vanishing-gradients"},
           0.85);
  if (has("exploding-gradients")) demote({"nonfinite-activation", "nonfinite-gradient", "dead-relu"}, 0.85);
  if (has("lr-too-high")) demote({"dead-relu", "overfitting"}, 0.85);
  if (has("vanishing-gradients")) demote({"lr-too-low"}, 0.8);
  // One finding per id (the most confident), unless they name different places.
  std::vector<Finding> kept;
  for (auto& f : report.findings) {
    // (Each check that could not run is its own note.)
    auto it = std::find_if(kept.begin(), kept.end(), [&](const Finding& k) {
      return k.id == f.id && (f.id != "check-not-run" || k.where == f.where);
    });
    if (it == kept.end()) {
      kept.push_back(f);
    } else if (severity_rank(f.severity) < severity_rank(it->severity) ||
               (f.severity == it->severity && f.confidence > it->confidence)) {
      *it = f;
    }
  }
  report.findings = std::move(kept);
  report.sort();
  report.context = {{"train_samples", d.train.size},
                    {"val_samples", d.val.size},
                    {"test_samples", d.test.size},
                    {"model_outputs", d.outputs},
                    {"batch_size", d.batch_size},
                    {"input_mean", d.mean},
                    {"input_std", d.std},
                    {"knn_label_agreement", d.knn_agreement},
                    {"knn_chance", d.knn_chance},
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
