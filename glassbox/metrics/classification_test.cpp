// Classification metrics, calibration and fairness against scikit-learn, torchmetrics and
// fairlearn (tests/reference/*_ref.py run in the project's .venv) on the same predictions.
#include "glassbox/metrics/classification.h"

#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/metrics/calibration.h"
#include "glassbox/metrics/fairness.h"
#include "glassbox/testing/testing.h"

namespace glassbox::metrics {
namespace {

TEST(Ranking, AveragePrecisionAndRocAucOnAHandWorkedExample) {
  // scores 0.9(+) 0.8(-) 0.8(+) 0.3(-): thresholds 0.9, 0.8, 0.3
  const BinaryCurve c = binary_curve({1, 0, 1, 0}, {0.9, 0.8, 0.8, 0.3});
  ASSERT_EQ(c.thresholds.size(), 3u);
  EXPECT_EQ(c.tps, (std::vector<double>{1, 2, 2}));
  EXPECT_EQ(c.fps, (std::vector<double>{0, 1, 2}));
  // AP = 0.5 * 1 + 0.5 * 2/3
  EXPECT_NEAR(average_precision(c), 0.5 + 1.0 / 3.0, 1e-15);
  // Pairs (pos, neg): (0.9, 0.8) 1, (0.9, 0.3) 1, (0.8, 0.8) 1/2, (0.8, 0.3) 1 -> 3.5 / 4
  EXPECT_NEAR(roc_auc(c), 0.875, 1e-15);
  EXPECT_TRUE(std::isnan(roc_auc(binary_curve({0, 0}, {0.1, 0.2}))));
  EXPECT_EQ(average_precision(binary_curve({0, 0}, {0.1, 0.2})), 0.0);
}

// A minimal .npy writer (the metrics module cannot reach data/npy.h): little-endian C order.
void write_npy_file(const std::string& path, const at::Tensor& t) {
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
  const std::uint16_t len = static_cast<std::uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  f.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
}

struct PredictionSet {
  std::string name;
  at::Tensor labels, probs;
};

at::Tensor normalise_rows(const at::Tensor& x) { return x / x.sum(1, true); }

std::vector<PredictionSet> prediction_sets() {
  std::vector<PredictionSet> sets;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2024);
  {  // a realistic 10-class model: logits with signal, softmax
    at::Tensor y = torch::randint(0, 10, {600}, gen, torch::kLong);
    at::Tensor logits = torch::randn({600, 10}, gen, torch::kDouble) + 2.5 * torch::one_hot(y, 10).to(torch::kDouble);
    sets.push_back({"softmax-10", y, torch::softmax(logits, 1)});
  }
  {  // class 2 is never predicted
    at::Tensor y = torch::randint(0, 5, {300}, gen, torch::kLong);
    at::Tensor s = torch::rand({300, 5}, gen, torch::kDouble) + 0.8 * torch::one_hot(y, 5).to(torch::kDouble);
    s.select(1, 2).mul_(0.01);
    sets.push_back({"never-predicted", y, normalise_rows(s)});
  }
  {  // class 4 never occurs in the labels
    at::Tensor y = torch::randint(0, 4, {250}, gen, torch::kLong);
    at::Tensor s = torch::rand({250, 6}, gen, torch::kDouble) + torch::one_hot(y, 6).to(torch::kDouble);
    y.masked_fill_(y == 3, 5);  // labels 0, 1, 2, 5: classes 3 and 4 absent
    sets.push_back({"absent-classes", y, normalise_rows(s)});
  }
  {  // tied scores everywhere: rows drawn from a few quantised patterns (exact in binary)
    at::Tensor pick = torch::randint(0, 6, {400}, gen, torch::kLong);
    at::Tensor table =
        torch::tensor(std::vector<double>{0.25, 0.25, 0.25, 0.25, 0.5,   0.5,   0,     0,     0.5, 0.25, 0.25, 0,
                                          0,    0.5,  0.25, 0.25, 0.125, 0.375, 0.375, 0.125, 1,   0,    0,    0},
                      torch::kDouble)
            .view({6, 4});
    sets.push_back({"ties", torch::randint(0, 4, {400}, gen, torch::kLong), table.index_select(0, pick)});
  }
  {  // heavily imbalanced, over-confident (many rows with confidence exactly 1)
    at::Tensor y = (torch::rand({1000}, gen, torch::kDouble) > 0.9).to(torch::kLong) +
                   (torch::rand({1000}, gen, torch::kDouble) > 0.97).to(torch::kLong);
    at::Tensor s = torch::rand({1000, 3}, gen, torch::kDouble).pow(4);
    s.select(1, 0).add_(0.6);
    at::Tensor p = normalise_rows(s);
    at::Tensor sure = torch::rand({1000}, gen, torch::kDouble) < 0.3;
    p.index_put_({sure}, torch::tensor(std::vector<double>{1, 0, 0}, torch::kDouble));
    sets.push_back({"imbalanced-confident", y, p});
  }
  {  // binary
    at::Tensor y = torch::randint(0, 2, {200}, gen, torch::kLong);
    at::Tensor p1 = torch::sigmoid(torch::randn({200}, gen, torch::kDouble) + 1.5 * (2 * y.to(torch::kDouble) - 1));
    sets.push_back({"binary", y, torch::stack({1 - p1, p1}, 1)});
  }
  return sets;
}

void expect_vec_near(const nlohmann::json& ref, const std::vector<double>& ours, double tol, const std::string& what) {
  ASSERT_EQ(ref.size(), ours.size()) << what;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    if (ref[i].is_null()) {
      EXPECT_TRUE(std::isnan(ours[i])) << what << "[" << i << "] sklearn: undefined, glassbox " << ours[i];
    } else {
      EXPECT_NEAR(ours[i], ref[i].get<double>(), tol) << what << "[" << i << "]";
    }
  }
}

TEST(MetricsReference, AgreeWithScikitLearnAndTorchmetricsOnSixPredictionSets) {
  const auto dir = testing::temp_dir("metrics_ref");
  for (const auto& set : prediction_sets()) {
    SCOPED_TRACE(set.name);
    const std::int64_t k = set.probs.size(1);
    write_npy_file((dir / "y.npy").string(), set.labels);
    write_npy_file((dir / "p.npy").string(), set.probs);
    const auto ref = nlohmann::json::parse(testing::run_python(
        "tests/reference/metrics_ref.py", {"--labels", (dir / "y.npy").string(), "--probs", (dir / "p.npy").string(),
                                           "--num-classes", std::to_string(k)}));
    const ClassificationInput in = classification_input(set.labels, set.probs);
    const ClassificationReport r = classification_report(in);
    // Counts: exact.
    EXPECT_EQ(nlohmann::json(r.confusion), ref["confusion_matrix"]);
    EXPECT_EQ(nlohmann::json(r.predicted), ref["y_pred"]);
    std::vector<double> p, rc, f, support, ap, auc;
    std::vector<std::int64_t> und_p, und_r, und_f;
    for (std::int64_t c = 0; c < k; ++c) {
      const auto& m = r.per_class[static_cast<std::size_t>(c)];
      p.push_back(m.prf.precision);
      rc.push_back(m.prf.recall);
      f.push_back(m.prf.f1);
      support.push_back(static_cast<double>(m.support));
      ap.push_back(m.average_precision);
      auc.push_back(m.roc_auc);
      if (m.precision_undefined) und_p.push_back(c);
      if (m.recall_undefined) und_r.push_back(c);
      if (m.f1_undefined) und_f.push_back(c);
    }
    expect_vec_near(ref["per_class"]["support"], support, 0, "support");
    EXPECT_EQ(nlohmann::json(und_p), ref["undefined_precision"]);
    EXPECT_EQ(nlohmann::json(und_r), ref["undefined_recall"]);
    EXPECT_EQ(nlohmann::json(und_f), ref["undefined_f1"]);
    // Floats: within 1e-12.
    constexpr double tol = 1e-12;
    expect_vec_near(ref["per_class"]["precision"], p, tol, "precision");
    expect_vec_near(ref["per_class"]["recall"], rc, tol, "recall");
    expect_vec_near(ref["per_class"]["f1"], f, tol, "f1");
    const std::pair<const char*, const PrfScores*> avgs[] = {
        {"micro", &r.micro}, {"macro", &r.macro}, {"weighted", &r.weighted}};
    for (const auto& [name, s] : avgs) {
      EXPECT_NEAR(s->precision, ref[name]["precision"].get<double>(), tol) << name;
      EXPECT_NEAR(s->recall, ref[name]["recall"].get<double>(), tol) << name;
      EXPECT_NEAR(s->f1, ref[name]["f1"].get<double>(), tol) << name;
    }
    EXPECT_NEAR(r.accuracy, ref["accuracy"].get<double>(), tol);
    ASSERT_EQ(r.top_k.size(), ref["top_k_accuracy"].size());
    for (const auto& [kk, v] : r.top_k)
      EXPECT_NEAR(v, ref["top_k_accuracy"][std::to_string(kk)].get<double>(), tol) << "top-" << kk;
    expect_vec_near(ref["average_precision"]["per_class"], ap, tol, "average precision");
    EXPECT_NEAR(r.average_precision_macro, ref["average_precision"]["macro"].get<double>(), tol);
    expect_vec_near(ref["roc_auc"]["per_class"], auc, tol, "roc auc");
    expect_vec_near(nlohmann::json::array({ref["roc_auc"]["macro_ovr"]}), {r.roc_auc_macro}, tol, "macro roc auc");
    // The PR curve of every class, point by point.
    for (std::int64_t c = 0; c < k; ++c) {
      std::vector<unsigned char> pos;
      std::vector<double> col;
      for (std::int64_t i = 0; i < set.labels.size(0); ++i) {
        pos.push_back(set.labels[i].item<std::int64_t>() == c ? 1 : 0);
        col.push_back(set.probs[i][c].item<double>());
      }
      const PrCurve pr = precision_recall_curve(binary_curve(pos, col));
      const auto& rp = ref["pr_curve"][std::to_string(c)];
      expect_vec_near(rp["precision"], pr.precision, tol, "pr precision");
      expect_vec_near(rp["recall"], pr.recall, tol, "pr recall");
      expect_vec_near(rp["thresholds"], pr.thresholds, 0, "pr thresholds");
    }
    // Balanced class weights: sklearn's for the classes present, 0 for the absent ones.
    std::vector<std::int64_t> labels(in.labels.begin(), in.labels.end());
    const std::vector<double> w = balanced_class_weights(labels, k);
    std::vector<double> present_w;
    for (const auto& c : ref["class_weight"]["classes"]) present_w.push_back(w[c.get<std::size_t>()]);
    expect_vec_near(ref["class_weight"]["weights"], present_w, tol, "class weights");
    // ECE: torchmetrics within 1e-9 (the same float32 ops: in fact identical), and the float64 rendering.
    const Calibration cal = calibration(set.probs, set.labels);
    EXPECT_NEAR(cal.ece, ref["ece_torchmetrics"].get<double>(), 1e-9);
    EXPECT_NEAR(cal.ece_float64, ref["ece_float64"].get<double>(), 1e-12);
    std::int64_t counted = 0;
    for (const auto& b : cal.bins) counted += b.count;
    EXPECT_EQ(counted, set.labels.size(0));
  }
}

TEST(FairnessReference, AgreesWithFairlearnOnSyntheticGroups) {
  const auto dir = testing::temp_dir("fairness_ref");
  auto gen = at::make_generator<at::CPUGeneratorImpl>(77);
  struct Case {
    std::string name;
    std::int64_t classes, groups, positive;
  };
  for (const Case& c : {Case{"binary, 2 groups", 2, 2, 1}, Case{"binary, 3 groups", 2, 3, 1},
                        Case{"4 classes, 4 groups, class 2", 4, 4, 2}}) {
    SCOPED_TRACE(c.name);
    const std::int64_t n = 900;
    at::Tensor g = torch::randint(0, c.groups, {n}, gen, torch::kLong);
    at::Tensor y = torch::randint(0, c.classes, {n}, gen, torch::kLong);
    // A biased classifier: right 85 % of the time in group 0, 65 % elsewhere, and group 1 gets the
    // positive class more often.
    at::Tensor keep =
        torch::rand({n}, gen, torch::kDouble) <
        torch::where(g == 0, torch::full({n}, 0.85, torch::kDouble), torch::full({n}, 0.65, torch::kDouble));
    at::Tensor yhat = torch::where(keep, y, torch::randint(0, c.classes, {n}, gen, torch::kLong));
    yhat = torch::where((g == 1) & (torch::rand({n}, gen, torch::kDouble) < 0.35),
                        torch::full({n}, c.positive, torch::kLong), yhat);
    write_npy_file((dir / "y.npy").string(), y);
    write_npy_file((dir / "yhat.npy").string(), yhat);
    write_npy_file((dir / "g.npy").string(), g);
    const auto ref = nlohmann::json::parse(
        testing::run_python("tests/reference/fairness_ref.py",
                            {"--labels", (dir / "y.npy").string(), "--preds", (dir / "yhat.npy").string(), "--groups",
                             (dir / "g.npy").string(), "--positive", std::to_string(c.positive), "--privileged", "0"}));
    std::vector<std::int64_t> yl(y.data_ptr<std::int64_t>(), y.data_ptr<std::int64_t>() + n),
        pl(yhat.data_ptr<std::int64_t>(), yhat.data_ptr<std::int64_t>() + n);
    std::vector<std::string> gs;
    for (std::int64_t i = 0; i < n; ++i) gs.push_back(std::to_string(g[i].item<std::int64_t>()));
    FairnessOptions o;
    o.positive_class = c.positive;
    o.privileged = "0";
    const FairnessReport f = fairness_audit(yl, pl, gs, c.classes, o);
    ASSERT_EQ(f.audits.size(), 1u);
    const ClassAudit& a = f.audits[0];
    constexpr double tol = 1e-12;
    ASSERT_EQ(a.groups.size(), static_cast<std::size_t>(c.groups));
    for (const auto& gr : a.groups) {
      const auto& rg = ref["by_group"][gr.group];
      EXPECT_EQ(gr.support, rg["count"].get<std::int64_t>());
      EXPECT_NEAR(gr.selection_rate, rg["selection_rate"].get<double>(), tol);
      EXPECT_NEAR(gr.tpr, rg["true_positive_rate"].get<double>(), tol);
      EXPECT_NEAR(gr.fpr, rg["false_positive_rate"].get<double>(), tol);
      EXPECT_NEAR(gr.accuracy, rg["accuracy"].get<double>(), tol);
    }
    EXPECT_NEAR(a.differences.demographic_parity, ref["demographic_parity_difference"].get<double>(), tol);
    EXPECT_NEAR(a.differences.demographic_parity_ratio, ref["demographic_parity_ratio"].get<double>(), tol);
    EXPECT_NEAR(a.differences.equalized_odds, ref["equalized_odds_difference"].get<double>(), tol);
    EXPECT_NEAR(a.differences.equal_opportunity, ref["equal_opportunity_difference"].get<double>(), tol);
    EXPECT_NEAR(a.differences.fpr, ref["false_positive_rate_difference"].get<double>(), tol);
    const auto& s = ref["aif360"];
    EXPECT_NEAR(a.aif360.statistical_parity_difference, s["statistical_parity_difference"].get<double>(), tol);
    EXPECT_NEAR(a.aif360.disparate_impact, s["disparate_impact"].get<double>(), tol);
    EXPECT_NEAR(a.aif360.equal_opportunity_difference, s["equal_opportunity_difference"].get<double>(), tol);
    EXPECT_NEAR(a.aif360.average_odds_difference, s["average_odds_difference"].get<double>(), tol);
    EXPECT_NEAR(a.aif360.fpr_difference, s["false_positive_rate_difference"].get<double>(), tol);
    EXPECT_GT(a.differences.demographic_parity, 0.05);  // the planted bias shows
  }
}

// AIF360's signed convention on a case small enough to do by hand.
TEST(Fairness, SignedAif360ValuesOnAHandComputedCase) {
  // privileged "m": labels 1 1 0 0, predictions 1 0 1 0  -> TPR 1/2, FPR 1/2, selection 2/4
  // unprivileged "f": labels 1 1 1 0 0 0, predictions 1 1 0 0 0 0 -> TPR 2/3, FPR 0, selection 2/6
  const std::vector<std::int64_t> y = {1, 1, 0, 0, 1, 1, 1, 0, 0, 0}, p = {1, 0, 1, 0, 1, 1, 0, 0, 0, 0};
  const std::vector<std::string> g = {"m", "m", "m", "m", "f", "f", "f", "f", "f", "f"};
  FairnessOptions o;
  o.privileged = "m";
  o.threshold = 0.05;
  const FairnessReport f = fairness_audit(y, p, g, 2, o);
  const ClassAudit& a = f.audits.at(0);
  EXPECT_NEAR(a.aif360.statistical_parity_difference, 2.0 / 6 - 2.0 / 4, 1e-15);
  EXPECT_NEAR(a.aif360.disparate_impact, (2.0 / 6) / (2.0 / 4), 1e-15);
  EXPECT_NEAR(a.aif360.equal_opportunity_difference, 2.0 / 3 - 0.5, 1e-15);
  EXPECT_NEAR(a.aif360.fpr_difference, 0.0 - 0.5, 1e-15);
  EXPECT_NEAR(a.aif360.average_odds_difference, 0.5 * ((0.0 - 0.5) + (2.0 / 3 - 0.5)), 1e-15);
  // fairlearn's absolute differences are the magnitudes for two groups.
  EXPECT_NEAR(a.differences.demographic_parity, 2.0 / 4 - 2.0 / 6, 1e-15);
  EXPECT_NEAR(a.differences.equalized_odds, 0.5, 1e-15);
  // Flags at a stricter 0.05: every difference, and disparate impact 0.667 < 0.8.
  std::vector<std::string> flagged;
  for (const auto& fl : f.flags) flagged.push_back(fl.metric);
  EXPECT_EQ(flagged, (std::vector<std::string>{"demographic_parity_difference", "equal_opportunity_difference",
                                               "fpr_difference", "equalized_odds_difference", "disparate_impact"}));
  EXPECT_THROW(fairness_audit(y, p, std::vector<std::string>(10, "x"), 2, o), Error);  // one group only
}

}  // namespace
}  // namespace glassbox::metrics
