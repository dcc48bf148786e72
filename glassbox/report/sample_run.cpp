#include "glassbox/report/sample_run.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/base/files.h"
#include "glassbox/base/png.h"

namespace glassbox::report {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::string> kNames = {"cat & <dog>", "bird", "fish", "frog"};

json summary() {
  return {{"best_checkpoint", "runs/sample/checkpoints/epoch=2-step=60.ckpt"},
          {"best_score", 0.7731},
          {"class_names", kNames},
          {"device", "cpu"},
          {"epochs", 3},
          {"fit_seconds", 83.5},
          {"glassbox_version", "0.1.0"},
          {"global_step", 60},
          {"last_checkpoint", "runs/sample/checkpoints/last.ckpt"},
          {"model", "cnn"},
          {"parameters", 12345},
          {"precision", "bf16-mixed"},
          {"run_dir", "runs/sample"},
          {"skipped_steps", 0},
          {"stop_reason", "early stopping: val_loss did not improve for 3 epochs"},
          {"test", {{"accuracy", 0.76}, {"loss", 0.6512}, {"samples", 125}}},
          {"threads", 2},
          {"torch_version", "2.9.1"},
          {"train_samples_per_second", 4321.9},
          {"trainable_parameters", 12345},
          {"wall_seconds", 90.25}};
}

std::string metrics_jsonl() {
  std::string out;
  const int per_epoch = 20, every = 5, epochs = 3;
  for (int e = 0; e < epochs; ++e) {
    double loss_sum = 0, acc_sum = 0;
    int n = 0;
    for (int s = every; s <= per_epoch; s += every) {
      const int step = e * per_epoch + s;
      const double t = step / 60.0;
      // Warm-up to 1e-2 over the first 20 steps, then a decay to 1e-6: four decades in all.
      const double lr = step <= 20 ? 1e-5 * std::pow(1000.0, step / 20.0) : 1e-2 * std::pow(1e-4, (step - 20) / 40.0);
      const double loss = 1.4 - 0.9 * t + 0.05 * std::sin(step * 1.7);
      const double acc = 0.35 + 0.45 * t + 0.03 * std::cos(step * 2.3);
      json row = {{"epoch", e},
                  {"step", step},
                  {"lr", lr},
                  {"grad_norm", 0.4 + 4.0 * std::exp(-3 * t)},
                  {"samples_per_second", 4000 + 10 * step},
                  {"train_acc", acc},
                  {"train_loss", loss}};
      if (step == 35) row["train_loss"] = nullptr;  // a non-finite loss is logged as null
      out += row.dump() + "\n";
      out += json{{"epoch", e}, {"lr-group0", lr}, {"step", step}}.dump() + "\n";
      if (step != 35) loss_sum += loss;
      acc_sum += acc;
      ++n;
    }
    const int step = (e + 1) * per_epoch;
    out += json{{"epoch", e},
                {"epoch_end", true},
                {"lr", 1e-2 * std::pow(1e-4, (step - 20) / 40.0)},
                {"step", step},
                {"train_acc", acc_sum / n},
                {"train_loss", loss_sum / n},
                {"val_acc", 0.55 + 0.1 * e},
                {"val_loss", 1.1 - 0.2 * e}}
               .dump() +
           "\n";
  }
  out += json{{"epoch", epochs}, {"step", epochs * per_epoch}, {"test_acc", 0.76}, {"test_loss", 0.6512}}.dump() + "\n";
  return out;
}

json eval_metrics(bool fairness) {
  const std::vector<std::vector<int>> cm = {{40, 5, 0, 5}, {4, 30, 0, 6}, {3, 2, 0, 0}, {2, 3, 0, 25}};
  const std::vector<double> ap = {0.871, 0.802, 0.153, 0.764}, auc = {0.931, 0.902, 0.612, 0.887};
  const int k = 4;
  int total = 0, correct = 0;
  json per_class = json::array(), curves = json::array();
  double macro_p = 0, macro_r = 0, macro_f = 0, w_p = 0, w_r = 0, w_f = 0;
  for (int c = 0; c < k; ++c) {
    int support = 0, predicted = 0;
    for (int j = 0; j < k; ++j) support += cm[c][j], predicted += cm[j][c];
    total += support;
    correct += cm[c][c];
    const double r = static_cast<double>(cm[c][c]) / support;
    json p = predicted > 0 ? json(static_cast<double>(cm[c][c]) / predicted) : json(nullptr);
    const double pv = predicted > 0 ? p.get<double>() : 0.0;
    const double f = pv + r > 0 ? 2 * pv * r / (pv + r) : 0.0;
    macro_p += pv / k, macro_r += r / k, macro_f += f / k;
    w_p += pv * support, w_r += r * support, w_f += f * support;
    per_class.push_back({{"class", c},
                         {"name", kNames[c]},
                         {"precision", p},
                         {"recall", r},
                         {"f1", f},
                         {"support", support},
                         {"predicted", predicted},
                         {"average_precision", ap[c]},
                         {"roc_auc", auc[c]}});
    json rec = json::array(), prec = json::array();
    for (int i = 0; i <= 20; ++i) {
      const double x = i / 20.0;
      rec.push_back(x);
      prec.push_back(1.0 - (1.0 - ap[c]) * std::pow(x, 1.5 + c));
    }
    curves.push_back({{"class", c}, {"precision", prec}, {"recall", rec}});
  }
  json bins = json::array();
  const std::vector<int> counts = {0, 0, 1, 4, 9, 14, 17, 20, 25, 35};
  for (int b = 0; b < 10; ++b) {
    const double lo = b / 10.0, hi = (b + 1) / 10.0;
    json bin = {{"lower", lo}, {"upper", hi}, {"count", counts[b]}, {"accuracy", nullptr}, {"confidence", nullptr}};
    if (counts[b] > 0) {
      bin["confidence"] = lo + 0.06;
      bin["accuracy"] = std::min(1.0, lo + 0.06 - 0.08 + 0.01 * b);
    }
    bins.push_back(bin);
  }
  json m = {
      {"split", "test"},
      {"checkpoint", "runs/sample/checkpoints/last.ckpt"},
      {"num_samples", total},
      {"num_classes", k},
      {"class_names", kNames},
      {"accuracy", static_cast<double>(correct) / total},
      {"balanced_accuracy", macro_r},
      {"notes", {"fish is never predicted: its precision is undefined"}},
      {"top_k_accuracy", {{"1", static_cast<double>(correct) / total}, {"3", 0.944}}},
      {"majority_baseline", {{"class", 0}, {"name", kNames[0]}, {"accuracy", 50.0 / total}}},
      {"imbalance",
       {{"max_to_min_ratio", 10.0}, {"warning", "class 'fish' has 5 samples, 10x fewer than 'cat & <dog>'"}}},
      {"confusion_matrix", cm},
      {"per_class", per_class},
      {"undefined", {{"precision", {2}}, {"recall", json::array()}, {"f1", json::array()}, {"roc_auc", json::array()}}},
      {"averages",
       {{"micro", {{"precision", 0.76}, {"recall", 0.76}, {"f1", 0.76}}},
        {"macro", {{"precision", macro_p}, {"recall", macro_r}, {"f1", macro_f}}},
        {"weighted", {{"precision", w_p / total}, {"recall", w_r / total}, {"f1", w_f / total}}}}},
      {"average_precision_macro", 0.6475},
      {"roc_auc_ovr_macro", 0.833},
      {"calibration", {{"ece", 0.0734}, {"mce", 0.1412}, {"bins", 10}, {"reliability", bins}}},
      {"pr_curves", curves},
      {"class_weights_balanced", {{"split", "train"}, {"weights", {0.625, 0.78125, 6.25, 1.0416}}}},
  };
  if (fairness) {
    m["fairness"] = {{"attribute", "group"},
                     {"positive_class", 1},
                     {"positive_class_name", "bird"},
                     {"privileged", "a"},
                     {"threshold", 0.1},
                     {"groups",
                      {{{"group", "a"},
                        {"support", 70},
                        {"positives", 28},
                        {"negatives", 42},
                        {"selection_rate", 0.41},
                        {"tpr", 0.78},
                        {"fpr", 0.09},
                        {"accuracy", 0.79}},
                       {{"group", "b"},
                        {"support", 55},
                        {"positives", 12},
                        {"negatives", 43},
                        {"selection_rate", 0.23},
                        {"tpr", 0.71},
                        {"fpr", 0.06},
                        {"accuracy", 0.72}}}},
                     {"differences",
                      {{"convention", "max - min between groups"},
                       {"demographic_parity", 0.18},
                       {"equal_opportunity", 0.07},
                       {"fpr", 0.03},
                       {"equalized_odds", 0.07}}},
                     {"ratios", {{"disparate_impact", 0.561}, {"demographic_parity_ratio", 0.561}}},
                     {"aif360",
                      {{"statistical_parity_difference", -0.18},
                       {"equal_opportunity_difference", -0.07},
                       {"average_odds_difference", -0.05},
                       {"disparate_impact", 0.561},
                       {"fpr_difference", -0.03}}},
                     {"notes", {"group b has 12 positives"}},
                     {"per_class",
                      {{{"positive_class", 0},
                        {"differences", {{"demographic_parity", 0.04}}},
                        {"ratios", {{"disparate_impact", 0.93}}}},
                       {{"positive_class", 1},
                        {"differences", {{"demographic_parity", 0.18}}},
                        {"ratios", {{"disparate_impact", 0.561}}}}}},
                     {"flags",
                      {{{"metric", "demographic_parity"},
                        {"value", 0.18},
                        {"threshold", 0.1},
                        {"message", "selection rates differ by 0.18 between groups a and b"}}}}};
  }
  return m;
}

// A 32x32 RGB picture: a diagonal gradient tinted by `seed`, and the heat map of a blob.
void write_images(const fs::path& dir, int index, int seed) {
  const int w = 32, h = 32;
  std::vector<std::uint8_t> overlay(w * h * 3), heat(w * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double d = std::exp(-((x - 10 - seed) * (x - 10 - seed) + (y - 16) * (y - 16)) / 60.0);
      auto* o = &overlay[(y * w + x) * 3];
      auto* m = &heat[(y * w + x) * 3];
      o[0] = static_cast<std::uint8_t>(std::min(255.0, 60 + 6 * x + 120 * d));
      o[1] = static_cast<std::uint8_t>(40 + 5 * y);
      o[2] = static_cast<std::uint8_t>((seed * 40 + 3 * x) % 256);
      m[0] = static_cast<std::uint8_t>(255 * d);
      m[1] = static_cast<std::uint8_t>(80 * d);
      m[2] = static_cast<std::uint8_t>(255 * (1 - d));
    }
  }
  write_png(dir / ("sample-" + std::to_string(index) + "-overlay.png"), overlay.data(), w, h, 3);
  write_png(dir / ("sample-" + std::to_string(index) + "-heatmap.png"), heat.data(), w, h, 3);
}

json explain_index(const fs::path& dir) {
  struct S {
    int index, label, predicted;
    double p;
  };
  const std::vector<S> samples = {
      {3, 0, 0, 0.97}, {8, 1, 1, 0.88}, {17, 3, 3, 0.91}, {21, 2, 0, 0.64}, {42, 1, 3, 0.55}};
  json items = json::array();
  int seed = 0;
  for (const S& s : samples) {
    write_images(dir, s.index, seed++);
    const std::string base = "sample-" + std::to_string(s.index);
    items.push_back({{"index", s.index},
                     {"label", s.label},
                     {"label_name", kNames[s.label]},
                     {"predicted", s.predicted},
                     {"predicted_name", kNames[s.predicted]},
                     {"target_class", s.predicted},
                     {"probability", s.p},
                     {"correct", s.label == s.predicted},
                     {"heatmap", base + "-heatmap.png"},
                     {"overlay", base + "-overlay.png"}});
  }
  return {{"method", "gradcam"},
          {"layer", "features.3"},
          {"note", "features.3 is the last convolutional block"},
          {"items", items}};
}

json doctor() {
  return {{"findings",
           {{{"id", "class-imbalance"},
             {"severity", "warning"},
             {"confidence", 0.8},
             {"where", {{"split", "train"}}},
             {"evidence", "largest/smallest class = 10.0 (fish: 5 samples)"},
             {"fix", "pass the balanced class weights to the loss"}},
            {{"id", "lr-too-high"},
             {"severity", "error"},
             {"confidence", 0.65},
             {"where", {{"step", 20}, {"parameter", "features.0.weight"}}},
             {"evidence", "update/weight ratio 0.21 at step 20 (> 0.01)"},
             {"fix", "lower optim.lr to 3e-3"}},
            {{"id", "dead-relu"},
             {"severity", "error"},
             {"confidence", 0.6},
             {"where", {{"layer", "features.1"}}},
             {"evidence", "70% of the units of features.1 were never positive on a batch"},
             {"fix", "this follows from lr-too-high above: fix that first"},
             {"because_of", {"lr-too-high"}}},
            {{"id", "slow-loader"},
             {"severity", "info"},
             {"where", json::object()},
             {"evidence", "data wait 31 % of step time"},
             {"fix", "set data.loader.num_workers = 2"}}}}};
}

}  // namespace

void write_sample_run(const fs::path& dir, const SampleRunParts& parts) {
  fs::create_directories(dir);
  write_file_atomic(dir / "summary.json", summary().dump(2));
  write_file_atomic(dir / "config.toml",
                    "[run]\nname = \"<sample> & 'quotes'\"\n\n[model]\nname = 'cnn'\n\n[trainer]\nmax_epochs = 3\n");
  write_file_atomic(dir / "metrics.jsonl", metrics_jsonl());
  if (parts.eval) write_file_atomic(dir / "eval" / "metrics.json", eval_metrics(parts.fairness).dump(2));
  if (parts.explain) write_file_atomic(dir / "explain" / "index.json", explain_index(dir / "explain").dump(2));
  if (parts.doctor) write_file_atomic(dir / "doctor.json", doctor().dump(2));
}

}  // namespace glassbox::report
