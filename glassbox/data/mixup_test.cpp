#include "glassbox/data/mixup.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Case {
  std::string id;
  MixMode mode;
  MixupOptions o;
  std::uint64_t seed;
  std::int64_t batch = 8;
};

json kwargs_of(const MixupOptions& o) {
  json k = {{"mixup_alpha", o.mixup_alpha},
            {"cutmix_alpha", o.cutmix_alpha},
            {"prob", o.prob},
            {"switch_prob", o.switch_prob},
            {"correct_lam", o.correct_lam}};
  if (!o.cutmix_minmax.empty()) k["cutmix_minmax"] = o.cutmix_minmax;
  return k;
}

TEST(Mixup, EqualsTimmGivenTheSameDraws) {
  std::vector<Case> cases;
  for (MixMode mode : {MixMode::kBatch, MixMode::kPair, MixMode::kElem}) {
    const std::string m(name_of(mode));
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      MixupOptions mix;
      mix.mixup_alpha = 0.4;
      MixupOptions cut;
      cut.cutmix_alpha = 1.0;
      cut.correct_lam = seed % 2 == 0;
      MixupOptions both;
      both.mixup_alpha = 0.2;
      both.cutmix_alpha = 1.0;
      both.prob = 0.8;
      MixupOptions minmax;
      minmax.cutmix_minmax = {0.2, 0.8};
      minmax.mixup_alpha = 0.3;
      cases.push_back({m + "_mix_" + std::to_string(seed), mode, mix, seed});
      cases.push_back({m + "_cut_" + std::to_string(seed), mode, cut, seed});
      cases.push_back({m + "_both_" + std::to_string(seed), mode, both, seed});
      cases.push_back({m + "_minmax_" + std::to_string(seed), mode, minmax, seed});
    }
  }
  const fs::path dir = testing::temp_dir("mixup_parity");
  json spec = json::array();
  std::vector<Batch> ours;
  std::int64_t mixed_cut = 0, mixed_mix = 0;
  for (auto& c : cases) {
    c.o.mode = c.mode;
    torch::manual_seed(static_cast<std::int64_t>(c.seed) * 31 + static_cast<std::int64_t>(spec.size()));
    Batch b;
    b.inputs = torch::rand({c.batch, 3, 10, 12});
    b.targets = torch::randint(0, 5, {c.batch}, torch::kLong);
    write_npy(dir / (c.id + "_x.npy"), b.inputs);
    AugmentRng rng(c.seed);
    const std::vector<MixDraw> draws = mix_batch(b, c.o, rng);
    json d = json::array();
    for (const MixDraw& m : draws) {
      d.push_back({{"mixed", m.mixed}, {"cutmix", m.cutmix}, {"lam", m.lam}, {"box_draws", m.box_draws}});
      if (m.mixed) (m.cutmix ? mixed_cut : mixed_mix) += 1;
    }
    std::vector<std::int64_t> t(b.targets.data_ptr<std::int64_t>(), b.targets.data_ptr<std::int64_t>() + c.batch);
    spec.push_back({{"id", c.id},
                    {"mode", std::string(name_of(c.mode))},
                    {"kwargs", kwargs_of(c.o)},
                    {"draws", d},
                    {"targets", t},
                    {"num_classes", 5},
                    {"smoothing", 0.1}});
    ours.push_back(b);
  }
  EXPECT_GT(mixed_cut, 10);
  EXPECT_GT(mixed_mix, 10);
  write_file_atomic(dir / "cases.json", spec.dump());
  testing::run_python("tests/reference/mixup_ref.py", {"parity", dir.string()});
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].id);
    const at::Tensor out = read_npy(dir / (cases[i].id + "_out.npy"));
    const at::Tensor soft = read_npy(dir / (cases[i].id + "_target.npy"));
    EXPECT_TRUE(torch::equal(out, ours[i].inputs)) << (out - ours[i].inputs).abs().max();
    // timm's soft targets from our lam: lam_i y_i + (1 - lam_i) y_{B-1-i}, smoothing 0.1 over 5 classes.
    const at::Tensor y = torch::full({cases[i].batch, 5}, 0.02f).scatter_(1, ours[i].targets.view({-1, 1}), 0.92f);
    const at::Tensor lam = ours[i].mix_lambda.view({-1, 1});
    EXPECT_TRUE(torch::allclose(soft, y * lam + y.flip(0) * (1 - lam), 1e-6, 1e-6)) << soft << ours[i].mix_lambda;
  }
}

TEST(Mixup, BetaDrawsMatchNumpysDistribution) {
  const fs::path dir = testing::temp_dir("mixup_beta");
  for (double a : {0.2, 0.4, 1.0, 2.0}) {
    AugmentRng rng(static_cast<std::uint64_t>(a * 100));
    std::vector<double> v(10000);
    for (double& x : v) {
      x = sample_beta(a, rng);
      ASSERT_GE(x, 0.0);
      ASSERT_LE(x, 1.0);
    }
    write_npy(dir / fmt::format("beta_{}.npy", a), torch::tensor(v, torch::kDouble));
  }
  const json p = json::parse(testing::run_python("tests/reference/mixup_ref.py", {"beta", dir.string()}));
  ASSERT_EQ(p.size(), 4u);
  for (const auto& [name, value] : p.items()) EXPECT_GT(value.get<double>(), 1e-3) << name;
}

TEST(Mixup, OptionsAreCheckedAndCutMixNeedsImages) {
  MixupOptions o;
  EXPECT_FALSE(o.enabled());
  o.cutmix_alpha = 1;
  EXPECT_TRUE(o.enabled());
  Batch tab;
  tab.inputs = torch::rand({4, 6});
  tab.targets = torch::zeros({4}, torch::kLong);
  AugmentRng rng(1);
  EXPECT_THROW(mix_batch(tab, o, rng), Error);
  o.cutmix_alpha = 0;
  o.mixup_alpha = 0.5;
  const at::Tensor before = tab.inputs.clone();
  mix_batch(tab, o, rng);  // MixUp mixes any inputs
  EXPECT_FALSE(torch::equal(before, tab.inputs));
  EXPECT_TRUE(torch::allclose(tab.inputs.sum(), before.sum(), 1e-4, 1e-4));  // a convex mix of a flipped batch
  // An odd batch (timm refuses one): the middle sample is its own partner and stays as it is.
  for (MixMode mode : {MixMode::kBatch, MixMode::kPair, MixMode::kElem}) {
    MixupOptions both;
    both.mixup_alpha = 0.4;
    both.cutmix_alpha = 1.0;
    both.mode = mode;
    Batch odd;
    odd.inputs = torch::rand({5, 3, 6, 6});
    odd.targets = torch::arange(5, torch::kLong);
    const at::Tensor middle = odd.inputs[2].clone();
    AugmentRng r(9);
    mix_batch(odd, both, r);
    EXPECT_TRUE(torch::equal(odd.inputs[2], middle)) << name_of(mode);
    EXPECT_EQ(odd.mix_lambda.numel(), 5);
  }
  o.prob = 1.5;
  EXPECT_THROW(o.validate(), Error);
  o.prob = 1;
  o.cutmix_minmax = {0.8, 0.2};
  EXPECT_THROW(o.validate(), Error);
}

}  // namespace
}  // namespace glassbox::data
