// The learning-rate finder against PyTorch Lightning's Tuner.lr_find (tests/reference/lr_finder_ref.py):
// the same learning rates, the same smoothing and early stop, the same suggestion on the same losses.
#include "glassbox/train/lr_finder.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/registry.h"
#include "glassbox/testing/testing.h"

namespace glassbox::train {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The questions for Lightning, asked in one Python run (importing Lightning takes seconds).
struct Inputs {
  std::vector<double> lrs;                   // the default schedule
  std::vector<std::vector<double>> suggest;  // loss curves over lrs' first points
  std::vector<std::vector<double>> raws;     // raw losses for the smoothing
  std::vector<double> thresholds;
};

Inputs make_inputs() {
  Inputs in;
  in.lrs = lr_finder_schedule(LrFinderOptions{});
  std::mt19937 gen(11);
  std::normal_distribution<double> noise(0.0, 1.0);
  for (int k = 0; k < 8; ++k) {
    std::vector<double> l;
    const double centre = 20 + 8 * k, width = 6 + k;
    for (std::size_t i = 0; i < in.lrs.size(); ++i) {
      const double t = (static_cast<double>(i) - centre) / width;
      double v = 2.3 - 1.5 / (1 + std::exp(-t)) + 0.02 * (k + 1) * noise(gen);
      if (i > 70 + static_cast<std::size_t>(k)) v += std::exp(0.2 * static_cast<double>(i - 70 - k)) - 1;
      l.push_back(v);
    }
    if (k == 3) l[40] = std::numeric_limits<double>::quiet_NaN();  // non-finite losses are dropped
    if (k == 4) l.resize(60);                                      // a test that stopped early
    if (k == 5) l.resize(12);                                      // one point left after skipping: none
    if (k == 6) l[55] = std::numeric_limits<double>::quiet_NaN();
    in.suggest.push_back(l);
  }
  in.raws = {{2.0, 1.9, 1.8, 1.5, 8, 20, 50, 100},
             {1.1, 1.0, 0.9, 0.85, 0.84, 0.9, 1.5, 3.0, 6.0, 12.0},
             {0.5, 0.6, 0.4, 0.45, 0.3, 0.2, 0.25, 0.1}};
  in.thresholds = {4.0, 4.0, 0.0};
  return in;
}

const Inputs& inputs() {
  static const Inputs in = make_inputs();
  return in;
}

const json& reference() {
  static const json r = [] {
    const Inputs& in = inputs();
    json req;
    // No early stop, so that every step of the schedule is recorded.
    req["runs"] = {{{"min_lr", 1e-8}, {"max_lr", 1.0}, {"num", 100}, {"mode", "exponential"}, {"threshold", nullptr}},
                   {{"min_lr", 1e-5}, {"max_lr", 0.1}, {"num", 50}, {"mode", "linear"}, {"threshold", nullptr}}};
    req["suggest"] = json::array();
    for (const auto& l : in.suggest) {
      json lj = json::array();
      for (double v : l) lj.push_back(std::isfinite(v) ? json(v) : json(nullptr));
      req["suggest"].push_back(
          {{"lrs", std::vector<double>(in.lrs.begin(), in.lrs.begin() + static_cast<long>(l.size()))}, {"losses", lj}});
    }
    req["smooth"] = json::array();
    for (std::size_t k = 0; k < in.raws.size(); ++k)
      req["smooth"].push_back(
          {{"raw", in.raws[k]}, {"threshold", in.thresholds[k] > 0 ? json(in.thresholds[k]) : json(nullptr)}});
    const fs::path file = testing::temp_dir("lr_finder_ref") / "request.json";
    std::ofstream(file) << req.dump();
    return json::parse(testing::run_python("tests/reference/lr_finder_ref.py", {file.string()}));
  }();
  return r;
}

std::vector<double> numbers(const json& a) {
  std::vector<double> v;
  for (const auto& x : a) v.push_back(x.is_null() ? std::numeric_limits<double>::quiet_NaN() : x.get<double>());
  return v;
}

TEST(LrFinder, ScheduleEqualsLightning) {
  struct Case {
    double min_lr, max_lr;
    std::int64_t n;
    LrFinderMode mode;
    const char* mode_name;
  };
  const Case cases[] = {{1e-8, 1.0, 100, LrFinderMode::kExponential, "exponential"},
                        {1e-5, 0.1, 50, LrFinderMode::kLinear, "linear"}};
  for (std::size_t k = 0; k < 2; ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE(c.mode_name);
    const json& r = reference()["runs"][k];
    LrFinderOptions o;
    o.min_lr = c.min_lr;
    o.max_lr = c.max_lr;
    o.num_training = c.n;
    o.mode = c.mode;
    const auto ours = lr_finder_schedule(o);
    const auto theirs = numbers(r["lrs"]);
    ASSERT_EQ(ours.size(), theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(ours[i] / theirs[i], 1.0, 1e-12) << i;
    // Lightning's own run: our suggestion on its losses is its index.
    const auto s = suggest_steepest(theirs, numbers(r["losses"]));
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(static_cast<std::int64_t>(*s), r["suggestion"].get<std::int64_t>());
  }
}

TEST(LrFinder, SuggestionEqualsLightningOnTheSameLosses) {
  const Inputs& in = inputs();
  const json& r = reference()["suggest"];
  for (std::size_t k = 0; k < in.suggest.size(); ++k) {
    SCOPED_TRACE(k);
    const auto& l = in.suggest[k];
    const auto s =
        suggest_steepest(std::vector<double>(in.lrs.begin(), in.lrs.begin() + static_cast<long>(l.size())), l);
    if (r[k].is_null()) {
      EXPECT_FALSE(s.has_value());
    } else {
      ASSERT_TRUE(s.has_value());
      EXPECT_EQ(static_cast<std::int64_t>(*s), r[k].get<std::int64_t>());
    }
  }
}

TEST(LrFinder, SmoothingAndEarlyStopEqualLightning) {
  const auto& raws = inputs().raws;
  const auto& thresholds = inputs().thresholds;
  const json& r = reference()["smooth"];
  for (std::size_t k = 0; k < raws.size(); ++k) {
    SCOPED_TRACE(k);
    LossSmoother s(0.98, thresholds[k]);
    std::vector<double> smoothed;
    std::optional<std::size_t> stop;
    for (std::size_t i = 0; i < raws[k].size(); ++i) {
      smoothed.push_back(s.push(raws[k][i], static_cast<std::int64_t>(i) + 1));
      if (s.diverged()) {
        stop = i;
        break;
      }
    }
    const auto theirs = numbers(r[k]["smoothed"]);
    ASSERT_EQ(smoothed.size(), theirs.size());
    for (std::size_t i = 0; i < theirs.size(); ++i) EXPECT_NEAR(smoothed[i], theirs[i], 1e-12) << i;
    if (r[k]["stop"].is_null()) {
      EXPECT_FALSE(stop.has_value());
    } else {
      ASSERT_TRUE(stop.has_value());
      EXPECT_EQ(static_cast<std::int64_t>(*stop), r[k]["stop"].get<std::int64_t>());
    }
  }
}

// fastai's valley: for a loss that falls strictly over points 10..69 and rises after, the
// sliced run [10, 95) has its longest descent at 0..59 (max_start -1 as fastai computes it), so
// the point is -1 + 20 + 10 = 29 of the slice: index 39.
TEST(LrFinder, ValleyIsTwoThirdsDownTheLongestDescent) {
  LrFinderOptions o;
  const auto lrs = lr_finder_schedule(o);
  std::vector<double> l(100);
  for (std::size_t i = 0; i < 100; ++i) l[i] = i < 70 ? 100.0 - static_cast<double>(i) : 30.0 + static_cast<double>(i);
  const auto v = suggest_valley(lrs, l);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 39u);
  EXPECT_FALSE(suggest_valley(std::vector<double>(lrs.begin(), lrs.begin() + 6), std::vector<double>(6, 1.0)));
}

class Blobs final : public DataModule {
 public:
  Blobs() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
    at::Tensor x = torch::randn({512, 8}, gen);
    at::Tensor y = (x.select(1, 0) > 0).to(torch::kLong) + (x.select(1, 1) > 0).to(torch::kLong);
    set_ = std::make_shared<data::TensorDataset>(x, y, 3);
    opts_.batch_size = 32;
    opts_.shuffle = true;
  }
  void setup() override {}
  DataInfo info() const override { return {{8}, 3, {}, {}, {}}; }
  std::shared_ptr<const data::Dataset> train_dataset() const override { return set_; }
  std::shared_ptr<const data::Dataset> val_dataset() const override { return set_; }
  std::shared_ptr<const data::Dataset> test_dataset() const override { return set_; }
  data::LoaderOptions train_loader_options() const override { return opts_; }
  data::LoaderOptions eval_loader_options() const override { return opts_; }

 private:
  std::shared_ptr<data::TensorDataset> set_;
  data::LoaderOptions opts_;
};

TEST(LrFinder, RangeTestFindsARateAndLeavesTheModelAsItWas) {
  torch::manual_seed(2);
  nn::ModelOptions mo;
  mo.mlp.hidden = {16};
  mo.mlp.norm = nn::MlpNorm::kBatchNorm;
  ClassificationTask task(nn::make_model(mo, nn::ModelShape{{8}, 3}), nn::Loss(nn::LossOptions{}, 3));
  task.module().named_parameters()["body.fc0.weight"].set_requires_grad(false);
  std::map<std::string, at::Tensor> before;
  for (const auto& p : task.module().named_parameters()) before[p.key()] = p.value().clone();
  for (const auto& b : task.module().named_buffers()) before[b.key()] = b.value().clone();
  Blobs data;
  TrainerOptions t;
  t.device = "cpu";
  t.freeze_fraction = 0.0;
  OptimizerOptions opt;
  opt.name = OptimizerKind::kSgd;
  LrFinderOptions o;
  const LrFinderResult r = lr_range_test(task, data, t, opt, o);
  ASSERT_FALSE(r.lrs.empty());
  EXPECT_LE(r.lrs.size(), 100u);
  EXPECT_EQ(r.lrs.size(), r.losses.size());
  EXPECT_DOUBLE_EQ(r.lrs[0], 1e-8);
  EXPECT_TRUE(r.stopped_early || r.lrs.size() == 100u);
  ASSERT_TRUE(r.suggestion.has_value());
  EXPECT_GT(r.lrs[*r.suggestion], 1e-6);  // somewhere the loss falls fast, not at the start
  EXPECT_LT(r.lrs[*r.suggestion], 1.0);
  for (const auto& p : task.module().named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), before[p.key()])) << p.key();
  for (const auto& b : task.module().named_buffers()) EXPECT_TRUE(torch::equal(b.value(), before[b.key()])) << b.key();
  EXPECT_FALSE(task.module().named_parameters()["body.fc0.weight"].requires_grad());
  EXPECT_TRUE(task.module().named_parameters()["body.head.weight"].requires_grad());
  const json j = r.to_json();
  EXPECT_EQ(j["lrs"].size(), r.lrs.size());
  EXPECT_TRUE(j["suggestion"].contains("lr"));
}

TEST(LrFinder, RejectsABadRange) {
  LrFinderOptions o;
  o.min_lr = 1.0;
  o.max_lr = 0.1;
  EXPECT_THROW(lr_finder_schedule(o), Error);
  o = LrFinderOptions{};
  o.num_training = 1;
  EXPECT_THROW(lr_finder_schedule(o), Error);
}

}  // namespace
}  // namespace glassbox::train
