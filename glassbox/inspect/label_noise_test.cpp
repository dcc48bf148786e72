// The confident-learning label-noise estimate against cleanlab, on probability sets built here
// (noise between two classes, a class no sample carries, near-ties) and on scikit-learn's
// digits with 20 % of the labels moved, scored by a cross-validated logistic regression.
#include "glassbox/inspect/label_noise.h"

#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox::inspect {
namespace {

struct Set {
  std::string name;
  at::Tensor labels, probs;
};

std::vector<Set> sets() {
  std::vector<Set> out;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  {
    // 4 classes; a model that is right 80 % of the time; 15 % of class 1's labels say 2.
    const std::int64_t n = 600, k = 4;
    at::Tensor truth = torch::randint(0, k, {n}, gen, torch::kLong);
    at::Tensor logits = torch::randn({n, k}, gen, torch::kDouble);
    logits.scatter_add_(1, truth.unsqueeze(1), torch::full({n, 1}, 2.5, torch::kDouble));
    at::Tensor given = truth.clone();
    at::Tensor flip = (truth == 1) & (torch::rand({n}, gen, torch::kDouble) < 0.15);
    given.masked_fill_(flip, 2);
    out.push_back({"pair-noise", given, torch::softmax(logits, 1)});
  }
  {
    // 5 columns, class 4 never given; sharper probabilities.
    const std::int64_t n = 300, k = 5;
    at::Tensor given = torch::randint(0, 4, {n}, gen, torch::kLong);
    at::Tensor logits = torch::randn({n, k}, gen, torch::kDouble);
    logits.scatter_add_(1, given.unsqueeze(1), torch::full({n, 1}, 4.0, torch::kDouble));
    out.push_back({"absent-class", given, torch::softmax(logits, 1)});
  }
  {
    // Binary, probabilities close to 0.5: many samples confident in both classes.
    const std::int64_t n = 200;
    at::Tensor given = torch::randint(0, 2, {n}, gen, torch::kLong);
    at::Tensor p1 = 0.5 + 0.1 * (2 * given.to(torch::kDouble) - 1) + 0.05 * torch::randn({n}, gen, torch::kDouble);
    p1 = p1.clamp(0.01, 0.99);
    out.push_back({"near-ties", given, torch::stack({1 - p1, p1}, 1)});
  }
  return out;
}

void expect_matches_cleanlab(const at::Tensor& labels, const at::Tensor& probs, const std::filesystem::path& dir) {
  data::write_npy(dir / "y.npy", labels);
  data::write_npy(dir / "p.npy", probs);
  const auto ref = nlohmann::json::parse(
      testing::run_python("tests/reference/label_noise_ref.py",
                          {"--labels", (dir / "y.npy").string(), "--probs", (dir / "p.npy").string()}));
  const ConfidentJoint raw = confident_joint(labels, probs, /*calibrate=*/false);
  ASSERT_EQ(raw.thresholds.size(), ref["thresholds"].size());
  for (std::size_t c = 0; c < raw.thresholds.size(); ++c)
    EXPECT_NEAR(raw.thresholds[c], ref["thresholds"][c].get<double>(), 1e-12) << c;
  EXPECT_EQ(nlohmann::json(raw.joint), ref["confident_joint"]);
  EXPECT_EQ(nlohmann::json(raw.off_diagonal), ref["off_diagonal"]);
  // Calibrated: the rounding moves the entries with the largest remainders by one; between equal
  // remainders numpy's sort leaves the order unspecified (SIMD sorts are not stable), so an entry
  // may differ by one where the row has ties. Row totals agree exactly.
  const auto cal = confident_joint(labels, probs, true).joint;
  const auto& ref_cal = ref["calibrated_joint"];
  ASSERT_EQ(cal.size(), ref_cal.size());
  std::int64_t moved = 0;
  for (std::size_t r = 0; r < cal.size(); ++r) {
    std::int64_t ours = 0, theirs = 0;
    // Exact wherever the row's rounding has no tie to break.
    const ConfidentJoint raw_row = confident_joint(labels, probs, false);
    std::set<double> remainders;
    bool tie = false;
    double row_total = 0;
    for (std::int64_t x : raw_row.joint[r]) row_total += static_cast<double>(x);
    for (std::int64_t x : raw_row.joint[r]) tie |= !remainders.insert(static_cast<double>(x) / row_total).second;
    if (!tie) {
      EXPECT_EQ(nlohmann::json(cal[r]), ref_cal[r]) << "row " << r;
    }
    for (std::size_t c = 0; c < cal[r].size(); ++c) {
      const auto x = ref_cal[r][c].get<std::int64_t>();
      EXPECT_LE(std::abs(cal[r][c] - x), 1) << r << "," << c;
      moved += std::abs(cal[r][c] - x);
      ours += cal[r][c];
      theirs += x;
    }
    EXPECT_EQ(ours, theirs) << "row " << r;
  }
  const LabelNoiseEstimate e = estimate_label_noise(labels, probs);
  const double n = static_cast<double>(labels.size(0));
  EXPECT_NEAR(e.rate, ref["noise_rate"].get<double>(), 1e-12 + static_cast<double>(moved) / n);
  EXPECT_LE(std::abs(e.issues - ref["num_issues_calibrated"].get<std::int64_t>()), moved);
}

TEST(LabelNoiseReference, MatchesCleanlabOnBuiltSets) {
  const auto dir = testing::temp_dir("label_noise_ref");
  for (const auto& s : sets()) {
    SCOPED_TRACE(s.name);
    expect_matches_cleanlab(s.labels, s.probs, dir);
  }
}

TEST(LabelNoiseReference, MatchesCleanlabOnNoisyDigitsAndFindsTheMovedLabels) {
  const auto dir = testing::temp_dir("label_noise_digits");
  const auto made = nlohmann::json::parse(
      testing::run_python("tests/reference/label_noise_ref.py", {"--make-digits", dir.string(), "--noise", "0.2"}));
  const at::Tensor labels = data::read_npy(dir / "y.npy");
  const at::Tensor probs = data::read_npy(dir / "p.npy");
  expect_matches_cleanlab(labels, probs, dir);
  // The estimate is near the planted 20 %, and most suspects are moved labels.
  const LabelNoiseEstimate e = estimate_label_noise(labels, probs);
  EXPECT_NEAR(e.rate, 0.2, 0.05);
  const auto flipped = made["flipped"].get<std::vector<std::int64_t>>();
  const std::set<std::int64_t> moved(flipped.begin(), flipped.end());
  std::size_t hits = 0;
  for (std::int64_t i : e.suspects) hits += moved.count(i);
  EXPECT_GT(static_cast<double>(hits), 0.8 * static_cast<double>(e.suspects.size()));
}

TEST(LabelNoise, RejectsMismatchedShapesAndLabelsOutsideTheColumns) {
  EXPECT_THROW(confident_joint(torch::zeros({3}, torch::kLong), torch::full({4, 2}, 0.5)), Error);
  EXPECT_THROW(confident_joint(torch::full({2}, 3, torch::kLong), torch::full({2, 2}, 0.5)), Error);
}

}  // namespace
}  // namespace glassbox::inspect
