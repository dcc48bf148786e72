// Tested by cli_test (Quickstart.EndsWithEvaluationExplanationsDoctorAndReport) and the readme_tour test.
#include "glassbox/app/quickstart.h"

#include <ostream>

#include <fmt/format.h>

#include "glassbox/app/evaluate.h"
#include "glassbox/app/explain.h"
#include "glassbox/app/export.h"
#include "glassbox/app/run.h"
#include "glassbox/base/files.h"
#include "glassbox/inspect/doctor.h"
#include "glassbox/report/report.h"

namespace glassbox::app {

nlohmann::json run_quickstart(const QuickstartRequest& q, std::ostream& out) {
  TrainRequest t;
  t.config_text = embedded_quickstart_config();
  t.config_source = "quickstart (built in)";
  t.overrides = q.overrides;
  t.run_dir = q.run_dir;
  t.overwrite = q.overwrite || q.run_dir.empty();
  t.quiet = q.quiet;
  nlohmann::json summary = run_training(t, out);
  const std::string run_dir = summary.value("run_dir", "");
  if (run_dir.empty() || summary.value("stop", "") == "interrupted") return summary;  // nothing more to do
  const train::RunConfig cfg = train::parse_run_config(t.config_text, t.config_source, t.overrides);
  const std::string device = cfg.trainer.device;
  nlohmann::json steps;
  std::string ckpt = summary["best_checkpoint"].is_string() ? summary["best_checkpoint"].get<std::string>() : "";
  if (ckpt.empty() && summary["last_checkpoint"].is_string()) ckpt = summary["last_checkpoint"].get<std::string>();
  const std::string binary = q.binary.empty() ? "glassbox" : q.binary;
  if (!ckpt.empty()) {
    EvalOptions eo;
    eo.checkpoint = ckpt;
    eo.device = device;
    const nlohmann::json m = evaluate_checkpoint(eo);
    out << fmt::format("evaluation: accuracy {:.4f}, macro F1 {:.4f}, ECE {:.4f} -> {}/metrics.json\n",
                       m["accuracy"].get<double>(), m["averages"]["macro"]["f1"].get<double>(),
                       m["calibration"]["ece"].get<double>(), m["out_dir"].get<std::string>());
    steps["eval"] = m["out_dir"];
    if (cfg.data.source.format != data::DataFormat::kCsv) {
      ExplainRequest er;
      er.checkpoint = ckpt;
      er.misclassified = 8;
      er.correct = 8;
      er.device = device;
      const nlohmann::json ex = explain_checkpoint(er);
      out << fmt::format("explanations: {} of {} test samples -> {}/index.json\n", ex["method"].get<std::string>(),
                         ex["items"].size(), ex["out_dir"].get<std::string>());
      steps["explain"] = ex["out_dir"];
    }
    // The model as it ships: TorchScript, ONNX and a Triton-style model repository.
    ExportJob job;
    job.checkpoint = ckpt;
    job.format = "all";
    job.out = std::filesystem::path(run_dir) / "export";
    const ExportOutcome ex = run_export(job);
    std::string parts, repository;
    for (const auto& f : ex.formats) {
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", f.format, exporter::human_bytes(f.bytes));
      if (!f.repository.empty()) repository = f.repository.string();
    }
    out << fmt::format("export: {} -> {}\n", parts, repository);
    out << fmt::format("serve it: {} serve --model-repository {}\n", binary, repository);
    for (const auto& f : ex.formats)
      if (!f.profile.empty())
        out << fmt::format("monitored against {} validation samples: GET /v2/models/NAME/monitor, /dashboard\n",
                           f.profile_samples);
    steps["export"] = repository;
  }
  inspect::DoctorOptions d;
  d.run = false;  // the data and the setup; the run itself was watched by the probes
  const inspect::DoctorReport doc = inspect::run_doctor(cfg, d, nullptr);
  write_file_atomic(std::filesystem::path(run_dir) / "doctor.json", doc.to_json().dump(2) + "\n");
  out << fmt::format("doctor: {} finding(s) on the data and setup -> {}/doctor.json\n", doc.findings.size(), run_dir);
  const std::string report = report::write_report(run_dir).string();
  out << "report: " << report << "\n";
  steps["report"] = report;
  summary["steps"] = steps;
  return summary;
}

}  // namespace glassbox::app
