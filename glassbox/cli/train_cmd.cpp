// glassbox train / glassbox quickstart
#include <iostream>

#include <CLI/CLI.hpp>

#include "glassbox/base/config.h"
#include "glassbox/cli/commands.h"
#include "glassbox/inspect/diagnostics.h"
#include "glassbox/train/run.h"

namespace glassbox::cli {
namespace {

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

}  // namespace

void install_run_diagnostics(train::RunConfig& cfg, train::RunOptions& ro) {
  const std::string text = cfg.to_toml_text();
  const nlohmann::json hparams = inspect::flatten_hparams(to_json(visit_fn(cfg)));
  const train::DiagnosticsOptions options = cfg.diagnostics;
  ro.configure = [options, text, hparams](train::Trainer& t, train::TaskModule&, const std::filesystem::path& dir, std::ostream& out) {
    inspect::install_diagnostics(t, options, dir, out, text, hparams);
  };
}

void add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Fit a model described by a TOML config; writes a run directory");
  cmd->add_option("config", args->config, "TOML config file (default: the built-in defaults)");
  cmd->add_option("--set", args->sets, "override a config key, e.g. --set trainer.max_epochs=5 (repeatable)");
  cmd->add_option("--run-dir", args->run_dir, "run directory (default: runs/<run.name>)");
  cmd->add_option("--resume", args->resume, "continue bit-exactly from a checkpoint directory (e.g. runs/x/checkpoints/last.ckpt)");
  cmd->add_flag("--overwrite", args->overwrite, "replace an existing run directory");
  cmd->add_flag("--json", args->json, "print summary.json to stdout at the end");
  cmd->footer(
      "Examples:\n"
      "  glassbox train configs/cnn.toml\n"
      "  glassbox train configs/quickstart.toml --set model.mlp.hidden=[1024,512] --set optim.lr=3e-3 --run-dir runs/wide\n"
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
  cmd->add_flag("--overwrite", args->overwrite, "replace an existing run directory (default for quickstart's own runs/quickstart)");
  cmd->add_flag("--json", args->json, "print summary.json to stdout at the end");
  cmd->footer("Examples:\n  glassbox quickstart\n  glassbox quickstart --run-dir runs/qs2 --set trainer.max_epochs=3");
  cmd->callback([args] {
    train::RunConfig cfg = train::parse_run_config(embedded_quickstart_config(), "quickstart (built in)", args->sets);
    train::RunOptions ro;
    ro.run_dir = args->run_dir;
    // The default run directory is quickstart's own; a user-chosen one is protected.
    ro.overwrite = args->overwrite || args->run_dir.empty();
    install_run_diagnostics(cfg, ro);
    print_summary(train::run_training(std::move(cfg), ro, args->json ? std::cerr : std::cout), args->json);
  });
}

}  // namespace glassbox::cli
