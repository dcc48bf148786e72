// glassbox train / glassbox quickstart
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "glassbox/base/config.h"
#include "glassbox/base/files.h"
#include "glassbox/cli/commands.h"
#include "glassbox/cli/explain_run.h"
#include "glassbox/export/package.h"
#include "glassbox/inspect/diagnostics.h"
#include "glassbox/inspect/doctor.h"
#include "glassbox/report/report.h"
#include "glassbox/train/evaluate.h"
#include "glassbox/train/run.h"

namespace glassbox::cli {
namespace {

// How to call this binary again from the current directory (build/glassbox/cli/glassbox after
// `make run`), for the commands the quickstart suggests; "glassbox" when that cannot be told.
std::string invoked_binary() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "glassbox";
  const std::filesystem::path rel = std::filesystem::relative(exe, std::filesystem::current_path(), ec);
  if (ec || rel.empty()) return exe.string();
  const std::string r = rel.string();
  if (r.rfind("..", 0) == 0) return exe.string();
  return r.find('/') == std::string::npos ? "./" + r : r;
}

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string run_dir;
  std::string resume;
  bool overwrite = false;
  bool json = false;
};

void print_summary(const nlohmann::json& summary, bool json) {
  if (json) std::cout << summary.dump(2) << "\n";
}

// After a run: evaluate the tested checkpoint, explain some right and wrong test predictions,
// check the data with the doctor, and write the report (quickstart's closing steps).
void close_the_loop(const nlohmann::json& summary, const train::RunConfig& cfg, std::ostream& out) {
  const std::string run_dir = summary.value("run_dir", "");
  if (run_dir.empty()) return;  // fast_dev_run: nothing was written
  std::string ckpt = summary.value("best_checkpoint", "");
  if (ckpt.empty()) ckpt = summary.value("last_checkpoint", "");
  if (!ckpt.empty()) {
    train::EvalOptions eo;
    eo.checkpoint = ckpt;
    eo.device = cfg.trainer.device == "auto" ? "auto" : cfg.trainer.device;
    const nlohmann::json m = train::evaluate_checkpoint(eo);
    out << fmt::format("evaluation: accuracy {:.4f}, macro F1 {:.4f}, ECE {:.4f} -> {}/metrics.json\n",
                       m["accuracy"].get<double>(), m["averages"]["macro"]["f1"].get<double>(),
                       m["calibration"]["ece"].get<double>(), m["out_dir"].get<std::string>());
    if (cfg.data.source.format != "csv") {
      ExplainRequest er;
      er.checkpoint = ckpt;
      er.misclassified = 8;
      er.correct = 8;
      er.device = eo.device;
      const nlohmann::json ex = explain_checkpoint(er);
      out << fmt::format("explanations: {} of {} test samples -> {}/index.json\n", ex["method"].get<std::string>(),
                         ex["items"].size(), ex["out_dir"].get<std::string>());
    }
    // The model as it ships: TorchScript, ONNX and a Triton-style model repository.
    const nlohmann::json ex =
        run_export(ckpt, "all", std::filesystem::path(run_dir) / "export", exporter::ExportRequest{}, false);
    std::string parts, repository;
    for (const auto& f : ex) {
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", f["format"].get<std::string>(),
                           exporter::human_bytes(f["bytes"].get<std::uintmax_t>()));
      if (f.contains("repository")) repository = f["repository"].get<std::string>();
    }
    out << fmt::format("export: {} -> {}\n", parts, repository);
    out << fmt::format("serve it: {} serve --model-repository {}\n", invoked_binary(), repository);
  }
  inspect::DoctorOptions d;
  d.run = false;  // the data and the setup; the run itself was watched by the probes
  const inspect::DoctorReport doc = inspect::run_doctor(cfg, d, nullptr);
  write_file_atomic(std::filesystem::path(run_dir) / "doctor.json", doc.to_json().dump(2) + "\n");
  out << fmt::format("doctor: {} finding(s) on the data and setup -> {}/doctor.json\n", doc.findings.size(), run_dir);
  out << "report: " << report::write_report(run_dir).string() << "\n";
}

}  // namespace

void install_run_diagnostics(train::RunConfig& cfg, train::RunOptions& ro) {
  const std::string text = cfg.to_toml_text();
  const nlohmann::json hparams = inspect::flatten_hparams(to_json(visit_fn(cfg)));
  const train::DiagnosticsOptions options = cfg.diagnostics;
  ro.configure = [options, text, hparams](train::Trainer& t, train::TaskModule&, const std::filesystem::path& dir,
                                          std::ostream& out) {
    inspect::install_diagnostics(t, options, dir, out, text, hparams);
  };
}

void add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Fit a model described by a TOML config; writes a run directory");
  cmd->add_option("config", args->config, "TOML config file (default: the built-in defaults)");
  cmd->add_option("--set", args->sets, "override a config key, e.g. --set trainer.max_epochs=5 (repeatable)");
  cmd->add_option("--run-dir", args->run_dir, "run directory (default: runs/<run.name>)");
  cmd->add_option("--resume", args->resume,
                  "continue bit-exactly from a checkpoint directory (e.g. runs/x/checkpoints/last.ckpt)");
  cmd->add_flag("--overwrite", args->overwrite, "replace an existing run directory");
  cmd->add_flag("--json", args->json, "print summary.json to stdout at the end");
  cmd->footer(
      "Examples:\n"
      "  glassbox train configs/cnn.toml\n"
      "  glassbox train configs/quickstart.toml --set model.mlp.hidden=[1024,512] --set optim.lr=3e-3 --run-dir "
      "runs/wide\n"
      "  glassbox train configs/cnn.toml --resume runs/cnn/checkpoints/last.ckpt");
  cmd->callback([args] {
    train::RunConfig cfg = train::load_run_config(args->config, args->sets);
    train::RunOptions ro;
    ro.run_dir = args->run_dir;
    ro.resume = args->resume;
    ro.overwrite = args->overwrite;
    install_run_diagnostics(cfg, ro);
    print_summary(train::run_training(std::move(cfg), ro, args->json ? std::cerr : std::cout), args->json);
  });
}

void add_quickstart(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("quickstart", "Train the default MLP on Fashion-MNIST, test it, print a summary");
  cmd->add_option("--run-dir", args->run_dir, "run directory (default: runs/quickstart)");
  cmd->add_option("--set", args->sets, "override a key of the built-in quickstart config (repeatable)");
  cmd->add_flag("--overwrite", args->overwrite,
                "replace an existing run directory (default for quickstart's own runs/quickstart)");
  cmd->add_flag("--json", args->json, "print summary.json to stdout at the end");
  cmd->footer("Examples:\n  glassbox quickstart\n  glassbox quickstart --run-dir runs/qs2 --set trainer.max_epochs=3");
  cmd->callback([args] {
    train::RunConfig cfg = train::parse_run_config(embedded_quickstart_config(), "quickstart (built in)", args->sets);
    train::RunOptions ro;
    ro.run_dir = args->run_dir;
    // The default run directory is quickstart's own; a user-chosen one is protected.
    ro.overwrite = args->overwrite || args->run_dir.empty();
    install_run_diagnostics(cfg, ro);
    std::ostream& out = args->json ? std::cerr : std::cout;
    const nlohmann::json summary = train::run_training(cfg, ro, out);
    close_the_loop(summary, cfg, out);
    print_summary(summary, args->json);
  });
}

}  // namespace glassbox::cli
