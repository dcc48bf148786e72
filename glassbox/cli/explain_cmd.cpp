// glassbox explain: flags -> app::explain_checkpoint -> a table of the explained samples.
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "glassbox/app/explain.h"
#include "glassbox/cli/commands.h"
#include "glassbox/cli/model_flags.h"

namespace glassbox::cli {

void add_explain(CLI::App& app) {
  auto r = std::make_shared<app::ExplainRequest>();
  auto out = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto model = std::make_shared<ModelArgs>();
  CLI::App* cmd = app.add_subcommand("explain",
                                     "Grad-CAM (and Grad-CAM++, Score-CAM, saliency) heat maps of a checkpoint's or a "
                                     "TorchScript model's predictions");
  add_model_options(*cmd, model);
  cmd->add_option("--samples", r->samples, "positions in the split, e.g. 0,5,17")->delimiter(',');
  cmd->add_option("--misclassified", r->misclassified, "also the first N wrong predictions")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--correct", r->correct, "also the first N right predictions")->check(CLI::NonNegativeNumber);
  cmd->add_option("--class", r->target_class, "explain this class (name or index) instead of each prediction");
  cmd->add_option("--layer", r->layer,
                  "module path of the layer (default: the last convolutional block); a wrong one lists the valid ones");
  cmd->add_option(
         "--method", r->method,
         "gradcam | gradcam++ | scorecam | saliency (default: gradcam, saliency for models without conv layers)")
      ->check(CLI::IsMember({"gradcam", "gradcam++", "scorecam", "saliency"}));
  cmd->add_option("--split", r->split, "test | val | train")->check(CLI::IsMember({"test", "val", "train"}));
  cmd->add_option("--out", *out, "output directory (default: RUN_DIR/explain; with --model: MODEL_DIR/explain)");
  cmd->add_option("--device", r->device, "cpu | cuda | cuda:N | auto");
  cmd->add_flag("--json", *json, "print index.json");
  cmd->footer(
      "Examples:\n"
      "  glassbox explain --checkpoint runs/cnn/checkpoints/last.ckpt --samples 0,5,17\n"
      "  glassbox explain --checkpoint runs/cnn/checkpoints/last.ckpt --misclassified 8 --method gradcam++ --layer "
      "features.relu0_1\n"
      "  glassbox explain --checkpoint runs/cnn/checkpoints/last.ckpt --set data.root=/data/new-batch --correct 4\n"
      "  glassbox explain --model resnet.pt --layer layer4 --samples 0,1,2      # TorchScript + resnet.json "
      "(docs/import.md)\n"
      "  glassbox explain --model net.pt --input-shape 1,28,28 --mean 0.286 --std 0.353 --misclassified 4");
  cmd->callback([r, out, json, model] {
    r->out_dir = *out;
    const app::ModelSpec spec = model->to_spec();
    r->script = app::script_source(spec);
    r->checkpoint = spec.checkpoint;
    if (!spec.checkpoint.empty()) r->data_overrides = spec.overrides;
    const nlohmann::json index = app::explain_checkpoint(*r);
    if (*json) {
      std::cout << index.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("{} on layer {} for {} samples:\n", index["method"].get<std::string>(),
                             index["layer"].get<std::string>(), index["items"].size());
    for (const auto& it : index["items"])
      std::cout << fmt::format("  sample {:>5}: label {} ({}), predicted {} ({}, p={:.3f}){}  -> {}\n",
                               it["index"].get<std::int64_t>(), it["label"].get<std::int64_t>(),
                               it["label_name"].get<std::string>(), it["predicted"].get<std::int64_t>(),
                               it["predicted_name"].get<std::string>(), it["probability"].get<double>(),
                               it["correct"].get<bool>() ? "" : "  WRONG", it["overlay"].get<std::string>());
    if (index.contains("note")) std::cout << "note: " << index["note"].get<std::string>() << "\n";
    std::cout << "wrote " << index["out_dir"].get<std::string>() << "/index.json\n";
  });
}

}  // namespace glassbox::cli
