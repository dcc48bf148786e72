// glassbox train / glassbox quickstart: flags -> app::run_training / app::run_quickstart -> exit
// status (130 when interrupted).
#include <iostream>

#include <CLI/CLI.hpp>

#include "glassbox/app/launch.h"
#include "glassbox/app/quickstart.h"
#include "glassbox/app/run.h"
#include "glassbox/base/error.h"
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
  // Data-parallel launch (torchrun's flags).
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
};

// The command line without the launch flags: what each worker runs.
std::vector<std::string> worker_command() {
  static const std::vector<std::string> flags = {"--nproc", "--nnodes", "--node-rank", "--master-addr",
                                                 "--master-port"};
  std::vector<std::string> out{std::filesystem::read_symlink("/proc/self/exe").string()};
  const auto& args = raw_args();
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool dropped = false;
    for (const auto& f : flags) {
      if (a == f) {
        ++i;  // and its value
        dropped = true;
      } else if (a.rfind(f + "=", 0) == 0) {
        dropped = true;
      }
    }
    if (!dropped) out.push_back(a);
  }
  return out;
}

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
  cmd->add_option("--nproc", args->nproc,
                  "data-parallel workers on this machine (torchrun's --nproc-per-node); data.loader.batch_size is "
                  "per worker")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--nnodes", args->nnodes, "machines in the job (each runs this command with its --node-rank)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--node-rank", args->node_rank, "this machine's index in the job, 0 .. nnodes-1")
      ->check(CLI::Range(0, 4095));
  cmd->add_option("--master-addr", args->master_addr, "address of node 0 (it serves the rendezvous store)");
  cmd->add_option("--master-port", args->master_port,
                  "port of the rendezvous store on node 0 (0: a free one; several nodes need the same known port)")
      ->check(CLI::Range(0, 65535));
  cmd->footer(
      "Ctrl-C (or SIGTERM) stops after the current step, saves last.ckpt and prints how to resume (exit 130).\n"
      "Data-parallel training starts one worker per --nproc (DistributedDataParallel on c10d: Gloo on CPU, NCCL on\n"
      "CUDA); a worker started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR, ... set) joins its job by itself.\n"
      "Examples:\n"
      "  glassbox train configs/cnn.toml\n"
      "  glassbox train configs/quickstart.toml --set model.mlp.hidden=[1024,512] --set optim.lr=3e-3 --run-dir "
      "runs/wide\n"
      "  glassbox train --resume runs/cnn/checkpoints/last.ckpt --set trainer.max_epochs=20\n"
      "  glassbox train --resume runs/cnn/checkpoints/last.ckpt --run-dir runs/cnn-fork\n"
      "  glassbox train configs/cnn.toml --init-from runs/cnn/checkpoints/last.ckpt --run-dir runs/cnn-finetune\n"
      "  glassbox train configs/cnn.toml --nproc 2\n"
      "  glassbox train configs/cnn.toml --nproc 4 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port "
      "29500");
  cmd->callback([args] {
    app::TrainRequest r;
    r.config_file = args->config;
    r.overrides = args->sets;
    r.run_dir = args->run_dir;
    r.resume = args->resume;
    r.init_from = args->init_from;
    r.overwrite = args->overwrite;
    if (args->nproc > 1 || args->nnodes > 1) {
      // The launcher: the request is checked here once (bad input is one error, not one per
      // worker), then every worker runs the command without the launch flags.
      app::TrainRequest check = r;
      check.owns_run_dir = args->node_rank == 0;  // node 0 owns the run directory
      const app::TrainPlan plan = app::plan_training(check);
      GB_CHECK(plan.config.trainer.strategy != train::Strategy::kSingle, InvalidArgument,
               "trainer.strategy = \"single\" cannot run on " << args->nproc * args->nnodes << " workers",
               "set trainer.strategy = \"ddp\" (or \"auto\"), or drop --nproc/--nnodes");
      app::LaunchOptions lo;
      lo.timeout = plan.config.trainer.ddp_timeout;
      lo.nproc = args->nproc;
      lo.nnodes = args->nnodes;
      lo.node_rank = args->node_rank;
      lo.master_addr = args->master_addr;
      lo.master_port = args->master_port;
      lo.command = worker_command();
      exit_code() = app::launch_workers(lo, std::cerr);
      return;
    }
    const nlohmann::json summary = app::run_training(r, args->json ? std::cerr : std::cout);
    if (summary.contains("rank")) {  // a worker other than rank 0: rank 0 reports
      if (summary.value("stop", "") == "interrupted") exit_code() = 130;
      return;
    }
    finish(summary, args->json);
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
