#include "glassbox/app/evaluate.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/app/inference.h"
#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/csv.h"
#include "glassbox/data/npy.h"
#include "glassbox/metrics/calibration.h"
#include "glassbox/metrics/classification.h"
#include "glassbox/metrics/fairness.h"
#include "glassbox/metrics/multilabel.h"
#include "glassbox/metrics/regression.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

std::string value_text(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 1e15)
    return fmt::format("{}", static_cast<std::int64_t>(v));
  return fmt::format("{}", v);
}

std::vector<std::string> tensor_values(const at::Tensor& t) {
  const at::Tensor d = t.to(torch::kDouble).contiguous();
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(d.numel()));
  for (std::int64_t i = 0; i < d.numel(); ++i) out.push_back(value_text(d.data_ptr<double>()[i]));
  return out;
}

std::string trim(std::string s) {
  const auto a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const auto b = s.find_last_not_of(" \t\r\n");
  s = s.substr(a, b - a + 1);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) {
      f.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  f.push_back(trim(cur));
  return f;
}

// One group value per row of the split's data file, from a separate file.
std::vector<std::string> read_group_file(const fs::path& path, const std::string& column) {
  GB_CHECK(fs::exists(path), NotFound, "no group file at " << path.string(),
           "pass --groups FILE (.npy, .csv with a header, or .txt)");
  const std::string ext = path.extension().string();
  if (ext == ".npy") {
    const at::Tensor t = data::read_npy(path);
    GB_CHECK(t.dim() == 1 || (t.dim() == 2 && t.size(1) == 1), DataLoss,
             path.string() << " holds an array of shape " << t.sizes() << ", not [N]",
             "save one group value per sample: np.save(path, groups)");
    return tensor_values(t.reshape({-1}));
  }
  std::istringstream in(read_file(path));
  std::string line;
  std::vector<std::string> values;
  if (ext == ".csv") {
    GB_CHECK(static_cast<bool>(std::getline(in, line)), DataLoss, path.string() << " is empty",
             "write a header line, then one row per sample");
    const std::vector<std::string> header = split_fields(line);
    std::size_t col = 0;
    if (header.size() > 1 || !column.empty()) {
      GB_CHECK(
          !column.empty(), InvalidArgument, path.string() << " has " << header.size() << " columns",
          "name the group column with --group-column (one of: " + fmt::format("{}", fmt::join(header, ", ")) + ")");
      auto it = std::find(header.begin(), header.end(), column);
      if (it == header.end()) {
        const std::string near = closest_match(column, header);
        GB_CHECK(
            false, InvalidArgument, path.string() << " has no column '" << column << "'",
            (near.empty() ? "columns: " + fmt::format("{}", fmt::join(header, ", ")) : "did you mean '" + near + "'?"));
      }
      col = static_cast<std::size_t>(it - header.begin());
    }
    std::int64_t row = 1;
    while (std::getline(in, line)) {
      ++row;
      if (trim(line).empty()) continue;
      const auto f = split_fields(line);
      GB_CHECK(col < f.size(), DataLoss,
               path.string() << ":" << row << ": " << f.size() << " fields, the header has " << header.size(),
               "give every row all columns");
      values.push_back(f[col]);
    }
    return values;
  }
  while (std::getline(in, line))
    if (!trim(line).empty()) values.push_back(trim(line));
  return values;
}

// A column of the data set's own file (CSV by name or index, NPY inputs by feature index).
std::vector<std::string> read_data_column(const train::DataModuleOptions& d, bool test_file,
                                          const std::string& column) {
  const auto& o = d.source;
  auto at_root = [&](const std::string& f) { return fs::path(f).is_absolute() ? fs::path(f) : fs::path(o.root) / f; };
  auto index_of = [&](const std::vector<std::string>& names) -> std::int64_t {
    auto it = std::find(names.begin(), names.end(), column);
    if (it != names.end()) return it - names.begin();
    char* end = nullptr;
    const long long v = std::strtoll(column.c_str(), &end, 10);
    if (end != nullptr && *end == '\0' && !column.empty() && v >= 0 && v < static_cast<long long>(names.size()))
      return v;
    const std::string near = closest_match(column, names);
    GB_CHECK(false, InvalidArgument, "the data set has no column '" << column << "'",
             (near.empty() ? std::string("name a feature column, or give a separate file with --groups")
                           : "did you mean '" + near + "'?"));
    return -1;
  };
  if (o.format == data::DataFormat::kCsv) {
    const data::CsvTable t = data::read_csv(at_root(test_file ? o.test_csv : o.train_csv), o.label_column);
    return tensor_values(t.features.select(1, index_of(t.feature_names)));
  }
  if (o.format == data::DataFormat::kNpy) {
    const at::Tensor x = data::read_npy(at_root(test_file ? o.test_x : o.train_x));
    const at::Tensor flat = x.reshape({x.size(0), -1});
    std::vector<std::string> names;
    for (std::int64_t i = 0; i < flat.size(1); ++i) names.push_back(std::to_string(i));
    return tensor_values(flat.select(1, index_of(names)));
  }
  GB_CHECK(false, InvalidArgument, "--group-column needs a CSV or NPY data set; this run reads " << name_of(o.format),
           "give the groups in a separate file with --groups FILE");
  return {};
}

std::int64_t parse_class(const std::string& s, const std::vector<std::string>& names, std::int64_t k) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return static_cast<std::int64_t>(i);
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  GB_CHECK(end != nullptr && *end == '\0' && !s.empty() && v >= 0 && v < k, InvalidArgument,
           "unknown positive class '" << s << "'",
           fmt::format("give a class index 0..{} or a class name ({})", k - 1, fmt::join(names, ", ")));
  return v;
}

// Regression and multi-label models: scikit-learn's metrics of their outputs against the
// split's targets, per target / label and averaged; predictions.csv holds both side by side.
nlohmann::json evaluate_values(const EvalOptions& o, LoadedModel& m, const data::Dataset& ds) {
  GB_CHECK(o.groups_file.empty() && o.group_column.empty(), InvalidArgument,
           "the fairness audit compares class decisions; " << m.source() << " is a " << name_of(m.task) << " model",
           "drop --groups / --group-column");
  const at::Tensor outputs = predict_outputs(m, ds, o.batch_size).contiguous();
  at::Tensor targets = ds.all_targets();
  if (!targets.defined()) targets = ds.get_batch(torch::arange(ds.size(), torch::kLong)).targets;
  targets = targets.to(torch::kCPU, torch::kDouble).reshape(outputs.sizes()).contiguous();
  const at::Tensor index = data::root_indices(ds, torch::arange(ds.size(), torch::kLong)).to(torch::kLong).contiguous();
  const std::int64_t n = outputs.size(0), k = outputs.size(1);
  std::vector<std::string> names = m.info.class_names;
  for (std::int64_t c = static_cast<std::int64_t>(names.size()); c < k; ++c) names.push_back(std::to_string(c));
  const std::vector<double> pred(outputs.const_data_ptr<double>(), outputs.const_data_ptr<double>() + outputs.numel());
  const std::vector<double> truth(targets.const_data_ptr<double>(), targets.const_data_ptr<double>() + targets.numel());
  nlohmann::json j;
  if (m.task == TaskKind::kRegression) {
    j = metrics::regression_report(truth, pred, n, k).to_json();
    for (std::size_t c = 0; c < j["per_output"].size(); ++c) j["per_output"][c]["name"] = names[c];
  } else {
    std::vector<unsigned char> bits(truth.size());
    for (std::size_t i = 0; i < truth.size(); ++i) bits[i] = truth[i] >= 0.5 ? 1 : 0;
    j = metrics::multilabel_report(bits, pred, n, k).to_json(names);
  }
  j["task"] = name_of(m.task);
  j["split"] = o.split;
  j["names"] = names;
  if (m.model_file.empty()) {
    j["checkpoint"] = o.checkpoint.string();
    j["global_step"] = m.global_step;
  } else {
    j["model_file"] = m.model_file.string();
    j["contract"] = m.contract_source;
  }
  j["model"] = m.config.model.name;
  if (o.write) {
    const fs::path dir = o.out_dir.empty() ? m.run_dir / "eval" : o.out_dir;
    fs::create_directories(dir);
    // index, then each target's true value and prediction (multilabel: 0/1 and the probability).
    const char* what = m.task == TaskKind::kRegression ? "pred_" : "p_";
    std::string csv = "index";
    for (std::int64_t c = 0; c < k; ++c) csv += ",y_" + std::to_string(c) + "," + what + std::to_string(c);
    csv += "\n";
    const std::int64_t* row = index.const_data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) {
      csv += std::to_string(row[i]);
      for (std::int64_t c = 0; c < k; ++c) csv += fmt::format(",{},{}", truth[i * k + c], pred[i * k + c]);
      csv += "\n";
    }
    write_file_atomic(dir / "predictions.csv", csv);
    data::write_npy(dir / "predictions.npy", torch::cat({index.to(torch::kDouble).unsqueeze(1), targets, outputs}, 1));
    write_file_atomic(dir / "metrics.json", j.dump(2) + "\n");
    j["out_dir"] = dir.string();
  }
  return j;
}

std::string format_values_summary(const nlohmann::json& j) {
  const auto num = [](const nlohmann::json& v) {
    return v.is_number() ? fmt::format("{:.4f}", v.get<double>()) : std::string("     -");
  };
  std::string s =
      fmt::format("{} split: {} samples, {} {} ({} {})\n", j.value("split", "?"), j.value("num_samples", 0),
                  j["names"].size(), j.value("task", "") == "regression" ? "targets" : "labels",
                  j.contains("model_file") ? "model" : "checkpoint", j.value("model_file", j.value("checkpoint", "?")));
  if (j.value("task", "") == "regression") {
    s += fmt::format("MAE {:.6g}   RMSE {:.6g}   R² {:.4f}   explained variance {:.4f}   max error {:.6g}\n",
                     j.value("mae", 0.0), j.value("rmse", 0.0), j.value("r2", 0.0), j.value("explained_variance", 0.0),
                     j.value("max_error", 0.0));
    s += fmt::format("\n{:<20} {:>12} {:>12} {:>9} {:>12}\n", "target", "MAE", "RMSE", "R²", "median AE");
    for (const auto& r : j["per_output"])
      s += fmt::format("{:<20} {:>12.6g} {:>12.6g} {:>9} {:>12.6g}\n", r.value("name", "").substr(0, 20),
                       r.value("mae", 0.0), r.value("rmse", 0.0), num(r["r2"]), r.value("median_absolute_error", 0.0));
    return s;
  }
  s += fmt::format("subset accuracy {:.4f}   Hamming loss {:.4f}   micro F1 {}   macro F1 {}   samples F1 {}\n",
                   j.value("subset_accuracy", 0.0), j.value("hamming_loss", 0.0), num(j["micro"]["f1"]),
                   num(j["macro"]["f1"]), num(j["samples"]["f1"]));
  s += fmt::format("\n{:<20} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}\n", "label", "precision", "recall", "f1", "support",
                   "AP", "ROC AUC");
  for (const auto& r : j["per_label"])
    s += fmt::format("{:<20} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}\n", r.value("label", "").substr(0, 20),
                     num(r["precision"]), num(r["recall"]), num(r["f1"]), r.value("support", 0),
                     num(r["average_precision"]), num(r["roc_auc"]));
  s += fmt::format("\nmacro AP {}   micro AP {}   macro ROC AUC {}   (threshold {:g})\n",
                   num(j["average_precision"]["macro"]), num(j["average_precision"]["micro"]),
                   num(j["roc_auc"]["macro"]), j.value("threshold", 0.5));
  return s;
}

}  // namespace

nlohmann::json evaluate_checkpoint(const EvalOptions& o) {
  GB_CHECK(o.bins >= 1, InvalidArgument, "--bins must be >= 1, got " << o.bins, "use 15");
  GB_CHECK(o.checkpoint.empty() || o.script.model.empty(), InvalidArgument,
           "--checkpoint and --model are mutually exclusive",
           "evaluate a glassbox checkpoint (--checkpoint) or a TorchScript file (--model), one at a time");
  LoadedModel m = o.script.model.empty() ? load_checkpoint_for_inference(o.checkpoint, o.device, o.data_overrides)
                                         : load_script_for_inference(o.script, o.device);
  const auto ds = split_dataset(m, o.split);
  if (m.task != TaskKind::kClassification) return evaluate_values(o, m, *ds);
  const at::Tensor probs = predict_probabilities(m, *ds, o.batch_size);
  at::Tensor labels = ds->all_targets();
  if (!labels.defined()) labels = ds->get_batch(torch::arange(ds->size(), torch::kLong)).targets;
  labels = labels.to(torch::kCPU, torch::kLong);
  const at::Tensor index =
      data::root_indices(*ds, torch::arange(ds->size(), torch::kLong)).to(torch::kLong).contiguous();
  const std::int64_t* file_row = index.data_ptr<std::int64_t>();
  const std::int64_t k = m.info.num_classes;
  std::vector<std::string> names = m.info.class_names;
  for (std::int64_t c = static_cast<std::int64_t>(names.size()); c < k; ++c) names.push_back(std::to_string(c));

  const metrics::ClassificationInput in = metrics::classification_input(labels, probs);
  const metrics::ClassificationReport rep = metrics::classification_report(in);
  nlohmann::json j = rep.to_json(names);
  j["split"] = o.split;
  if (m.model_file.empty()) {
    j["checkpoint"] = o.checkpoint.string();
    j["global_step"] = m.global_step;
  } else {
    j["model_file"] = m.model_file.string();
    j["contract"] = m.contract_source;
  }
  j["model"] = m.config.model.name;
  j["calibration"] = metrics::calibration(probs, labels, o.bins).to_json();
  j["pr_curves"] = metrics::pr_curves_json(in);
  std::vector<std::string> notes = j["notes"].get<std::vector<std::string>>();
  if (!m.test_only && m.data->train_dataset() && m.data->train_dataset()->size() > 0) {
    at::Tensor train_y = m.data->train_dataset()->all_targets();
    if (!train_y.defined())
      train_y =
          m.data->train_dataset()->get_batch(torch::arange(m.data->train_dataset()->size(), torch::kLong)).targets;
    train_y = train_y.to(torch::kLong).contiguous();
    const std::vector<std::int64_t> ty(train_y.data_ptr<std::int64_t>(),
                                       train_y.data_ptr<std::int64_t>() + train_y.numel());
    j["class_weights_balanced"] = {{"split", "train"}, {"weights", metrics::balanced_class_weights(ty, k, &notes)}};
  }

  if (!o.groups_file.empty() || !o.group_column.empty()) {
    const bool test_file = o.split == "test";
    const std::vector<std::string> all = o.groups_file.empty()
                                             ? read_data_column(m.config.data, test_file, o.group_column)
                                             : read_group_file(o.groups_file, o.group_column);
    const std::string source = o.groups_file.empty() ? "column '" + o.group_column + "'" : o.groups_file.string();
    const std::int64_t needed = index.numel() > 0 ? index.max().item<std::int64_t>() + 1 : 0;
    GB_CHECK(
        static_cast<std::int64_t>(all.size()) >= needed, InvalidArgument,
        source << " has " << all.size() << " group values, but the " << o.split << " split reaches row " << needed - 1
               << " of its data file",
        std::string("give one value per sample of the ") + (test_file ? "test" : "training") + " file, in file order");
    std::vector<std::string> groups;
    groups.reserve(static_cast<std::size_t>(index.numel()));
    for (std::int64_t i = 0; i < index.numel(); ++i) groups.push_back(all[static_cast<std::size_t>(file_row[i])]);
    // A continuous attribute (age, income) makes one "group" per value: refused, with the fix.
    std::set<std::string> distinct(groups.begin(), groups.end());
    bool numeric = true;
    for (const auto& g : distinct) {
      char* end = nullptr;
      std::strtod(g.c_str(), &end);
      numeric = numeric && !g.empty() && end != nullptr && *end == '\0';
    }
    GB_CHECK(!(numeric && distinct.size() > 20), InvalidArgument,
             source << " looks continuous: " << distinct.size() << " distinct numeric values among " << groups.size()
                    << " samples, so every value would be its own group",
             "audit a categorical attribute, or bin this one into a few ranges first (e.g. an age_band column)");
    metrics::FairnessOptions fo;
    fo.attribute = o.group_column.empty() ? o.groups_file.stem().string() : o.group_column;
    fo.privileged = o.privileged;
    fo.threshold = o.fairness_threshold;
    if (!o.positive_class.empty()) fo.positive_class = parse_class(o.positive_class, names, k);
    const std::vector<std::int64_t> y(in.labels.begin(), in.labels.end());
    j["fairness"] = metrics::fairness_audit(y, rep.predicted, groups, k, fo).to_json(names);
  }
  j["notes"] = notes;

  if (o.write) {
    const fs::path dir = o.out_dir.empty() ? m.run_dir / "eval" : o.out_dir;
    fs::create_directories(dir);
    // Predictions first: metrics.json appears last, once everything it describes exists.
    std::string csv = "index,label,predicted";
    for (std::int64_t c = 0; c < k; ++c) csv += ",p_" + std::to_string(c);
    csv += "\n";
    const double* p = in.scores.data();
    for (std::int64_t i = 0; i < rep.num_samples; ++i) {
      csv += fmt::format("{},{},{}", file_row[i], in.labels[static_cast<std::size_t>(i)],
                         rep.predicted[static_cast<std::size_t>(i)]);
      for (std::int64_t c = 0; c < k; ++c) csv += fmt::format(",{}", p[i * k + c]);
      csv += "\n";
    }
    write_file_atomic(dir / "predictions.csv", csv);
    at::Tensor table = torch::cat({index.to(torch::kDouble).unsqueeze(1), labels.to(torch::kDouble).unsqueeze(1),
                                   torch::tensor(rep.predicted, torch::kLong).to(torch::kDouble).unsqueeze(1), probs},
                                  1);
    data::write_npy(dir / "predictions.npy", table);
    write_file_atomic(dir / "metrics.json", j.dump(2) + "\n");
    j["out_dir"] = dir.string();
  }
  return j;
}

std::string format_eval_summary(const nlohmann::json& j) {
  if (j.contains("task")) return format_values_summary(j);
  std::string s;
  s += fmt::format("{} split: {} samples, {} classes ({} {})\n", j.value("split", "?"), j.value("num_samples", 0),
                   j.value("num_classes", 0), j.contains("model_file") ? "model" : "checkpoint",
                   j.value("model_file", j.value("checkpoint", "?")));
  const auto& base = j["majority_baseline"];
  s += fmt::format("accuracy {:.4f}   balanced accuracy {:.4f}   majority-class baseline {:.4f} (class {} '{}')\n",
                   j.value("accuracy", 0.0), j.value("balanced_accuracy", 0.0), base.value("accuracy", 0.0),
                   base.value("class", 0), base.value("name", ""));
  if (j.contains("top_k_accuracy")) {
    std::string tk;
    for (auto it = j["top_k_accuracy"].begin(); it != j["top_k_accuracy"].end(); ++it)
      tk += fmt::format("  top-{} {:.4f}", it.key(), it.value().get<double>());
    s += tk.substr(2) + "\n";
  }
  const auto num = [](const nlohmann::json& v) {
    return v.is_number() ? fmt::format("{:.4f}", v.get<double>()) : std::string("     -");
  };
  s += fmt::format("\n{:>3}  {:<20} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}\n", "", "class", "precision", "recall", "f1",
                   "support", "AP", "ROC AUC");
  for (const auto& c : j["per_class"]) {
    s += fmt::format("{:>3}  {:<20} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}\n", c.value("class", 0),
                     c.value("name", "").substr(0, 20), num(c["precision"]), num(c["recall"]), num(c["f1"]),
                     c.value("support", 0), num(c["average_precision"]), num(c["roc_auc"]));
  }
  for (const char* avg : {"micro", "macro", "weighted"}) {
    const auto& a = j["averages"][avg];
    s += fmt::format("     {:<20} {:>9} {:>9} {:>9}\n", std::string(avg) + " avg", num(a["precision"]),
                     num(a["recall"]), num(a["f1"]));
  }
  s += fmt::format("\nECE (15 bins) {:.4f}   macro AP {:.4f}   macro ROC AUC {}\n", j["calibration"].value("ece", 0.0),
                   j.value("average_precision_macro", 0.0), num(j["roc_auc_ovr_macro"]));
  if (j["imbalance"]["warning"].is_string()) s += "warning: " + j["imbalance"]["warning"].get<std::string>() + "\n";
  if (j.contains("fairness")) {
    const auto& f = j["fairness"];
    s += fmt::format("\nfairness by {} (privileged '{}', threshold {:g}):\n", f.value("attribute", ""),
                     f.value("privileged", ""), f.value("threshold", 0.1));
    for (const auto& g : f["groups"])
      s += fmt::format("  {:<12} n={:<6} selection {:.4f}  TPR {:.4f}  FPR {:.4f}  accuracy {:.4f}\n",
                       g.value("group", ""), g.value("support", 0), g.value("selection_rate", 0.0), g.value("tpr", 0.0),
                       g.value("fpr", 0.0), g.value("accuracy", 0.0));
    for (const auto& fl : f["flags"]) s += "  flag: " + fl.value("message", "") + "\n";
  }
  for (const auto& n : j["notes"]) s += "note: " + n.get<std::string>() + "\n";
  return s;
}

}  // namespace glassbox::app
