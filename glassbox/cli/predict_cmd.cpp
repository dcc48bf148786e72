// glassbox predict: flags -> app::run_predict -> where the probabilities went.
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "glassbox/app/predict.h"
#include "glassbox/cli/commands.h"
#include "glassbox/cli/model_flags.h"

namespace glassbox::cli {

void add_predict(CLI::App& app) {
  auto r = std::make_shared<app::PredictRequest>();
  auto model = std::make_shared<ModelArgs>();
  auto input = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Class probabilities for unlabeled samples (.npy, .csv or images) from a checkpoint or a TorchScript model");
  cmd->add_option(
         "input", *input,
         "the samples: INPUT.npy ([N, ...] raw, as in training), INPUT.csv (header), an image or a folder of images")
      ->required();
  add_model_options(*cmd, model);
  cmd->add_option("--out", *out, "CSV to write (default: predictions.csv beside INPUT)");
  cmd->add_option("--device", r->device, "cpu | cuda | cuda:N | auto")->capture_default_str();
  cmd->add_option("--batch-size", r->batch_size, "inference batch size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->footer(
      "Writes index,predicted,predicted_name,p_<class>... one row per sample, in input order.\n"
      "Examples:\n"
      "  glassbox predict new.npy --checkpoint runs/quickstart/checkpoints/last.ckpt --out predictions.csv\n"
      "  glassbox predict customers.csv --checkpoint runs/adult/checkpoints/last.ckpt\n"
      "  glassbox predict images.npy --model runs/cnn/export/model.pt\n"
      "  glassbox predict photos/ --checkpoint runs/leaves/checkpoints/best.ckpt   (images: also a file column)");
  cmd->callback([r, model, input, out] {
    r->model = model->to_spec();
    r->input = *input;
    r->out = *out;
    const app::PredictOutcome o = app::run_predict(*r);
    std::string counts;
    for (std::size_t c = 0; c < o.counts.size(); ++c)
      if (o.counts[c] > 0) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", o.class_names[c], o.counts[c]);
    if (o.task == TaskKind::kRegression) {
      std::cout << fmt::format("predicted {} samples ({} targets) -> {}\n", o.samples, o.class_names.size(),
                               o.out.string());
    } else {
      std::cout << fmt::format("predicted {} samples ({}) -> {}\n", o.samples, counts.empty() ? "none" : counts,
                               o.out.string());
    }
  });
}

}  // namespace glassbox::cli
