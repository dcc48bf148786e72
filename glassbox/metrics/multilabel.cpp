// Tested by metrics_test (TaskMetricsReference.MultiLabelEqualsScikitLearnOnFiveSets).
#include "glassbox/metrics/multilabel.h"

#include <cmath>
#include <limits>

#include "glassbox/base/error.h"
#include "glassbox/metrics/ranking.h"

namespace glassbox::metrics {

namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

PrfScores prf(double tp, double fp, double fn) {
  PrfScores s;
  s.precision = ratio(tp, tp + fp);
  s.recall = ratio(tp, tp + fn);
  s.f1 = ratio(2 * tp, 2 * tp + fp + fn);
  return s;
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json prf_json(const PrfScores& s) { return {{"precision", s.precision}, {"recall", s.recall}, {"f1", s.f1}}; }

}  // namespace

nlohmann::json MultiLabelReport::to_json(const std::vector<std::string>& label_names) const {
  nlohmann::json j = {{"num_samples", num_samples},
                      {"num_labels", num_labels},
                      {"threshold", threshold},
                      {"subset_accuracy", subset_accuracy},
                      {"hamming_loss", hamming_loss},
                      {"micro", prf_json(micro)},
                      {"macro", prf_json(macro)},
                      {"weighted", prf_json(weighted)},
                      {"samples", prf_json(samples)},
                      {"average_precision", {{"macro", macro_ap}, {"micro", micro_ap}, {"weighted", weighted_ap}}},
                      {"roc_auc", {{"macro", num(macro_roc_auc)}, {"micro", num(micro_roc_auc)}}}};
  j["per_label"] = nlohmann::json::array();
  for (std::size_t l = 0; l < per_label.size(); ++l) {
    const LabelMetrics& m = per_label[l];
    nlohmann::json row = prf_json(m.prf);
    row["label"] = l < label_names.size() ? label_names[l] : std::to_string(l);
    row["support"] = m.support;
    row["predicted"] = m.predicted;
    row["average_precision"] = m.average_precision;
    row["roc_auc"] = num(m.roc_auc);
    j["per_label"].push_back(row);
  }
  return j;
}

MultiLabelReport multilabel_report(const std::vector<unsigned char>& targets, const std::vector<double>& scores,
                                   std::int64_t n, std::int64_t labels, double threshold) {
  GB_CHECK(n > 0 && labels > 0, InvalidArgument,
           "multi-label metrics need samples and labels, got " << n << " x " << labels,
           "evaluate on a split with samples");
  const auto size = static_cast<std::size_t>(n * labels);
  GB_CHECK(targets.size() == size && scores.size() == size, InvalidArgument,
           "multi-label metrics: " << targets.size() << " targets and " << scores.size() << " scores for " << n
                                   << " samples x " << labels << " labels",
           "give one score per label of every sample");
  MultiLabelReport r;
  r.num_samples = n;
  r.num_labels = labels;
  r.threshold = threshold;
  r.per_label.resize(static_cast<std::size_t>(labels));
  auto at = [&](std::int64_t i, std::int64_t l) { return static_cast<std::size_t>(i * labels + l); };
  double exact = 0, wrong = 0;
  double sp = 0, sr = 0, sf = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double tp = 0, fp = 0, fn = 0;
    bool all = true;
    for (std::int64_t l = 0; l < labels; ++l) {
      const bool t = targets[at(i, l)] != 0;
      const bool p = scores[at(i, l)] >= threshold;
      LabelMetrics& m = r.per_label[static_cast<std::size_t>(l)];
      m.support += t;
      m.predicted += p;
      m.tp += t && p;
      m.fp += !t && p;
      m.fn += t && !p;
      tp += t && p;
      fp += !t && p;
      fn += t && !p;
      if (t != p) {
        all = false;
        wrong += 1;
      }
    }
    exact += all;
    const PrfScores s = prf(tp, fp, fn);
    sp += s.precision;
    sr += s.recall;
    sf += s.f1;
  }
  const double dn = static_cast<double>(n);
  r.subset_accuracy = exact / dn;
  r.hamming_loss = wrong / (dn * static_cast<double>(labels));
  r.samples = {sp / dn, sr / dn, sf / dn};
  double TP = 0, FP = 0, FN = 0, support = 0;
  std::vector<unsigned char> all_t;
  std::vector<double> all_s;
  all_t.reserve(size);
  all_s.reserve(size);
  for (std::size_t k = 0; k < size; ++k) {
    all_t.push_back(targets[k] != 0);
    all_s.push_back(scores[k]);
  }
  bool auc_defined = true;
  for (std::int64_t l = 0; l < labels; ++l) {
    LabelMetrics& m = r.per_label[static_cast<std::size_t>(l)];
    m.prf = prf(static_cast<double>(m.tp), static_cast<double>(m.fp), static_cast<double>(m.fn));
    std::vector<unsigned char> t;
    std::vector<double> s;
    for (std::int64_t i = 0; i < n; ++i) {
      t.push_back(targets[at(i, l)] != 0);
      s.push_back(scores[at(i, l)]);
    }
    const BinaryCurve c = binary_curve(t, s);
    m.average_precision = average_precision(c);
    m.roc_auc = roc_auc(c);
    auc_defined = auc_defined && std::isfinite(m.roc_auc);
    TP += static_cast<double>(m.tp);
    FP += static_cast<double>(m.fp);
    FN += static_cast<double>(m.fn);
    support += static_cast<double>(m.support);
    const double k = static_cast<double>(labels);
    r.macro.precision += m.prf.precision / k;
    r.macro.recall += m.prf.recall / k;
    r.macro.f1 += m.prf.f1 / k;
    r.macro_ap += m.average_precision / k;
    r.macro_roc_auc += m.roc_auc / k;
  }
  r.micro = prf(TP, FP, FN);
  for (const LabelMetrics& m : r.per_label) {
    const double w = ratio(static_cast<double>(m.support), support);
    r.weighted.precision += w * m.prf.precision;
    r.weighted.recall += w * m.prf.recall;
    r.weighted.f1 += w * m.prf.f1;
    r.weighted_ap += w * m.average_precision;
  }
  if (!auc_defined) r.macro_roc_auc = std::numeric_limits<double>::quiet_NaN();
  const BinaryCurve pooled = binary_curve(all_t, all_s);
  r.micro_ap = average_precision(pooled);
  r.micro_roc_auc = roc_auc(pooled);
  return r;
}

}  // namespace glassbox::metrics
