// glassbox explain
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/cli/commands.h"
#include "glassbox/cli/explain_run.h"
#include "glassbox/data/dataset.h"
#include "glassbox/data/npy.h"
#include "glassbox/explain/cam.h"
#include "glassbox/explain/render.h"
#include "glassbox/nn/script_model.h"
#include "glassbox/train/inference.h"
#include "glassbox/train/run_config.h"

namespace glassbox::cli {

namespace fs = std::filesystem;

void add_script_options(CLI::App& cmd, const std::shared_ptr<ScriptArgs>& a) {
  cmd.add_option("--model", a->model,
                 "a TorchScript file saved by Python (torch.jit.save) or by glassbox export, instead of --checkpoint");
  cmd.add_option("--contract", a->contract, "its contract (default: model.json beside model.pt; docs/import.md)");
  cmd.add_option("config", a->config,
                 "with --model: TOML config whose [data] section gives the samples (default: the built-in quickstart, "
                 "Fashion-MNIST)");
  cmd.add_option("--set", a->sets, "with --model: override a config key, e.g. --set data.root=DIR (repeatable)");
  cmd.add_option("--input-shape", a->flags.input_shape,
                 "with --model: one sample's shape, e.g. 1,28,28 or 3,32,32 or 20 (features)")
      ->delimiter(',');
  cmd.add_option("--mean", a->flags.mean,
                 "with --model: normalisation mean after --scale, one value or one per channel, e.g. 0.286")
      ->delimiter(',');
  cmd.add_option("--std", a->flags.std, "with --model: normalisation std after --scale, e.g. 0.353")->delimiter(',');
  cmd.add_option("--scale", a->flags.scale,
                 "with --model: raw value multiplier before mean/std (default 1/255 for images, 1 for features)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--labels", a->labels, "with --model: class names, one per line");
  cmd.add_option("--num-classes", a->flags.num_classes,
                 "with --model: output width (default: the labels' count, else the model's)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--output-kind", a->flags.output_kind, "with --model: logits | probabilities")
      ->check(CLI::IsMember({"logits", "probabilities"}));
  cmd.add_option("--channel-order", a->flags.channel_order,
                 "with --model: gray | RGB | BGR | none (BGR reverses the data's RGB channels)")
      ->check(CLI::IsMember({"gray", "RGB", "BGR", "none"}));
}

train::ScriptSource script_source(const ScriptArgs& a, const fs::path& checkpoint) {
  train::ContractFlags flags = a.flags;
  flags.labels = a.labels;
  GB_CHECK(checkpoint.empty() || a.model.empty(), InvalidArgument, "--checkpoint and --model are mutually exclusive",
           "give a glassbox checkpoint (--checkpoint) or a TorchScript file (--model), not both");
  GB_CHECK(!checkpoint.empty() || !a.model.empty(), InvalidArgument, "no model given",
           "pass --checkpoint runs/NAME/checkpoints/last.ckpt, or --model model.pt for a TorchScript file");
  train::ScriptSource s;
  if (a.model.empty()) {
    GB_CHECK(a.contract.empty() && a.config.empty() && a.sets.empty() && flags.empty(), InvalidArgument,
             "CONFIG, --set, --contract and the contract flags apply to --model only",
             "a checkpoint carries its own configuration and preprocessing; drop them");
    return s;
  }
  s.model = a.model;
  s.contract = a.contract;
  s.flags = flags;
  const train::RunConfig cfg =
      a.config.empty() ? train::parse_run_config(embedded_quickstart_config(), "quickstart (built in)", a.sets)
                       : train::load_run_config(a.config, a.sets);
  s.data = cfg.data;
  return s;
}

nlohmann::json explain_checkpoint(const ExplainRequest& r) {
  GB_CHECK(r.checkpoint.empty() || r.script.model.empty(), InvalidArgument,
           "--checkpoint and --model are mutually exclusive",
           "explain a glassbox checkpoint (--checkpoint) or a TorchScript file (--model), one at a time");
  train::LoadedModel m = r.script.model.empty() ? train::load_checkpoint_for_inference(r.checkpoint, r.device)
                                                : train::load_script_for_inference(r.script, r.device);
  auto* script = dynamic_cast<nn::ScriptModel*>(m.model.get());
  const auto ds = train::split_dataset(m, r.split);
  GB_CHECK(m.info.sample_shape.size() == 3, InvalidArgument,
           "explain needs image inputs [C, H, W]; this run's samples have shape ["
               << fmt::format("{}", fmt::join(m.info.sample_shape, ", ")) << "]",
           "explain a model trained on images");
  const std::int64_t n = ds->size(), k = m.info.num_classes;
  std::vector<std::string> names = m.info.class_names;
  for (std::int64_t c = static_cast<std::int64_t>(names.size()); c < k; ++c) names.push_back(std::to_string(c));

  // Which samples.
  std::vector<std::int64_t> chosen;
  for (std::int64_t s : r.samples) {
    GB_CHECK(s >= 0 && s < n, InvalidArgument,
             "sample " << s << " is outside the " << r.split << " split (0.." << n - 1 << ")",
             "pick --samples within the split");
    chosen.push_back(s);
  }
  at::Tensor pred, labels;
  if (r.misclassified > 0 || r.correct > 0) {
    pred = train::predict_probabilities(m, *ds, 512).argmax(1);
    labels = ds->get_batch(torch::arange(n, torch::kLong)).targets.to(torch::kLong);
    std::int64_t wrong_left = r.misclassified, right_left = r.correct;
    for (std::int64_t i = 0; i < n && (wrong_left > 0 || right_left > 0); ++i) {
      const bool ok = pred[i].item<std::int64_t>() == labels[i].item<std::int64_t>();
      if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) continue;
      if (!ok && wrong_left > 0) {
        chosen.push_back(i);
        --wrong_left;
      } else if (ok && right_left > 0) {
        chosen.push_back(i);
        --right_left;
      }
    }
  }
  GB_CHECK(!chosen.empty(), InvalidArgument, "no samples to explain",
           "pass --samples 0,5,17 and/or --misclassified N / --correct N");

  std::int64_t target = -1;
  if (!r.target_class.empty()) {
    for (std::size_t c = 0; c < names.size(); ++c)
      if (names[c] == r.target_class) target = static_cast<std::int64_t>(c);
    if (target < 0) {
      char* end = nullptr;
      const long long v = std::strtoll(r.target_class.c_str(), &end, 10);
      GB_CHECK(end != nullptr && *end == '\0' && v >= 0 && v < k, InvalidArgument,
               "unknown class '" << r.target_class << "'",
               fmt::format("give --class as an index 0..{} or a name ({})", k - 1, fmt::join(names, ", ")));
      target = v;
    }
  }
  if (script != nullptr && script->stages().empty()) {
    GB_CHECK(r.layer.empty() && (r.method.empty() || r.method == "saliency"), InvalidArgument,
             "the TorchScript model cannot be split at a layer: " << script->stages_note(),
             "drop --layer and --method to get saliency maps (docs/import.md: what Grad-CAM needs)");
  }
  explain::CamOptions co;
  co.layer = r.layer;
  co.method = r.method.empty() ? (explain::default_cam_layer(*m.model).empty() ? explain::CamMethod::Saliency
                                                                               : explain::CamMethod::GradCam)
                               : explain::parse_cam_method(r.method);
  GB_CHECK(!(co.method == explain::CamMethod::Saliency && !r.layer.empty()), InvalidArgument,
           "--layer does not apply to saliency maps", "drop --layer, or use --method gradcam on a convolutional model");

  const fs::path dir = r.out_dir.empty() ? m.run_dir / "explain" : r.out_dir;
  fs::create_directories(dir);
  nlohmann::json items = nlohmann::json::array();
  std::string layer_used;
  std::vector<at::Tensor> all_maps;
  const at::Tensor file_index = data::root_indices(*ds, torch::tensor(chosen, torch::kLong));
  for (std::size_t start = 0; start < chosen.size(); start += 16) {
    const std::vector<std::int64_t> part(
        chosen.begin() + static_cast<std::ptrdiff_t>(start),
        chosen.begin() + static_cast<std::ptrdiff_t>(std::min(chosen.size(), start + 16)));
    data::Batch b = ds->get_batch(torch::tensor(part, torch::kLong));
    const at::Tensor x = b.inputs.to(m.device);
    const explain::CamResult cam =
        explain::class_activation_maps(*m.model, x, std::vector<std::int64_t>(part.size(), target), co);
    layer_used = cam.layer;
    all_maps.push_back(cam.maps.to(torch::kCPU, torch::kFloat));
    const at::Tensor probs = m.outputs_probabilities ? cam.logits.to(torch::kCPU, torch::kDouble)
                                                     : torch::softmax(cam.logits.to(torch::kCPU, torch::kDouble), 1);
    const at::Tensor shown = explain::display_images(b.inputs, m.info.mean, m.info.std);
    const at::Tensor overlay = explain::overlay_heatmap(shown, cam.maps.to(torch::kCPU), 0.5);
    const at::Tensor heat = explain::jet_colormap(cam.maps.to(torch::kCPU));
    for (std::size_t j = 0; j < part.size(); ++j) {
      const std::int64_t idx = part[j];
      const std::int64_t label = b.targets[static_cast<std::int64_t>(j)].item<std::int64_t>();
      const std::int64_t predicted = probs[static_cast<std::int64_t>(j)].argmax().item<std::int64_t>();
      const std::string heat_name = fmt::format("sample-{}-heatmap.png", idx),
                        over_name = fmt::format("sample-{}-overlay.png", idx);
      explain::write_rgb_png(dir / heat_name, heat[static_cast<std::int64_t>(j)]);
      explain::write_rgb_png(dir / over_name, overlay[static_cast<std::int64_t>(j)]);
      const std::int64_t t = cam.targets[j];
      items.push_back({{"index", idx},
                       {"file_index", file_index[static_cast<std::int64_t>(start + j)].item<std::int64_t>()},
                       {"label", label},
                       {"label_name", names[static_cast<std::size_t>(label)]},
                       {"predicted", predicted},
                       {"predicted_name", names[static_cast<std::size_t>(predicted)]},
                       {"target_class", t},
                       {"target_name", names[static_cast<std::size_t>(t)]},
                       {"probability", probs[static_cast<std::int64_t>(j)][predicted].item<double>()},
                       {"target_probability", probs[static_cast<std::int64_t>(j)][t].item<double>()},
                       {"correct", label == predicted},
                       {"heatmap", heat_name},
                       {"overlay", over_name}});
    }
  }
  data::write_npy(dir / "maps.npy", torch::cat(all_maps));
  nlohmann::json index = {{"method", explain::cam_method_name(co.method)},
                          {"layer", layer_used},
                          {"split", r.split},
                          {"model", m.config.model.name},
                          {"maps", "maps.npy"},
                          {"items", items}};
  if (m.model_file.empty()) {
    index["checkpoint"] = r.checkpoint.string();
  } else {
    index["model_file"] = m.model_file.string();
    index["contract"] = m.contract_source;
  }
  if (co.method == explain::CamMethod::Saliency && r.method.empty()) {
    if (script != nullptr && !script->stages_note().empty())
      index["note"] = "the TorchScript model cannot be split at a layer (" + script->stages_note() +
                      "), so the maps are saliency maps (|d logit / d input|), not Grad-CAM";
    else
      index["note"] = m.config.model.name +
                      " has no convolutional layer, so the maps are saliency maps (|d logit / d input|), not Grad-CAM";
  }
  write_file_atomic(dir / "index.json", index.dump(2) + "\n");
  index["out_dir"] = dir.string();
  return index;
}

void add_explain(CLI::App& app) {
  auto r = std::make_shared<ExplainRequest>();
  auto out = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto script = std::make_shared<ScriptArgs>();
  CLI::App* cmd = app.add_subcommand("explain",
                                     "Grad-CAM (and Grad-CAM++, Score-CAM, saliency) heat maps of a checkpoint's or a "
                                     "TorchScript model's predictions");
  cmd->add_option("--checkpoint", r->checkpoint, "checkpoint directory, e.g. runs/cnn/checkpoints/last.ckpt");
  add_script_options(*cmd, script);
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
      "  glassbox explain --model resnet.pt --layer layer4 --samples 0,1,2      # TorchScript + resnet.json "
      "(docs/import.md)\n"
      "  glassbox explain --model net.pt --input-shape 1,28,28 --mean 0.286 --std 0.353 --misclassified 4");
  cmd->callback([r, out, json, script] {
    r->out_dir = *out;
    r->script = script_source(*script, r->checkpoint);
    const nlohmann::json index = explain_checkpoint(*r);
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
