// glassbox train / glassbox quickstart: flags -> app::run_training / app::run_quickstart -> exit
// status (130 when interrupted).
#include <iostream>

#include <CLI/CLI.hpp>

#include "glassbox/app/quickstart.h"
#include "glassbox/app/run.h"
#include "glassbox/cli/commands.h"

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
  std::string init_from;
  bool overwrite = false;
  bool json = false;
};

void finish(const nlohmann::json& summary, bool json) {
  if (json) std::cout << summary.dump(2) << "\n";
  if (summary.value("stop", "") == "interrupted") exit_code() = 130;
}

}  // namespace

void add_train(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Fit a model described by a TOML config; writes a run directory");
  cmd->add_option("config", args->config,
                  "TOML config file (default: the built-in defaults; with --resume: the checkpoint's own)");
  cmd->add_option("--set", args->sets, "override a config key, e.g. --set trainer.max_epochs=5 (repeatable)");
  cmd->add_option("--run-dir", args->run_dir,
                  "run directory (default: runs/<run.name>; with --resume: the checkpoint's run, elsewhere forks it)");
  cmd->add_option("--resume", args->resume,
                  "continue exactly from a checkpoint directory (e.g. runs/x/checkpoints/last.ckpt) with its stored "
                  "config; only stopping, limits, logging and checkpoint cadence may change");
  cmd->add_option("--init-from", args->init_from,
                  "start a new run from the weights of a checkpoint or a .safetensors file (sets model.init_from)");
  cmd->add_flag("--overwrite", args->overwrite, "replace an existing run directory");
  cmd->add_flag("--json", args->json, "print summary.json to stdout at the end");
  cmd->footer(
      "Ctrl-C (or SIGTERM) stops after the current step, saves last.ckpt and prints how to resume (exit 130).\n"
      "Examples:\n"
      "  glassbox train configs/cnn.toml\n"
      "  glassbox train configs/quickstart.toml --set model.mlp.hidden=[1024,512] --set optim.lr=3e-3 --run-dir "
      "runs/wide\n"
      "  glassbox train --resume runs/cnn/checkpoints/last.ckpt --set trainer.max_epochs=20\n"
      "  glassbox train --resume runs/cnn/checkpoints/last.ckpt --run-dir runs/cnn-fork\n"
      "  glassbox train configs/cnn.toml --init-from runs/cnn/checkpoints/last.ckpt --run-dir runs/cnn-finetune");
  cmd->callback([args] {
    app::TrainRequest r;
    r.config_file = args->config;
    r.overrides = args->sets;
    r.run_dir = args->run_dir;
    r.resume = args->resume;
    r.init_from = args->init_from;
    r.overwrite = args->overwrite;
    finish(app::run_training(r, args->json ? std::cerr : std::cout), args->json);
  });
}

void add_quickstart(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quickstart", "Train the default MLP on Fashion-MNIST, then evaluate, explain, export, check and report it");
  cmd->add_option("--run-dir", args->run_dir, "run directory (default: runs/quickstart)");
  cmd->add_option("--set", args->sets, "override a key of the built-in quickstart config (repeatable)");
  cmd->add_flag("--overwrite", args->overwrite,
                "replace an existing run directory (default for quickstart's own runs/quickstart)");
  cmd->add_flag("--json", args->json, "print summary.json to stdout at the end");
  cmd->footer("Examples:\n  glassbox quickstart\n  glassbox quickstart --run-dir runs/qs2 --set trainer.max_epochs=3");
  cmd->callback([args] {
    app::QuickstartRequest q;
    q.run_dir = args->run_dir;
    q.overrides = args->sets;
    q.overwrite = args->overwrite;
    q.binary = invoked_binary();
    finish(app::run_quickstart(q, args->json ? std::cerr : std::cout), args->json);
  });
}

}  // namespace glassbox::cli
