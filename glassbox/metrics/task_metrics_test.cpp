// Regression and multi-label metrics against scikit-learn (tests/reference/task_metrics_ref.py),
// each on five prediction sets, the edge cases included (a constant target, zeros in the target,
// a label that never occurs, a sample without labels, tied scores).
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/metrics/multilabel.h"
#include "glassbox/metrics/regression.h"
#include "glassbox/testing/testing.h"

namespace glassbox::metrics {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_npy(const fs::path& path, const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  const std::string descr = c.scalar_type() == torch::kDouble ? "<f8" : "<i8";
  std::string shape = "(";
  for (std::int64_t d = 0; d < c.dim(); ++d)
    shape += std::to_string(c.size(d)) + (c.dim() == 1 ? "," : (d + 1 < c.dim() ? ", " : ""));
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  f.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

std::vector<double> doubles(const at::Tensor& t) {
  const at::Tensor c = t.to(torch::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

void expect_value(const json& ref, double ours, const std::string& what) {
  if (ref.is_null()) {
    EXPECT_TRUE(std::isnan(ours)) << what << ": sklearn has none, glassbox " << ours;
  } else {
    EXPECT_NEAR(ours, ref.get<double>(), 1e-12 * std::max(1.0, std::abs(ref.get<double>()))) << what;
  }
}

TEST(TaskMetricsReference, RegressionEqualsScikitLearnOnFiveSets) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  std::vector<std::pair<at::Tensor, at::Tensor>> sets;
  const at::Tensor y = torch::randn({200}, gen, torch::kDouble) * 3 + 1;
  sets.emplace_back(y, y + 0.5 * torch::randn({200}, gen, torch::kDouble));  // a good fit
  sets.emplace_back(y, torch::randn({200}, gen, torch::kDouble));            // worse than the mean
  sets.emplace_back(torch::full({50}, 2.0, torch::kDouble),
                    torch::linspace(1, 3, 50, torch::kDouble));                              // constant target
  at::Tensor with_zeros = torch::randint(0, 3, {80}, gen, torch::kLong).to(torch::kDouble);  // zeros: MAPE's eps
  sets.emplace_back(with_zeros, with_zeros + 0.1);
  const at::Tensor y3 = torch::randn({120, 3}, gen, torch::kDouble);
  sets.emplace_back(y3, y3 * 0.8 + 0.3 * torch::randn({120, 3}, gen, torch::kDouble));  // three outputs
  const fs::path dir = testing::temp_dir("regression_ref");
  std::vector<std::string> args{"regression"};
  for (std::size_t k = 0; k < sets.size(); ++k) {
    write_npy(dir / ("y" + std::to_string(k) + ".npy"), sets[k].first);
    write_npy(dir / ("p" + std::to_string(k) + ".npy"), sets[k].second);
    args.push_back((dir / ("y" + std::to_string(k) + ".npy")).string());
    args.push_back((dir / ("p" + std::to_string(k) + ".npy")).string());
  }
  const json ref = json::parse(testing::run_python("tests/reference/task_metrics_ref.py", args));
  for (std::size_t k = 0; k < sets.size(); ++k) {
    SCOPED_TRACE(k);
    const auto& [t, p] = sets[k];
    const std::int64_t outputs = t.dim() == 2 ? t.size(1) : 1;
    const RegressionReport r = regression_report(doubles(t), doubles(p), t.size(0), outputs);
    const json& e = ref[k];
    expect_value(e["mae"], r.mae, "mae");
    expect_value(e["mse"], r.mse, "mse");
    expect_value(e["rmse"], r.rmse, "rmse");
    expect_value(e["r2"], r.r2, "r2");
    expect_value(e["explained_variance"], r.explained_variance, "explained_variance");
    expect_value(e["median_absolute_error"], r.median_ae, "median_absolute_error");
    expect_value(e["mape"], r.mape, "mape");
    if (outputs == 1) expect_value(e["max_error"], r.max_error, "max_error");
    if (outputs > 1) {
      for (std::int64_t o = 0; o < outputs; ++o) {
        const auto& s = r.per_output[static_cast<std::size_t>(o)];
        expect_value(e["per_output"]["r2"][o], s.r2, "r2[" + std::to_string(o) + "]");
        expect_value(e["per_output"]["rmse"][o], s.rmse, "rmse[" + std::to_string(o) + "]");
        expect_value(e["per_output"]["mae"][o], s.mae, "mae[" + std::to_string(o) + "]");
      }
    }
  }
  EXPECT_THROW(regression_report({1.0}, {1.0, 2.0}, 1, 1), Error);
}

TEST(TaskMetricsReference, MultiLabelEqualsScikitLearnOnFiveSets) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  std::vector<std::pair<at::Tensor, at::Tensor>> sets;
  {
    const at::Tensor t = (torch::rand({300, 5}, gen) < 0.3).to(torch::kLong);
    sets.emplace_back(t, (t.to(torch::kDouble) * 0.5 + torch::rand({300, 5}, gen, torch::kDouble) * 0.6).clamp(0, 1));
  }
  {
    at::Tensor t = (torch::rand({120, 4}, gen) < 0.4).to(torch::kLong);
    t.select(1, 2).zero_();  // a label that never occurs: AP 0, no ROC AUC, macro AUC undefined
    sets.emplace_back(t, torch::rand({120, 4}, gen, torch::kDouble));
  }
  {
    at::Tensor t = (torch::rand({100, 3}, gen) < 0.5).to(torch::kLong);
    t.slice(0, 0, 10).zero_();  // samples without labels
    at::Tensor s = torch::rand({100, 3}, gen, torch::kDouble);
    s.slice(0, 0, 5).fill_(0.1);  // ... and without predicted ones
    sets.emplace_back(t, s);
  }
  {
    const at::Tensor t = (torch::rand({150, 6}, gen) < 0.2).to(torch::kLong);
    sets.emplace_back(t, torch::round(torch::rand({150, 6}, gen, torch::kDouble) * 4) / 4);  // ties, scores at 0.5
  }
  {
    const at::Tensor t = (torch::rand({80, 2}, gen) < 0.6).to(torch::kLong);
    sets.emplace_back(t, t.to(torch::kDouble) * 0.9 + 0.05);  // perfect
  }
  const fs::path dir = testing::temp_dir("multilabel_ref");
  std::vector<std::string> args{"multilabel"};
  for (std::size_t k = 0; k < sets.size(); ++k) {
    write_npy(dir / ("t" + std::to_string(k) + ".npy"), sets[k].first);
    write_npy(dir / ("s" + std::to_string(k) + ".npy"), sets[k].second);
    args.push_back((dir / ("t" + std::to_string(k) + ".npy")).string());
    args.push_back((dir / ("s" + std::to_string(k) + ".npy")).string());
  }
  const json ref = json::parse(testing::run_python("tests/reference/task_metrics_ref.py", args));
  for (std::size_t k = 0; k < sets.size(); ++k) {
    SCOPED_TRACE(k);
    const auto& [t, s] = sets[k];
    const at::Tensor tc = t.to(torch::kUInt8).contiguous();
    const std::vector<unsigned char> targets(tc.data_ptr<std::uint8_t>(), tc.data_ptr<std::uint8_t>() + tc.numel());
    const MultiLabelReport r = multilabel_report(targets, doubles(s), t.size(0), t.size(1));
    const json& e = ref[k];
    for (std::int64_t l = 0; l < t.size(1); ++l) {
      const auto& m = r.per_label[static_cast<std::size_t>(l)];
      const std::string at = "label " + std::to_string(l);
      expect_value(e["per_label"]["precision"][l], m.prf.precision, at + " precision");
      expect_value(e["per_label"]["recall"][l], m.prf.recall, at + " recall");
      expect_value(e["per_label"]["f1"][l], m.prf.f1, at + " f1");
      EXPECT_EQ(e["per_label"]["support"][l].get<std::int64_t>(), m.support) << at;
      expect_value(e["per_label"]["average_precision"][l], m.average_precision, at + " AP");
      expect_value(e["per_label"]["roc_auc"][l], m.roc_auc, at + " ROC AUC");
    }
    for (const auto& [name, v] : std::vector<std::pair<std::string, PrfScores>>{
             {"micro", r.micro}, {"macro", r.macro}, {"weighted", r.weighted}, {"samples", r.samples}}) {
      expect_value(e[name]["precision"], v.precision, name + " precision");
      expect_value(e[name]["recall"], v.recall, name + " recall");
      expect_value(e[name]["f1"], v.f1, name + " f1");
    }
    expect_value(e["subset_accuracy"], r.subset_accuracy, "subset accuracy");
    expect_value(e["hamming_loss"], r.hamming_loss, "hamming loss");
    expect_value(e["average_precision"]["macro"], r.macro_ap, "macro AP");
    expect_value(e["average_precision"]["micro"], r.micro_ap, "micro AP");
    expect_value(e["average_precision"]["weighted"], r.weighted_ap, "weighted AP");
    expect_value(e["roc_auc"]["macro"], r.macro_roc_auc, "macro ROC AUC");
    expect_value(e["roc_auc"]["micro"], r.micro_roc_auc, "micro ROC AUC");
  }
}

}  // namespace
}  // namespace glassbox::metrics
