// glassbox eval: flags -> app::evaluate_checkpoint -> the summary table (or metrics.json).
#include <iostream>

#include <CLI/CLI.hpp>

#include "glassbox/app/evaluate.h"
#include "glassbox/cli/commands.h"
#include "glassbox/cli/model_flags.h"

namespace glassbox::cli {

void add_eval(CLI::App& app) {
  auto o = std::make_shared<app::EvalOptions>();
  auto json = std::make_shared<bool>(false);
  auto out = std::make_shared<std::string>();
  auto groups = std::make_shared<std::string>();
  auto model = std::make_shared<ModelArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Metrics of a checkpoint or a TorchScript model on a split: per-class table, calibration, PR/ROC, fairness");
  add_model_options(*cmd, model);
  cmd->add_option("--split", o->split, "test | val | train")->check(CLI::IsMember({"test", "val", "train"}));
  cmd->add_option("--out", *out, "output directory (default: RUN_DIR/eval; with --model: MODEL_DIR/eval)");
  cmd->add_flag("--json", *json, "print metrics.json instead of the table");
  cmd->add_option("--device", o->device, "cpu | cuda | cuda:N | auto");
  cmd->add_option("--batch-size", o->batch_size, "inference batch size")->check(CLI::PositiveNumber);
  cmd->add_option("--groups", *groups,
                  "group attribute per sample of the split's data file: .npy, .csv (header) or .txt");
  cmd->add_option("--group-column", o->group_column,
                  "column of --groups' CSV, or of the data set's own CSV/NPY, holding the group");
  cmd->add_option("--positive-class", o->positive_class,
                  "class audited for fairness (name or index; default: class 1 of two, else each class)");
  cmd->add_option("--privileged", o->privileged,
                  "privileged group for AIF360's signed differences (default: the largest group)");
  cmd->add_option("--fairness-threshold", o->fairness_threshold,
                  "flag absolute differences above this (0.05 is a stricter common choice)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->footer(
      "Writes metrics.json, predictions.csv and predictions.npy (index,label,predicted,p_0..p_K-1).\n"
      "Examples:\n"
      "  glassbox eval --checkpoint runs/quickstart/checkpoints/last.ckpt\n"
      "  glassbox eval --checkpoint runs/quickstart/checkpoints/last.ckpt --set data.root=/data/fashion-mnist-2\n"
      "  glassbox eval --checkpoint runs/adult/checkpoints/last.ckpt --group-column sex --positive-class 1 "
      "--privileged 1\n"
      "  glassbox eval --model resnet.pt                  # TorchScript + resnet.json beside it, on Fashion-MNIST "
      "(docs/import.md)\n"
      "  glassbox eval --model net.pt configs/my_data.toml --input-shape 3,32,32 --mean 0.5 --std 0.25 --labels "
      "labels.txt");
  cmd->callback([o, json, out, groups, model] {
    o->out_dir = *out;
    const app::ModelSpec spec = model->to_spec();
    o->script = app::script_source(spec);
    o->checkpoint = spec.checkpoint;
    if (!spec.checkpoint.empty()) o->data_overrides = spec.overrides;
    o->groups_file = *groups;
    const nlohmann::json j = app::evaluate_checkpoint(*o);
    if (*json) {
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << app::format_eval_summary(j);
      if (j.contains("out_dir"))
        std::cout << "wrote " << j["out_dir"].get<std::string>() << "/metrics.json, predictions.csv, predictions.npy\n";
    }
  });
}

}  // namespace glassbox::cli
