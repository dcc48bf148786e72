// Tested by app_test (PortableCheckpoint: feature attributions) and cli_test (Explain.*, ImportedModel.*,
// Quickstart.*).
#include "glassbox/app/explain.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/progress.h"
#include "glassbox/data/dataset.h"
#include "glassbox/data/image.h"
#include "glassbox/data/image_folder.h"
#include "glassbox/data/image_preprocessing.h"
#include "glassbox/data/npy.h"
#include "glassbox/explain/attribution.h"
#include "glassbox/explain/cam.h"
#include "glassbox/explain/render.h"
#include "glassbox/nn/script_model.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

// The image-file data set under `ds` (through subsets), or null for tensors.
const data::ImageDataset* image_root(const data::Dataset& ds) {
  const data::Dataset* d = &ds;
  while (const auto* sub = dynamic_cast<const data::SubsetDataset*>(d)) d = sub->base().get();
  return dynamic_cast<const data::ImageDataset*>(d);
}

// A heat map computed on the model's input, drawn over the original file: the eval transforms'
// geometry (data::source_affine) maps it back; what the model never saw (cropped away) is dimmed.
// False when the geometry cannot be inverted.
bool write_original_overlay(const std::filesystem::path& out, const data::ImageDataset& images, std::int64_t file,
                            const at::Tensor& map) {
  const data::ImageRef& ref = images.files().at(static_cast<std::size_t>(file));
  cv::Mat original = data::read_image(ref, static_cast<int>(images.options().channels));
  const data::Pipeline none;
  const auto a = data::source_affine(original, images.options().pipeline ? *images.options().pipeline : none);
  if (!a) return false;
  const at::Tensor m = map.to(torch::kCPU, torch::kFloat).contiguous();
  const cv::Mat cam(static_cast<int>(m.size(0)), static_cast<int>(m.size(1)), CV_32F, m.data_ptr<float>());
  cv::Mat warped;
  cv::warpAffine(cam, warped, cv::Mat(*a), original.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar(-1));
  const at::Tensor w = torch::from_blob(warped.data, {1, warped.rows, warped.cols}, torch::kFloat).clone();
  const at::Tensor seen = w.ge(0);
  const at::Tensor img = data::image_to_tensor(original).unsqueeze(0).to(torch::kFloat).div(255);
  at::Tensor rgb = explain::overlay_heatmap(img, w.clamp_min(0), 0.5)[0];  // [H, W, 3] uint8
  const at::Tensor plain =
      (img[0].permute({1, 2, 0}).expand({img.size(2), img.size(3), 3}) * 255 * 0.35).round().to(torch::kUInt8);
  rgb = torch::where(seen[0].unsqueeze(2), rgb, plain);
  explain::write_rgb_png(out, rgb);
  return true;
}

// What index.json says of one explained sample; `probs`: its class probabilities [K] float64.
nlohmann::json item_json(std::int64_t index, std::int64_t file_index, std::int64_t label, std::int64_t target,
                         const at::Tensor& probs, const std::vector<std::string>& names) {
  const std::int64_t predicted = probs.argmax().item<std::int64_t>();
  const auto name = [&](std::int64_t c) { return names[static_cast<std::size_t>(c)]; };
  return {{"index", index},
          {"file_index", file_index},
          {"label", label},
          {"label_name", name(label)},
          {"predicted", predicted},
          {"predicted_name", name(predicted)},
          {"target_class", target},
          {"target_name", name(target)},
          {"probability", probs[predicted].item<double>()},
          {"target_probability", probs[target].item<double>()},
          {"correct", label == predicted}};
}

// Attributions per input feature (samples that are not images: tabular models): Integrated
// Gradients (default) or saliency, as captum computes them, with the mean |attribution| of each
// feature over the explained samples as the bars of a chart.
nlohmann::json explain_features(LoadedModel& m, const ExplainRequest& r, const data::Dataset& ds,
                                const std::vector<std::int64_t>& chosen, std::int64_t target,
                                const std::vector<std::string>& names) {
  const std::string method = r.method.empty() ? "integrated_gradients" : r.method;
  GB_CHECK(method == "integrated_gradients" || method == "saliency", InvalidArgument,
           "--method " << method << " needs image inputs [C, H, W]; this model's samples have shape ["
                       << fmt::format("{}", fmt::join(m.info.sample_shape, ", ")) << "]",
           "use --method integrated_gradients (default) or saliency for features");
  GB_CHECK(r.layer.empty(), InvalidArgument, "--layer applies to class activation maps of images",
           "drop --layer; feature attributions are taken with respect to the input");
  const fs::path dir = r.out_dir.empty() ? m.run_dir / "explain" : r.out_dir;
  std::vector<std::string> features = m.info.feature_names;
  std::int64_t width = 1;
  for (auto d : m.info.sample_shape) width *= d;
  if (static_cast<std::int64_t>(features.size()) != width) {
    features.clear();
    for (std::int64_t i = 0; i < width; ++i) features.push_back("f" + std::to_string(i));
  }
  const data::Batch b = ds.get_batch(torch::tensor(chosen, torch::kLong));
  const at::Tensor x = b.inputs.to(m.device, torch::kFloat);
  // In chunks, so a long run shows progress (integrated gradients costs 50 forward and backward
  // passes per sample); each sample's attribution depends on that sample alone.
  const std::int64_t total = x.size(0), chunk = 64;
  ProgressBar bar(std::cerr, total > chunk);
  bar.start(method == "saliency" ? "saliency" : "integrated gradients", total);
  explain::Attribution a;
  std::vector<at::Tensor> attributions, deltas, outputs;
  for (std::int64_t start = 0; start < total; start += chunk) {
    const std::int64_t end = std::min(total, start + chunk);
    const std::vector<std::int64_t> targets(static_cast<std::size_t>(end - start), target);
    const at::Tensor part = x.slice(0, start, end);
    const explain::Attribution p = method == "saliency" ? explain::saliency(*m.model, part, targets)
                                                        : explain::integrated_gradients(*m.model, part, targets);
    attributions.push_back(p.attributions);
    outputs.push_back(p.outputs);
    if (p.delta.defined()) deltas.push_back(p.delta);
    a.targets.insert(a.targets.end(), p.targets.begin(), p.targets.end());
    bar.update(end, "", 0.0);
  }
  bar.finish(fmt::format("{} samples", total));
  a.attributions = torch::cat(attributions);
  a.outputs = torch::cat(outputs);
  if (!deltas.empty()) a.delta = torch::cat(deltas);
  const at::Tensor attr = a.attributions.to(torch::kCPU, torch::kFloat).reshape({x.size(0), -1});
  const at::Tensor probs = m.outputs_probabilities ? a.outputs.to(torch::kCPU, torch::kDouble)
                                                   : torch::softmax(a.outputs.to(torch::kCPU, torch::kDouble), 1);
  const at::Tensor file_index = data::root_indices(ds, torch::tensor(chosen, torch::kLong));
  nlohmann::json items = nlohmann::json::array();
  for (std::size_t j = 0; j < chosen.size(); ++j) {
    const auto row = static_cast<std::int64_t>(j);
    const std::int64_t label = b.targets[row].item<std::int64_t>();
    const std::int64_t t = a.targets[j];
    // The sample's strongest features, signed (positive: raised the explained class's score).
    const at::Tensor order = attr[row].abs().argsort(0, /*descending=*/true);
    nlohmann::json top = nlohmann::json::array();
    for (std::int64_t q = 0; q < std::min<std::int64_t>(5, width); ++q) {
      const std::int64_t f = order[q].item<std::int64_t>();
      top.push_back({{"feature", features[static_cast<std::size_t>(f)]}, {"attribution", attr[row][f].item<double>()}});
    }
    nlohmann::json item = item_json(chosen[j], file_index[row].item<std::int64_t>(), label, t, probs[row], names);
    item["top_features"] = top;
    if (a.delta.defined()) item["convergence_delta"] = a.delta[row].item<double>();
    items.push_back(item);
  }
  fs::create_directories(dir);
  data::write_npy(dir / "attributions.npy", attr);
  nlohmann::json index = {{"kind", "features"},
                          {"method", method},
                          {"split", r.split},
                          {"model", m.config.model.name},
                          {"features", features},
                          {"attributions", "attributions.npy"},
                          {"importance", explain::to_json(explain::feature_importance(attr, features))},
                          {"items", items}};
  if (method == "integrated_gradients")
    index["note"] =
        "Integrated Gradients (captum's definition: zero baseline, 50 Gauss-Legendre steps) of the "
        "explained class's output; a bar is the mean |attribution| of a feature over these samples";
  if (m.model_file.empty()) {
    index["checkpoint"] = r.checkpoint.string();
  } else {
    index["model_file"] = m.model_file.string();
    index["contract"] = m.contract_source;
  }
  write_file_atomic(dir / "index.json", index.dump(2) + "\n");
  index["out_dir"] = dir.string();
  return index;
}

}  // namespace

nlohmann::json explain_checkpoint(const ExplainRequest& r) {
  GB_CHECK(r.checkpoint.empty() || r.script.model.empty(), InvalidArgument,
           "--checkpoint and --model are mutually exclusive",
           "explain a glassbox checkpoint (--checkpoint) or a TorchScript file (--model), one at a time");
  LoadedModel m = r.script.model.empty() ? load_checkpoint_for_inference(r.checkpoint, r.device, r.data_overrides)
                                         : load_script_for_inference(r.script, r.device);
  auto* script = dynamic_cast<nn::ScriptModel*>(m.model.get());
  const auto ds = split_dataset(m, r.split);
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
    pred = predict_probabilities(m, *ds, 512).argmax(1);
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
  if (m.info.sample_shape.size() != 3) return explain_features(m, r, *ds, chosen, target, names);
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
  const data::ImageDataset* images = image_root(*ds);
  const auto total = static_cast<std::int64_t>(chosen.size());
  ProgressBar bar(std::cerr, total > 16);
  bar.start(explain::cam_method_name(co.method), total);
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
      const std::int64_t file = file_index[static_cast<std::int64_t>(start + j)].item<std::int64_t>();
      std::string original_name;
      if (images != nullptr) {
        original_name = fmt::format("sample-{}-original.png", idx);
        if (!write_original_overlay(dir / original_name, *images, file, cam.maps[static_cast<std::int64_t>(j)]))
          original_name.clear();
      }
      const std::string heat_name = fmt::format("sample-{}-heatmap.png", idx),
                        over_name = fmt::format("sample-{}-overlay.png", idx);
      explain::write_rgb_png(dir / heat_name, heat[static_cast<std::int64_t>(j)]);
      explain::write_rgb_png(dir / over_name, overlay[static_cast<std::int64_t>(j)]);
      const std::int64_t t = cam.targets[j];
      nlohmann::json item = item_json(idx, file_index[static_cast<std::int64_t>(start + j)].item<std::int64_t>(), label,
                                      t, probs[static_cast<std::int64_t>(j)], names);
      item["heatmap"] = heat_name;
      item["overlay"] = over_name;
      if (images != nullptr) item["file"] = images->files().at(static_cast<std::size_t>(file)).name();
      if (!original_name.empty()) item["original_overlay"] = original_name;
      items.push_back(item);
    }
    bar.update(static_cast<std::int64_t>(std::min(chosen.size(), start + 16)), "", 0.0);
  }
  bar.finish(fmt::format("{} samples", total));
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

}  // namespace glassbox::app
