// glassbox tune lr: flags -> app::tune_lr -> the suggestion (text or JSON).
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

}  // namespace

void add_tune(CLI::App& app) {
  CLI::App* tune = app.add_subcommand("tune", "Tune a config before training: the learning rate");
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
                 "folder for lr_find.json, lr_find.png and TensorBoard events (default: runs/NAME/lr_find)");
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
}

}  // namespace glassbox::cli
