#include "glassbox/metrics/classification.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::metrics {

namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

double ratio(double a, double b, bool* undefined) {
  if (b == 0) {
    *undefined = true;
    return 0.0;
  }
  return a / b;
}

// At most `limit` points of a curve, evenly spaced by index, both ends kept.
std::vector<std::size_t> thin(std::size_t n, std::size_t limit) {
  std::vector<std::size_t> idx;
  if (n <= limit) {
    for (std::size_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  for (std::size_t j = 0; j < limit; ++j)
    idx.push_back(static_cast<std::size_t>(std::llround(static_cast<double>(j) * (n - 1) / (limit - 1))));
  return idx;
}

// The one-vs-rest problem of class c: is-positive flags and the class's score column.
BinaryCurve one_vs_rest_curve(const ClassificationInput& in, std::int64_t c) {
  const std::size_t n = in.labels.size(), k = static_cast<std::size_t>(in.num_classes);
  std::vector<double> column(n);
  std::vector<unsigned char> positive(n);
  for (std::size_t i = 0; i < n; ++i) {
    column[i] = in.scores[i * k + static_cast<std::size_t>(c)];
    positive[i] = in.labels[i] == c ? 1 : 0;
  }
  return binary_curve(positive, column);
}

}  // namespace

ClassificationInput classification_input(const at::Tensor& labels, const at::Tensor& probs) {
  GB_CHECK(
      labels.dim() == 1 && probs.dim() == 2 && labels.size(0) == probs.size(0), InvalidArgument,
      "classification metrics need labels [N] and scores [N, K], got " << labels.sizes() << " and " << probs.sizes(),
      "pass one row of class scores per label");
  GB_CHECK(!labels.is_floating_point(), InvalidArgument, "labels must be integers, got " << labels.scalar_type(),
           "pass class indices");
  ClassificationInput in;
  in.num_classes = probs.size(1);
  const at::Tensor l = labels.to(torch::kCPU, torch::kLong).contiguous();
  const at::Tensor p = probs.to(torch::kCPU, torch::kDouble).contiguous();
  in.labels.assign(l.data_ptr<std::int64_t>(), l.data_ptr<std::int64_t>() + l.numel());
  in.scores.assign(p.data_ptr<double>(), p.data_ptr<double>() + p.numel());
  return in;
}

double top_k_accuracy(const ClassificationInput& in, std::int64_t k) {
  const std::int64_t n = static_cast<std::int64_t>(in.labels.size()), kk = in.num_classes;
  if (n == 0) return 0.0;
  std::int64_t hits = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double* s = in.scores.data() + i * kk;
    const std::int64_t y = in.labels[static_cast<std::size_t>(i)];
    // Classes ranked ahead of the label: higher score, or the same score and a higher index.
    std::int64_t ahead = 0;
    for (std::int64_t j = 0; j < kk; ++j) ahead += (s[j] > s[y] || (s[j] == s[y] && j > y)) ? 1 : 0;
    hits += ahead < k ? 1 : 0;
  }
  return static_cast<double>(hits) / static_cast<double>(n);
}

std::vector<double> balanced_class_weights(const std::vector<std::int64_t>& labels, std::int64_t num_classes,
                                           std::vector<std::string>* notes) {
  std::vector<double> counts(static_cast<std::size_t>(num_classes), 0.0);
  for (std::int64_t y : labels) {
    GB_CHECK(y >= 0 && y < num_classes, InvalidArgument, "label " << y << " is outside 0.." << num_classes - 1,
             "check the labels");
    counts[static_cast<std::size_t>(y)] += 1;
  }
  double present = 0;
  for (double c : counts) present += c > 0 ? 1.0 : 0.0;
  std::vector<double> w(counts.size(), 0.0);
  std::vector<std::int64_t> absent;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] > 0) {
      w[c] = static_cast<double>(labels.size()) / (present * counts[c]);
    } else {
      absent.push_back(static_cast<std::int64_t>(c));
    }
  }
  if (notes != nullptr && !absent.empty())
    notes->push_back(fmt::format(
        "class weights: class(es) {} never occur; their weight is 0 (sklearn's compute_class_weight refuses them)",
        fmt::join(absent, ", ")));
  return w;
}

ClassificationReport classification_report(const ClassificationInput& in) {
  const std::int64_t k = in.num_classes;
  GB_CHECK(k >= 2, InvalidArgument, "classification metrics need at least 2 classes, got " << k,
           "check the model's output width");
  const std::int64_t n = static_cast<std::int64_t>(in.labels.size());
  GB_CHECK(static_cast<std::int64_t>(in.scores.size()) == n * k, InvalidArgument,
           "classification metrics: " << n << " labels need " << n * k << " scores, got " << in.scores.size(),
           "pass [N, K] scores");
  ClassificationReport r;
  r.num_samples = n;
  r.num_classes = k;
  r.confusion.assign(static_cast<std::size_t>(k), std::vector<std::int64_t>(static_cast<std::size_t>(k), 0));
  r.per_class.resize(static_cast<std::size_t>(k));
  r.predicted.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t y = in.labels[static_cast<std::size_t>(i)];
    GB_CHECK(
        y >= 0 && y < k, InvalidArgument,
        "label " << y << " of sample " << i << " is outside 0.." << k - 1 << " (the model has " << k << " outputs)",
        "check data.num_classes and the labels");
    const double* s = in.scores.data() + i * k;
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < k; ++j)
      if (s[j] > s[best]) best = j;  // first maximum, as numpy's argmax
    r.predicted[static_cast<std::size_t>(i)] = best;
    ++r.confusion[static_cast<std::size_t>(y)][static_cast<std::size_t>(best)];
  }
  std::int64_t correct = 0;
  double tp_all = 0, fp_all = 0, fn_all = 0;
  for (std::int64_t c = 0; c < k; ++c) {
    ClassMetrics& m = r.per_class[static_cast<std::size_t>(c)];
    for (std::int64_t j = 0; j < k; ++j) {
      m.support += r.confusion[static_cast<std::size_t>(c)][static_cast<std::size_t>(j)];
      m.predicted += r.confusion[static_cast<std::size_t>(j)][static_cast<std::size_t>(c)];
    }
    m.tp = r.confusion[static_cast<std::size_t>(c)][static_cast<std::size_t>(c)];
    m.fp = m.predicted - m.tp;
    m.fn = m.support - m.tp;
    correct += m.tp;
    m.prf.precision = ratio(static_cast<double>(m.tp), static_cast<double>(m.tp + m.fp), &m.precision_undefined);
    m.prf.recall = ratio(static_cast<double>(m.tp), static_cast<double>(m.tp + m.fn), &m.recall_undefined);
    m.prf.f1 = ratio(2.0 * static_cast<double>(m.tp), static_cast<double>(2 * m.tp + m.fp + m.fn), &m.f1_undefined);
    tp_all += static_cast<double>(m.tp);
    fp_all += static_cast<double>(m.fp);
    fn_all += static_cast<double>(m.fn);
  }
  r.accuracy = n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
  bool undef = false;
  r.micro.precision = ratio(tp_all, tp_all + fp_all, &undef);
  r.micro.recall = ratio(tp_all, tp_all + fn_all, &undef);
  r.micro.f1 = ratio(2 * tp_all, 2 * tp_all + fp_all + fn_all, &undef);
  double support_sum = 0;
  for (const auto& m : r.per_class) {
    r.macro.precision += m.prf.precision / static_cast<double>(k);
    r.macro.recall += m.prf.recall / static_cast<double>(k);
    r.macro.f1 += m.prf.f1 / static_cast<double>(k);
    support_sum += static_cast<double>(m.support);
  }
  if (support_sum > 0) {
    for (const auto& m : r.per_class) {
      const double w = static_cast<double>(m.support) / support_sum;
      r.weighted.precision += w * m.prf.precision;
      r.weighted.recall += w * m.prf.recall;
      r.weighted.f1 += w * m.prf.f1;
    }
  }
  // Two classes are a binary problem for sklearn: top-1 is the prediction (a tie goes to class 0).
  if (k == 2) {
    r.top_k.emplace_back(1, r.accuracy);
  } else {
    for (std::int64_t kk = 1; kk <= std::min<std::int64_t>(5, k - 1); ++kk)
      r.top_k.emplace_back(kk, top_k_accuracy(in, kk));
  }

  // One-vs-rest ranking metrics on each class's score column.
  double auc_sum = 0;
  std::vector<std::int64_t> auc_undefined;
  for (std::int64_t c = 0; c < k; ++c) {
    const BinaryCurve curve = one_vs_rest_curve(in, c);
    ClassMetrics& m = r.per_class[static_cast<std::size_t>(c)];
    m.average_precision = average_precision(curve);
    m.roc_auc = roc_auc(curve);
    r.average_precision_macro += m.average_precision / static_cast<double>(k);
    if (std::isnan(m.roc_auc)) {
      auc_undefined.push_back(c);
    } else {
      auc_sum += m.roc_auc;
      ++r.roc_auc_defined;
    }
  }
  r.roc_auc_macro_defined = r.roc_auc_defined > 0 ? auc_sum / static_cast<double>(r.roc_auc_defined)
                                                  : std::numeric_limits<double>::quiet_NaN();
  r.roc_auc_macro = auc_undefined.empty() ? r.roc_auc_macro_defined : std::numeric_limits<double>::quiet_NaN();
  if (k == 2) r.roc_auc_macro = r.per_class[1].roc_auc;  // sklearn's binary roc_auc_score on the class-1 score
  if (!auc_undefined.empty())
    r.notes.push_back(fmt::format(
        "ROC AUC is undefined for class(es) {} (they never occur, or every sample is one), so the macro ROC AUC "
        "is undefined as in sklearn; over the other {} classes it is {:.6f}",
        fmt::join(auc_undefined, ", "), r.roc_auc_defined, r.roc_auc_macro_defined));

  std::int64_t most = 0, least = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t c = 0; c < k; ++c) {
    const std::int64_t s = r.per_class[static_cast<std::size_t>(c)].support;
    if (s > r.per_class[static_cast<std::size_t>(r.majority_class)].support) r.majority_class = c;
    most = std::max(most, s);
    if (s > 0) least = std::min(least, s);
  }
  r.majority_accuracy = n > 0 ? static_cast<double>(r.per_class[static_cast<std::size_t>(r.majority_class)].support) /
                                    static_cast<double>(n)
                              : 0.0;
  r.imbalance_ratio =
      least == std::numeric_limits<std::int64_t>::max() ? 0.0 : static_cast<double>(most) / static_cast<double>(least);
  return r;
}

std::string imbalance_warning(const ClassificationReport& r, const std::vector<std::string>& names) {
  // Imbalanced: the largest class has 3x the samples of the smallest, or a class is missing.
  std::int64_t absent = 0;
  for (const auto& m : r.per_class) absent += m.support == 0 ? 1 : 0;
  if (r.imbalance_ratio < 3.0 && absent == 0) return "";
  const double balanced = r.macro.recall;  // sklearn's balanced_accuracy_score when every class occurs
  const bool near_baseline = r.accuracy - r.majority_accuracy < 0.5 * (1.0 - r.majority_accuracy);
  const bool hides_classes = r.accuracy - balanced > 0.1;
  if (!near_baseline && !hides_classes) return "";
  const std::string name = static_cast<std::size_t>(r.majority_class) < names.size()
                               ? names[static_cast<std::size_t>(r.majority_class)]
                               : std::to_string(r.majority_class);
  return fmt::format(
      "accuracy {:.4f} is misleading on this imbalanced split (largest/smallest class {:.1f}x): always predicting "
      "class {} "
      "('{}') scores {:.4f}; the mean per-class recall (balanced accuracy) is {:.4f} — read the per-class recall and "
      "F1, or "
      "train with balanced class weights (loss.class_weights)",
      r.accuracy, r.imbalance_ratio, r.majority_class, name, r.majority_accuracy, balanced);
}

nlohmann::json ClassificationReport::to_json(const std::vector<std::string>& names) const {
  auto name_of = [&](std::int64_t c) {
    return static_cast<std::size_t>(c) < names.size() ? names[static_cast<std::size_t>(c)] : std::to_string(c);
  };
  nlohmann::json j;
  j["num_samples"] = num_samples;
  j["num_classes"] = num_classes;
  nlohmann::json cn = nlohmann::json::array();
  for (std::int64_t c = 0; c < num_classes; ++c) cn.push_back(name_of(c));
  j["class_names"] = cn;
  j["accuracy"] = accuracy;
  j["balanced_accuracy"] = macro.recall;
  nlohmann::json tk = nlohmann::json::object();
  for (const auto& [kk, v] : top_k) tk[std::to_string(kk)] = v;
  j["top_k_accuracy"] = tk;
  j["majority_baseline"] = {
      {"class", majority_class}, {"name", name_of(majority_class)}, {"accuracy", majority_accuracy}};
  const std::string warning = imbalance_warning(*this, names);
  j["imbalance"] = {{"max_to_min_ratio", num(imbalance_ratio)},
                    {"warning", warning.empty() ? nlohmann::json(nullptr) : nlohmann::json(warning)}};
  j["confusion_matrix"] = confusion;
  nlohmann::json pc = nlohmann::json::array();
  nlohmann::json und = {{"precision", nlohmann::json::array()},
                        {"recall", nlohmann::json::array()},
                        {"f1", nlohmann::json::array()},
                        {"roc_auc", nlohmann::json::array()}};
  for (std::int64_t c = 0; c < num_classes; ++c) {
    const ClassMetrics& m = per_class[static_cast<std::size_t>(c)];
    pc.push_back({{"class", c},
                  {"name", name_of(c)},
                  {"precision", m.prf.precision},
                  {"recall", m.prf.recall},
                  {"f1", m.prf.f1},
                  {"support", m.support},
                  {"predicted", m.predicted},
                  {"average_precision", num(m.average_precision)},
                  {"roc_auc", num(m.roc_auc)}});
    if (m.precision_undefined) und["precision"].push_back(c);
    if (m.recall_undefined) und["recall"].push_back(c);
    if (m.f1_undefined) und["f1"].push_back(c);
    if (std::isnan(m.roc_auc)) und["roc_auc"].push_back(c);
  }
  j["per_class"] = pc;
  j["undefined"] = und;
  auto prf = [](const PrfScores& s) {
    return nlohmann::json{{"precision", s.precision}, {"recall", s.recall}, {"f1", s.f1}};
  };
  j["averages"] = {{"micro", prf(micro)}, {"macro", prf(macro)}, {"weighted", prf(weighted)}};
  j["average_precision_macro"] = average_precision_macro;
  j["roc_auc_ovr_macro"] = num(roc_auc_macro);
  j["roc_auc_ovr_macro_defined"] = num(roc_auc_macro_defined);
  j["notes"] = notes;
  return j;
}

nlohmann::json pr_curves_json(const ClassificationInput& in, std::size_t max_points) {
  nlohmann::json out = nlohmann::json::array();
  for (std::int64_t c = 0; c < in.num_classes; ++c) {
    const PrCurve pr = precision_recall_curve(one_vs_rest_curve(in, c));
    nlohmann::json p = nlohmann::json::array(), rc = nlohmann::json::array();
    for (std::size_t i : thin(pr.precision.size(), max_points)) {
      p.push_back(pr.precision[i]);
      rc.push_back(pr.recall[i]);
    }
    out.push_back({{"class", c}, {"precision", p}, {"recall", rc}, {"points", pr.precision.size()}});
  }
  return out;
}

}  // namespace glassbox::metrics
