// glassbox tune lr | batch-size: flags -> app::tune_lr / tune_batch_size -> the result (text or JSON).
#include <iostream>

#include <CLI/CLI.hpp>

#include "glassbox/app/tune.h"
#include "glassbox/cli/commands.h"

namespace glassbox::cli {

namespace {

struct TuneLrArgs {
  std::string config;
  std::vector<std::string> sets;
  double min_lr = 1e-8;
  double max_lr = 1.0;
  std::int64_t num_training = 100;
  std::string mode = "exponential";
  double early_stop_threshold = 4.0;
  std::string out;
  std::string apply;
  bool valley = false;
  bool json = false;
};

struct TuneBatchArgs {
  std::string config;
  std::vector<std::string> sets;
  std::int64_t init = 2;
  std::int64_t steps = 3;
  std::int64_t max_trials = 25;
  double memory_limit_mb = 0;
  std::string apply;
  bool json = false;
};

}  // namespace

void add_tune(CLI::App& app) {
  CLI::App* tune = app.add_subcommand("tune", "Tune a config before training: the learning rate, the batch size");
  tune->require_subcommand(1);
  auto a = std::make_shared<TuneLrArgs>();
  CLI::App* lr = tune->add_subcommand(
      "lr", "Learning-rate range test (PyTorch Lightning's lr_find): suggestion, plot, and a tuned copy of the config");
  lr->add_option("config", a->config, "TOML config file")->required();
  lr->add_option("--set", a->sets, "override a config key, e.g. --set optim.name=\"sgd\" (repeatable)");
  lr->add_option("--min-lr", a->min_lr, "learning rate of the first step")->capture_default_str();
  lr->add_option("--max-lr", a->max_lr, "learning rate of the last step")->capture_default_str();
  lr->add_option("--num-training", a->num_training, "optimiser steps of the test")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1000000}))
      ->capture_default_str();
  lr->add_option("--mode", a->mode, "how the rate rises: exponential or linear")
      ->check(CLI::IsMember({"exponential", "linear"}))
      ->capture_default_str();
  lr->add_option("--early-stop-threshold", a->early_stop_threshold,
                 "stop once the smoothed loss exceeds this times its best (0: never)")
      ->capture_default_str();
  lr->add_option("--out", a->out,
                 "folder for lr_find.json, lr_find.png and TensorBoard events (default: runs/NAME-lr_find, beside the "
                 "run directory train creates)");
  lr->add_option("--apply", a->apply,
                 "write a copy of the config with the suggestion (scheduler.max_lr for onecycle, else optim.lr) to "
                 "this new file");
  lr->add_flag("--valley", a->valley, "apply fastai's valley instead of the steepest descent");
  lr->add_flag("--json", a->json, "print lr_find.json's content");
  lr->footer(
      "The model, its optimiser and data are the config's (model.init_from and trainer.freeze* included); nothing "
      "of the test is kept.\n"
      "Examples:\n"
      "  glassbox tune lr configs/defects.toml\n"
      "  glassbox tune lr configs/defects.toml --apply defects-tuned.toml && glassbox train defects-tuned.toml");
  lr->callback([a] {
    app::TuneLrRequest r;
    r.config_file = a->config;
    r.overrides = a->sets;
    r.options.min_lr = a->min_lr;
    r.options.max_lr = a->max_lr;
    r.options.num_training = a->num_training;
    r.options.mode = a->mode == "linear" ? train::LrFinderMode::kLinear : train::LrFinderMode::kExponential;
    r.options.early_stop_threshold = a->early_stop_threshold;
    r.out_dir = a->out;
    r.apply = a->apply;
    r.use_valley = a->valley;
    r.quiet = a->json;
    const app::TuneLrOutcome o = app::tune_lr(r, std::cout);
    if (a->json) std::cout << o.result.to_json().dump(2) << "\n";
  });

  auto b = std::make_shared<TuneBatchArgs>();
  CLI::App* bs = tune->add_subcommand(
      "batch-size", "The largest training batch that fits (PyTorch Lightning's BatchSizeFinder, power scaling)");
  bs->add_option("config", b->config, "TOML config file")->required();
  bs->add_option("--set", b->sets, "override a config key (repeatable)");
  bs->add_option("--init", b->init, "the first batch size tried")->check(CLI::PositiveNumber)->capture_default_str();
  bs->add_option("--steps-per-trial", b->steps, "optimiser steps at each size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bs->add_option("--max-trials", b->max_trials, "sizes tried at most (each double the last)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bs->add_option("--memory-limit-mb", b->memory_limit_mb,
                 "on the CPU: a size fits while the process's peak resident memory stays below this (0: no limit; "
                 "on a GPU, CUDA running out of memory is the limit)")
      ->capture_default_str();
  bs->add_option("--apply", b->apply, "write a copy of the config with data.loader.batch_size to this new file");
  bs->add_flag("--json", b->json, "print the trials as JSON");
  bs->footer(
      "Examples:\n"
      "  glassbox tune batch-size configs/defects.toml --set trainer.device=\"cuda\"\n"
      "  glassbox tune batch-size configs/cnn.toml --memory-limit-mb 2048 --apply cnn-batch.toml");
  bs->callback([b] {
    app::TuneBatchRequest r;
    r.config_file = b->config;
    r.overrides = b->sets;
    r.init = b->init;
    r.steps_per_trial = b->steps;
    r.max_trials = b->max_trials;
    r.memory_limit_mb = b->memory_limit_mb;
    r.apply = b->apply;
    r.quiet = b->json;
    const app::TuneBatchOutcome o = app::tune_batch_size(r, std::cout);
    if (b->json) std::cout << o.to_json().dump(2) << "\n";
  });
}

}  // namespace glassbox::cli
