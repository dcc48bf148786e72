// The doctor's rules on hand-built facts (no data, no model, no training): each rule fires on the
// facts of its fault and stays quiet on a near miss; the cause graph ranks causes above their
// symptoms; no two findings of any pair of rules leave contradicting fixes. All of it runs in well
// under a second. Over 600 lines: one case per rule, in the order of the rule table, so that a
// new rule's test sits beside its neighbours'.
#include <algorithm>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "glassbox/inspect/doctor_internal.h"

namespace glassbox::inspect::detail {
namespace {

// Facts to build a case from: a healthy 4-class training split of 1000 samples, batch 32, no run.
struct Case {
  DataFacts d;
  RunFacts r;
  train::RunConfig c;
  Case() {
    d.outputs = 4;
    d.train.name = "train";
    d.train.size = 1000;
    d.train.label_min = 0;
    d.train.label_max = 3;
    d.train.counts = {{0, 250}, {1, 250}, {2, 250}, {3, 250}};
    d.train.distinct = 1000;
    d.batch_size = 32;
    d.mean = 0;
    d.std = 1;
    d.median_sample_absmax = 3;
    d.knn_agreement = 0.9;
    d.knn_chance = 0.25;
    d.knn_sigma = 0.02;
    d.label_runs = 750;
    d.label_runs_expected = 750.25;
    c.optim.lr = 1e-3;
    c.optim.weight_decay = 0;
  }
  // A run of `steps` steps whose loss goes from `from` to `to` linearly, accuracy `acc`.
  void run(std::size_t steps, double from, double to, double acc = 0.5) {
    r.ran = true;
    r.steps = static_cast<std::int64_t>(steps);
    r.batches_per_epoch = r.full_batches_per_epoch = 32;
    for (std::size_t i = 0; i < steps; ++i) {
      const double t = steps > 1 ? static_cast<double>(i) / static_cast<double>(steps - 1) : 0.0;
      r.loss.push_back(from + (to - from) * t);
      r.acc.push_back(acc);
      r.grad_norm.push_back(1.0);
      r.batch_hash.push_back(i % 32);
    }
  }
  // Probes every 10 steps over a 3-layer network: weights w0 (first) .. w2 (last).
  void probes(double ratio, double first_grad = 1.0, double last_grad = 1.0, double weight_norm = 10.0,
              double weight_norm_end = -1) {
    const std::size_t n = std::max<std::size_t>(2, static_cast<std::size_t>(r.steps / 10));
    for (std::size_t k = 0; k < n; ++k) {
      ProbeRecord p;
      p.step = static_cast<std::int64_t>(10 * k);
      const double t = static_cast<double>(k) / static_cast<double>(n - 1);
      const double wn = weight_norm_end < 0 ? weight_norm : weight_norm + (weight_norm_end - weight_norm) * t;
      for (int l = 0; l < 3; ++l) {
        ParameterStats s;
        s.name = "layer" + std::to_string(l) + ".weight";
        s.numel = 256;
        s.has_grad = true;
        s.grad.norm = l == 0 ? first_grad : l == 2 ? last_grad : 1.0;
        s.value.norm = wn / std::sqrt(3.0);
        p.parameters.push_back(s);
        p.update_ratio.push_back(ratio);
      }
      r.probes.push_back(p);
    }
  }
  void relu(const std::string& layer, double dead) {
    for (auto& p : r.probes) {
      LayerActivation a;
      a.layer = layer;
      a.type = "ReLU";
      a.shape = {32, 64};
      a.stats.dead_fraction = dead;
      p.activations.push_back(a);
    }
  }
};

const Rule& rule(const std::string& id) {
  for (const auto& r : rules())
    if (r.id == id) return r;
  throw std::runtime_error("no rule " + id);
}

// The findings of one rule; each must use only the actions its table row declares.
std::vector<Finding> check(const std::string& id, const Case& k) {
  const Rule& r = rule(id);
  std::vector<Finding> out = r.check(make_facts(k.d, k.r, k.c));
  for (const auto& f : out) {
    EXPECT_EQ(f.id, id);
    EXPECT_FALSE(f.evidence.empty()) << id;
    if (id != "check-not-run") {
      EXPECT_FALSE(f.fix.empty()) << id;
    }
    for (const auto& a : f.actions)
      EXPECT_NE(std::find(r.actions.begin(), r.actions.end(), a), r.actions.end())
          << id << " uses an undeclared action " << a.setting << " " << a.direction;
  }
  return out;
}

std::vector<FixAction> actions_of(const std::string& setting, const std::string& direction) {
  return {FixAction{setting, direction}};
}

std::string ids(const std::vector<Finding>& v) {
  std::string s;
  for (const auto& f : v) s += f.id + "(" + std::string(name_of(f.severity)) + ") ";
  return s;
}

// --- every rule is quiet on a healthy case ---

TEST(DoctorRules, HealthyFactsRaiseNothing) {
  Case k;
  k.run(300, 1.4, 0.3, 0.9);
  k.probes(1e-3);
  for (const auto& r : rules()) EXPECT_TRUE(check(r.id, k).empty()) << r.id;
  EXPECT_TRUE(diagnose(make_facts(k.d, k.r, k.c)).empty());
}

// --- data rules ---

TEST(DoctorRules, LabelOffsetAndItsNearMiss) {
  Case k;
  k.d.train.counts = {{1, 250}, {2, 250}, {3, 250}, {4, 250}};
  k.d.train.label_min = 1;
  k.d.train.label_max = 4;
  ASSERT_EQ(check("label-offset", k).size(), 1u);
  EXPECT_EQ(check("label-offset", k)[0].where["labels"], nlohmann::json({1, 4}));
  k.d.train.counts[0] = 1;  // 0 occurs: not an offset
  EXPECT_TRUE(check("label-offset", k).empty());
}

TEST(DoctorRules, LabelOutOfRangeFromTheDataOrTheLoss) {
  Case k;
  k.d.val.name = "val";
  k.d.val.out_of_range_count = 3;
  k.d.val.out_of_range = {5, 9, 11};
  k.d.val.counts = {{0, 10}, {7, 3}};
  auto f = check("label-out-of-range", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].where["split"], "val");
  EXPECT_NE(f[0].evidence.find("7 x3"), std::string::npos) << f[0].evidence;
  Case e;
  e.r.error = "Target 9 is out of bounds.";
  ASSERT_EQ(check("label-out-of-range", e).size(), 1u);
}

TEST(DoctorRules, ConstantLabels) {
  Case k;
  k.d.train.counts = {{2, 1000}};
  k.d.train.label_min = k.d.train.label_max = 2;
  ASSERT_EQ(check("constant-labels", k).size(), 1u);
}

TEST(DoctorRules, ClassImbalanceIsAnErrorOnlyWhenTheModelFollowsIt) {
  Case k;
  k.d.train.counts = {{0, 900}, {1, 50}, {2, 25}, {3, 25}};
  k.run(300, 1.0, 0.5, 0.91);  // accuracy = the majority share
  auto f = check("class-imbalance", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  k.r = RunFacts{};
  k.run(300, 1.0, 0.2, 0.99);  // learns beyond the majority
  EXPECT_EQ(check("class-imbalance", k)[0].severity, Severity::kWarning);
  k.c.loss.class_weights = {0.1, 1, 1, 1};
  EXPECT_EQ(check("class-imbalance", k)[0].severity, Severity::kInfo);
  EXPECT_TRUE(check("class-imbalance", k)[0].actions.empty());
}

TEST(DoctorRules, NonFiniteInputPerSplit) {
  Case k;
  k.d.train.nonfinite_values = 4;
  k.d.train.nonfinite_sample_count = 2;
  k.d.train.nonfinite_samples = {3, 17};
  k.d.test.name = "test";
  k.d.test.nonfinite_values = 1;
  auto f = check("nonfinite-input", k);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_GT(f[0].confidence, f[1].confidence);  // the training split's matters most
}

TEST(DoctorRules, UnnormalizedInputIsAnErrorWhenTheRunStalls) {
  Case k;
  k.d.std = 60;
  k.d.median_sample_absmax = 255;
  EXPECT_EQ(check("unnormalized-input", k)[0].severity, Severity::kWarning);
  k.run(300, 2.0, 1.95);
  EXPECT_EQ(check("unnormalized-input", k)[0].severity, Severity::kError);
  Case tiny;
  tiny.d.std = 1e-4;
  EXPECT_EQ(check("unnormalized-input", tiny).size(), 1u);
}

TEST(DoctorRules, InputOutliersLeakageUnreadable) {
  Case k;
  k.d.extreme_samples = {42};
  k.d.extreme_value = 3e38;
  EXPECT_EQ(check("input-outliers", k).size(), 1u);
  k.d.has_test = true;
  k.d.test.size = 200;
  k.d.dup_test = 20;
  EXPECT_EQ(check("train-test-leakage", k)[0].severity, Severity::kError);
  k.d.dup_test = 1;  // 0.5 %: a note
  EXPECT_EQ(check("train-test-leakage", k)[0].severity, Severity::kInfo);
  k.d.skipped_files = {"a/broken.png"};
  EXPECT_EQ(check("unreadable-images", k)[0].severity, Severity::kInfo);
}

TEST(DoctorRules, NearDuplicateLeakageAgainstTheTrainingSplitsOwnRate) {
  Case k;
  NearDuplicates& nd = k.d.near_dup;
  nd.split = "test";
  nd.method = "distance";
  nd.checked = 1000;
  nd.base_checked = 1000;
  nd.found = 50;  // 5 % of the test split
  nd.share = 0.05;
  nd.base_rate = 0.004;
  nd.examples = {3};
  nd.train_examples = {77};
  auto f = check("near-duplicate-leakage", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_NE(f[0].evidence.find("3 ~ train 77"), std::string::npos) << f[0].evidence;
  // Natural look-alikes: the training split has as many among itself.
  nd.base_rate = 0.05;
  EXPECT_TRUE(check("near-duplicate-leakage", k).empty());
  // A few more than the base rate, below 1 %: a note.
  nd.found = 8;
  nd.share = 0.008;
  nd.base_rate = 0.002;
  EXPECT_EQ(check("near-duplicate-leakage", k)[0].severity, Severity::kInfo);
}

TEST(DoctorRules, LabelNoiseFromConfidentLearning) {
  Case k;
  k.r.noise_rate = 0.3;
  k.r.noise_samples = 1000;
  k.r.noise_suspects = 280;
  k.r.noise_model_acc = 0.65;
  k.r.noise_given = 6;
  k.r.noise_true = 0;
  k.r.noise_pair_share = 0.02;
  auto f = check("label-noise", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_EQ(f[0].where["given"], 6);
  k.r.noise_rate = 0.45;  // an upper bound: a warning however high, more confident
  EXPECT_EQ(check("label-noise", k)[0].severity, Severity::kWarning);
  EXPECT_GT(check("label-noise", k)[0].confidence, f[0].confidence);
  k.r.noise_model_acc = 0.4;  // a model this weak: its confident mistakes, not the labels
  EXPECT_TRUE(check("label-noise", k).empty());
  k.r.noise_model_acc = 0.9;
  k.r.noise_rate = 0.12;  // what clean data sets give
  EXPECT_TRUE(check("label-noise", k).empty());
}

TEST(DoctorRules, BatchNormBatchOfOneFromTheSplitSizeOrTheFailure) {
  Case k;
  k.d.batchnorm_layers = {"body.bn0"};
  k.d.train.size = 993;  // 31 batches of 32 and one of 1
  ASSERT_EQ(check("batchnorm-batch-of-one", k).size(), 1u);
  k.d.drop_last = true;
  EXPECT_TRUE(check("batchnorm-batch-of-one", k).empty());
  k.r.error = "Expected more than 1 value per channel when training, got input size [1, 8]";
  k.r.failing_step = 31;
  auto f = check("batchnorm-batch-of-one", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].where["step"], 31);
}

TEST(DoctorRules, ProbabilitiesAsLogitsAndCheckNotRun) {
  Case k;
  k.d.outputs_are_probabilities = true;
  k.d.head_layer = "head.softmax";
  EXPECT_EQ(check("probabilities-as-logits", k)[0].where["layer"], "head.softmax");
  k.d.skipped = {{"model-output", "shape mismatch"}};
  k.r.skipped = {{"batchnorm-statistics", "oops"}};
  auto f = check("check-not-run", k);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].severity, Severity::kInfo);
  EXPECT_EQ(f[1].where["check"], "batchnorm-statistics");
}

// --- run rules ---

TEST(DoctorRules, RunFailureKinds) {
  Case k;
  k.r.error = "Expected all tensors to be on the same device, but found at least two devices";
  k.r.failing_layer = "body.fc1";
  EXPECT_EQ(check("device-mismatch", k)[0].where["layer"], "body.fc1");
  EXPECT_TRUE(check("run-failed", k).empty());
  k.r.error = "something else entirely\nwith a second line";
  auto f = check("run-failed", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].evidence.find("second line"), std::string::npos);
}

TEST(DoctorRules, NonFiniteActivationGradientAndLowPrecision) {
  Case k;
  NonFiniteEvent e;
  e.kind = "activation";
  e.layer = "body.fc0";
  e.op = "aten::exp";
  e.message = "non-finite activation";
  k.r.nonfinite = e;
  ASSERT_EQ(check("nonfinite-activation", k).size(), 1u);
  EXPECT_EQ(check("nonfinite-activation", k)[0].actions, actions_of("model.code", "repair"));
  k.c.trainer.precision = train::PrecisionMode::kBf16Mixed;
  EXPECT_TRUE(check("nonfinite-activation", k).empty());
  EXPECT_EQ(check("low-precision-overflow", k).size(), 1u);
  k.c.trainer.precision = train::PrecisionMode::k32;
  k.r.nonfinite->kind = "gradient";
  EXPECT_EQ(check("nonfinite-gradient", k).size(), 1u);
  Case s;
  s.r.steps = 100;
  s.r.scaler_skips = 40;
  EXPECT_EQ(check("low-precision-overflow", s).size(), 1u);
}

TEST(DoctorRules, ExplodingGradientsNeedGrowthAndAHighNorm) {
  Case k;
  k.run(100, 1.4, 1.4);
  for (std::size_t i = 0; i < 100; ++i) k.r.grad_norm[i] = i < 50 ? 1.0 : 1e3;
  k.probes(1e-3);
  auto f = check("exploding-gradients", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].where["step"], 50);
  for (std::size_t i = 50; i < 100; ++i) k.r.grad_norm[i] = 50;  // x50, below grad_norm_high
  EXPECT_TRUE(check("exploding-gradients", k).empty());
  // A huge first step that settles (a fresh head on a pretrained body) is not growth.
  k.r.grad_norm.assign(100, 5e4);
  k.r.grad_norm[0] = 6e6;
  EXPECT_TRUE(check("exploding-gradients", k).empty());
}

TEST(DoctorRules, ParametersNotUpdating) {
  Case k;
  k.run(100, 1.4, 1.4);
  k.probes(0.0);
  k.c.optim.lr = 0;
  auto f = check("parameters-not-updating", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].actions, actions_of("optim.lr", "raise"));
  k.c.optim.lr = 1e-3;
  EXPECT_EQ(check("parameters-not-updating", k)[0].actions, actions_of("optim.param_groups", "repair"));
  // Plain SGD with a gradient so small that lr x gradient rounds away in float32: nothing to tell.
  k.c.optim.name = train::OptimizerKind::kSgd;
  for (auto& p : k.r.probes)
    for (auto& s : p.parameters) s.grad.norm = 1e-6;
  EXPECT_TRUE(check("parameters-not-updating", k).empty());
}

TEST(DoctorRules, LearningRateTooHighOrTooLowNeverBoth) {
  Case hi;
  hi.run(200, 1.4, 8.0);  // rising far above chance (ln 4 = 1.39)
  hi.probes(0.05);
  EXPECT_EQ(check("lr-too-high", hi).size(), 1u);
  EXPECT_TRUE(check("lr-too-low", hi).empty());
  Case lo;
  lo.run(200, 1.4, 1.39);
  lo.probes(1e-7);
  EXPECT_EQ(check("lr-too-low", lo).size(), 1u);
  EXPECT_TRUE(check("lr-too-high", lo).empty());
  for (std::size_t i = 0; i < 200; ++i) lo.r.lr.push_back(1e-5 * (1 + 0.01 * static_cast<double>(i)));
  EXPECT_TRUE(check("lr-too-low", lo).empty());  // a warm-up still raising the learning rate
  lo.r.lr.assign(200, 1e-5);
  EXPECT_EQ(check("lr-too-low", lo).size(), 1u);
  lo.r.grad_norm.assign(200, 1e-4);  // no gradient to speak of: not the learning rate
  EXPECT_TRUE(check("lr-too-low", lo).empty());
}

TEST(DoctorRules, VanishingGradientsDeadReluWeightDecay) {
  Case v;
  v.run(200, 1.4, 1.39);
  v.probes(1e-6, /*first_grad=*/1e-5, /*last_grad=*/1.0);
  EXPECT_EQ(check("vanishing-gradients", v)[0].where["layer"], "layer0.weight");
  Case d;
  d.run(200, 1.4, 1.39);
  d.probes(1e-3);
  d.relu("body.act0", 0.9);
  auto f = check("dead-relu", d);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  d.r.probes.clear();
  d.probes(1e-3);
  d.relu("body.act0", 0.45);
  EXPECT_EQ(check("dead-relu", d)[0].severity, Severity::kWarning);
  Case w;
  w.run(200, 1.4, 1.39);
  w.probes(1e-3, 1, 1, 10.0, 0.1);
  w.c.optim.weight_decay = 500;
  EXPECT_EQ(check("weight-decay-too-large", w).size(), 1u);
  w.c.optim.weight_decay = 0;
  EXPECT_TRUE(check("weight-decay-too-large", w).empty());
}

TEST(DoctorRules, NoGradientFrozenOrCut) {
  Case k;
  k.r.total_numel = 1000;
  k.r.frozen_numel = 900;
  k.r.frozen = {"body.fc0.weight"};
  k.r.no_grad_params = {"head.weight"};
  EXPECT_EQ(check("no-gradient", k).size(), 2u);
  k.c.model.init_from = "backbone.safetensors";  // frozen layers with trained weights: only the cut graph
  EXPECT_EQ(check("no-gradient", k).size(), 1u);
}

// --- fit rules ---

TEST(DoctorRules, LabelsShuffledAgainstThePermutationNull) {
  Case k;
  k.d.knn_agreement = 0.26;
  k.d.knn_chance = 0.25;
  k.d.knn_sigma = 0.01;
  k.run(200, 1.39, 1.38, 0.26);
  auto f = check("labels-shuffled", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  k.d.knn_agreement = 0.30;  // 5 sigma above the null
  EXPECT_TRUE(check("labels-shuffled", k).empty());
  // At chance for the neighbours, but a held-out linear baseline finds the signal (70 % on 300
  // samples against a 25 % majority): the labels are not shuffled.
  k.d.knn_agreement = 0.26;
  k.d.baseline_acc = 0.7;
  k.d.baseline_samples = 300;
  EXPECT_TRUE(check("labels-shuffled", k).empty());
  k.d.baseline_acc = 0.27;  // the baseline at chance too
  EXPECT_EQ(check("labels-shuffled", k).size(), 1u);
  k.d.knn_agreement = 0.20;  // 5 sigma below chance: neighbours anti-correlated, not independent
  EXPECT_TRUE(check("labels-shuffled", k).empty());
}

TEST(DoctorRules, RepeatedBatchesInTheSplitOrTheRun) {
  Case k;
  k.d.train.distinct = 300;
  EXPECT_EQ(check("repeated-batches", k).size(), 1u);
  Case r;
  r.run(100, 1.4, 1.0);
  std::fill(r.r.batch_hash.begin(), r.r.batch_hash.end(), 7);
  EXPECT_EQ(check("repeated-batches", r)[0].severity, Severity::kError);
  r.c.trainer.overfit_batches = 1;
  EXPECT_EQ(check("repeated-batches", r)[0].severity, Severity::kInfo);
}

TEST(DoctorRules, BatchNormDriftBySizeOfGapAndSamplingError) {
  Case k;
  k.d.batchnorm_layers = {"bn"};
  k.r.bn_train_mode_acc = 0.80;
  k.r.bn_eval_mode_acc = 0.70;  // 10 points: below 15
  k.r.bn_train_mode_loss = 0.5;
  k.r.bn_eval_mode_loss = 0.6;
  k.r.bn_samples = 256;
  k.r.bn_only_train_right = 30;
  k.r.bn_only_eval_right = 4;  // z = 26 / sqrt(34) = 4.5
  EXPECT_EQ(check("batchnorm-stats-drift", k).size(), 1u);
  k.r.bn_only_train_right = 40;
  k.r.bn_only_eval_right = 14;  // z = 3.5: within sampling error
  EXPECT_TRUE(check("batchnorm-stats-drift", k).empty());
}

TEST(DoctorRules, OverfittingNeedsValidationLossRisingAsTrainingLossFalls) {
  Case k;
  k.run(300, 1.4, 0.1, 0.99);
  for (int i = 0; i < 6; ++i)
    k.r.validations.push_back({.step = 50 * i,
                               .val_loss = i < 2 ? 1.0 - 0.2 * i : 0.8 + 0.2 * i,
                               .val_acc = 0.6,
                               .train_loss = 1.0 - 0.15 * i});
  EXPECT_EQ(check("overfitting", k).size(), 1u);
  for (auto& v : k.r.validations) v.val_loss = 0.5;
  EXPECT_TRUE(check("overfitting", k).empty());
}

TEST(DoctorRules, UnderfittingAgainstTheDoctorsBaseline) {
  Case k;
  k.d.baseline_acc = 0.90;
  k.d.baseline_name = "a ridge linear classifier";
  k.d.baseline_samples = 300;
  k.run(300, 1.39, 1.0, 0.55);
  std::fill(k.r.loss.begin() + 150, k.r.loss.end(), 1.0);  // flat for the second half
  auto f = check("underfitting", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].where["baseline"], "a ridge linear classifier");
  // Still improving: not a plateau.
  Case m = k;
  for (std::size_t i = 0; i < 300; ++i) m.r.loss[i] = 1.39 - 0.003 * static_cast<double>(i);
  EXPECT_TRUE(check("underfitting", m).empty());
  // Within the baseline's reach: 0.83 against 0.90 is not 10 points.
  std::fill(k.r.acc.begin(), k.r.acc.end(), 0.83);
  EXPECT_TRUE(check("underfitting", k).empty());
  // A baseline scored on few samples needs a larger gap: 12 points on 30 samples is within 4 SE.
  std::fill(k.r.acc.begin(), k.r.acc.end(), 0.78);
  k.d.baseline_samples = 30;
  EXPECT_TRUE(check("underfitting", k).empty());
}

TEST(DoctorRules, OrderedDataWithoutShuffle) {
  Case k;
  k.d.shuffle = false;
  k.d.label_runs = 4;  // sorted by class
  auto f = check("ordered-data-without-shuffle", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].actions, actions_of("data.loader.shuffle", "true"));
  k.d.shuffle = true;
  EXPECT_TRUE(check("ordered-data-without-shuffle", k).empty());
  k.d.shuffle = false;
  k.d.label_runs = 700;  // stored in random order: unshuffled is harmless
  EXPECT_TRUE(check("ordered-data-without-shuffle", k).empty());
}

TEST(DoctorRules, PartialEpochsLeftOn) {
  Case k;
  k.run(100, 1.4, 0.5);
  k.c.trainer.limit_train_batches = 0.05;
  k.r.batches_per_epoch = 1;
  auto f = check("partial-epochs-left-on", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_EQ(f[0].where["setting"], "trainer.limit_train_batches");
  k.c.trainer.limit_train_batches = 1.0;
  k.c.trainer.overfit_batches = 2;
  k.r.batches_per_epoch = 2;
  EXPECT_EQ(check("partial-epochs-left-on", k)[0].where["setting"], "trainer.overfit_batches");
  k.c.trainer.overfit_batches = 0;
  k.c.trainer.limit_train_batches = 0.8;  // most of the data: no finding
  k.r.batches_per_epoch = 25;
  EXPECT_TRUE(check("partial-epochs-left-on", k).empty());
}

TEST(DoctorRules, DataLoadingBottleneckNamesTheWorkersNeeded) {
  Case k;
  k.r.steps = 100;
  k.r.seconds = 10;
  k.r.data_wait = 8;  // 80 ms waiting, 20 ms computing per step
  auto f = check("data-loading-bottleneck", k);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].fix.find(std::thread::hardware_concurrency() >= 5 ? "to about 5" : "about 5 workers"),
            std::string::npos)
      << f[0].fix;
}

// --- the cause graph ---

TEST(DoctorGraph, NamesOnlyRulesAndHasNoCycle) {
  std::set<std::string> ids;
  for (const auto& r : rules()) EXPECT_TRUE(ids.insert(r.id).second) << "two rules for " << r.id;
  const auto& g = cause_graph();
  for (const auto& [cause, symptoms] : g) {
    EXPECT_TRUE(ids.count(cause)) << cause;
    for (const auto& s : symptoms) EXPECT_TRUE(ids.count(s)) << cause << " -> " << s;
  }
  // Depth-first search for a back edge.
  std::map<std::string, int> state;  // 1 on the stack, 2 done
  std::function<void(const std::string&, std::string)> visit = [&](const std::string& n, std::string path) {
    state[n] = 1;
    const auto it = g.find(n);
    if (it != g.end())
      for (const auto& s : it->second) {
        ASSERT_NE(state[s], 1) << "cycle: " << path << " -> " << s;
        if (state[s] == 0) visit(s, path + " -> " + s);
      }
    state[n] = 2;
  };
  for (const auto& [cause, symptoms] : g)
    if (state[cause] == 0) visit(cause, cause);
}

Finding finding(const std::string& id, Severity s, double confidence, std::vector<FixAction> actions = {}) {
  return Finding{
      .id = id, .severity = s, .confidence = confidence, .evidence = "e", .fix = "own fix", .actions = actions};
}

std::size_t position(const std::vector<Finding>& v, const std::string& id) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i].id == id) return i;
  return v.size();
}

TEST(DoctorGraph, ACauseRanksAboveTheSymptomsItExplains) {
  // The symptoms are errors with high confidence; the cause is a warning with less: it still
  // comes first, raised to error, and the symptoms name it.
  std::vector<Finding> v = {
      finding("dead-relu", Severity::kError, 0.95, {{"optim.lr", "lower"}}),
      finding("vanishing-gradients", Severity::kError, 0.9, {{"model.normalization", "add"}}),
      finding("lr-too-low", Severity::kError, 0.85, {{"optim.lr", "raise"}}),
      finding("weight-decay-too-large", Severity::kWarning, 0.5, {{"optim.weight_decay", "lower"}}),
      finding("train-test-leakage", Severity::kError, 0.9)};
  const auto out = finalise(v);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].id, "weight-decay-too-large") << ids(out);
  EXPECT_EQ(out[0].severity, Severity::kError);
  EXPECT_TRUE(out[0].because_of.empty());
  const auto& dead = out[position(out, "dead-relu")];
  EXPECT_EQ(dead.because_of, std::vector<std::string>{"weight-decay-too-large"});
  EXPECT_LT(position(out, "dead-relu"), position(out, "lr-too-low"));  // dead units explain tiny updates
  const auto& low = out[position(out, "lr-too-low")];
  EXPECT_EQ(low.because_of.size(), 3u);  // weight decay, dead-relu, vanishing gradients
  // Raising the learning rate would undo lowering it: lr-too-low points to its causes instead.
  EXPECT_EQ(low.fix.find("own fix"), std::string::npos) << low.fix;
  EXPECT_TRUE(low.actions.empty());
  // A symptom whose own remedy does not conflict keeps it, after its cause's.
  EXPECT_NE(dead.fix.find("own fix"), std::string::npos);
  EXPECT_EQ(dead.fix.find("this follows from weight-decay-too-large"), 0u) << dead.fix;
}

TEST(DoctorGraph, AnInfoFindingExplainsNothing) {
  auto out =
      finalise({finding("underfitting", Severity::kError, 0.8), finding("class-imbalance", Severity::kInfo, 0.4)});
  EXPECT_EQ(out[0].id, "underfitting");
  EXPECT_TRUE(out[0].because_of.empty());
  EXPECT_EQ(out[1].severity, Severity::kInfo);
}

TEST(DoctorGraph, OneFindingPerIdTheMostSevere) {
  auto out = finalise({finding("no-gradient", Severity::kWarning, 0.9), finding("no-gradient", Severity::kError, 0.5),
                       finding("check-not-run", Severity::kInfo, 0.3), finding("check-not-run", Severity::kInfo, 0.3)});
  ASSERT_EQ(out.size(), 2u);  // the two notes name the same (empty) check
  EXPECT_EQ(out[0].severity, Severity::kError);
}

// For every pair of rules, and every pair of the actions they may ask for, in either order and at
// every combination of severities: the report leaves no two fixes that contradict each other.
TEST(DoctorGraph, NoTwoFixesContradictForAnyPairOfRules) {
  const auto& all = rules();
  std::size_t pairs = 0, conflicting = 0;
  const Severity levels[] = {Severity::kError, Severity::kWarning};
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      ++pairs;
      std::vector<std::vector<FixAction>> ai, aj;
      for (const auto& a : all[i].actions) ai.push_back({a});
      for (const auto& a : all[j].actions) aj.push_back({a});
      ai.push_back(all[i].actions);  // all at once
      aj.push_back(all[j].actions);
      for (const auto& x : ai)
        for (const auto& y : aj) {
          const bool clash = std::any_of(x.begin(), x.end(), [&](const FixAction& a) {
            return std::any_of(y.begin(), y.end(), [&](const FixAction& b) { return contradicts(a, b); });
          });
          conflicting += clash;
          for (Severity si : levels)
            for (Severity sj : levels)
              for (double ci : {0.5, 0.9}) {
                const auto out = finalise({finding(all[i].id, si, ci, x), finding(all[j].id, sj, 0.7, y)});
                ASSERT_EQ(out.size(), 2u);
                for (const auto& a : out[0].actions)
                  for (const auto& b : out[1].actions)
                    ASSERT_FALSE(contradicts(a, b)) << all[i].id << " / " << all[j].id << ": " << a.setting << " "
                                                    << a.direction << " vs " << b.direction;
                // The loser's text no longer carries its own remedy when they clashed.
                if (clash) {
                  EXPECT_EQ(out[1].fix.find("own fix"), std::string::npos) << all[i].id << " " << all[j].id;
                }
              }
        }
    }
  }
  EXPECT_EQ(pairs, all.size() * (all.size() - 1) / 2);
  EXPECT_GT(conflicting, 0u);  // the test meets real conflicts (learning rate, weight decay, capacity)
}

// The pairs whose remedies contradict are either joined in the cause graph (one explains the
// other) or cannot fire together on one run.
TEST(DoctorGraph, ContradictingRulesAreLinkedOrExclusive) {
  const auto& g = cause_graph();
  auto linked = [&](const std::string& a, const std::string& b) {
    auto has = [&](const std::string& c, const std::string& s) {
      const auto it = g.find(c);
      return it != g.end() && std::find(it->second.begin(), it->second.end(), s) != it->second.end();
    };
    return has(a, b) || has(b, a);
  };
  // Exclusive by their conditions (each shown by a test above or by construction):
  //   lr-too-high / lr-too-low: lr-too-low defers to lr-too-high on the same facts;
  //   lr-too-high / parameters-not-updating: the latter's raise needs lr = 0, the former an update ratio > 1e-2;
  //   dead-relu, nonfinite-activation / parameters-not-updating: with lr = 0 the former ask for no lower lr;
  //   overfitting / underfitting: a falling training loss below chance against a flat loss below the baseline;
  //   overfitting / weight-decay-too-large: a training loss that falls against one that does not;
  //   exploding-gradients, dead-relu, nonfinite-activation / lr-too-low, parameters-not-updating: growing
  //   gradients, units killed by large steps and overflowing activations all need updates that lr-too-low's
  //   ratio below 1e-5 and lr = 0 rule out.
  const std::set<std::pair<std::string, std::string>> exclusive = {
      {"lr-too-high", "lr-too-low"},
      {"lr-too-high", "parameters-not-updating"},
      {"overfitting", "underfitting"},
      {"overfitting", "weight-decay-too-large"},
      {"exploding-gradients", "lr-too-low"},
      {"exploding-gradients", "parameters-not-updating"},
      {"dead-relu", "parameters-not-updating"},
      {"nonfinite-activation", "lr-too-low"},
      {"nonfinite-activation", "parameters-not-updating"},
  };
  const auto& all = rules();
  for (const auto& a : all)
    for (const auto& b : all) {
      if (std::string(a.id) >= std::string(b.id)) continue;
      bool clash = false;
      for (const auto& x : a.actions)
        for (const auto& y : b.actions) clash |= contradicts(x, y);
      if (!clash) continue;
      EXPECT_TRUE(linked(a.id, b.id) || exclusive.count({a.id, b.id}) || exclusive.count({b.id, a.id}))
          << a.id << " and " << b.id << " give contradicting fixes but are neither linked nor exclusive";
    }
  // The exclusivity claimed for the learning rate holds on facts where both would read true.
  // The first probes' large steps blew the loss up; after that the steps are tiny (the weights
  // grew): lr-too-low's own test (median ratio below 1e-5, loss not falling) reads true here.
  Case k;
  k.run(200, 1.4, 8.0);
  k.probes(1e-7);
  for (std::size_t p = 0; p < 3; ++p) k.r.probes[p].update_ratio.assign(3, 0.05);
  const Facts facts = make_facts(k.d, k.r, k.c);
  ASSERT_LT(facts.summary.update_ratio, 1e-5);
  ASSERT_FALSE(facts.summary.learning);
  const auto out = diagnose(facts);
  EXPECT_LT(position(out, "lr-too-high"), out.size()) << ids(out);
  EXPECT_EQ(position(out, "lr-too-low"), out.size()) << ids(out);
  // With optim.lr = 0, units dead from the start ask for no lower learning rate, so they
  // cannot contradict parameters-not-updating's "set a real learning rate".
  Case z;
  z.run(100, 1.4, 1.4);
  z.probes(0.0);
  z.relu("body.act0", 0.95);
  z.c.optim.lr = 0;
  for (const auto& f : diagnose(make_facts(z.d, z.r, z.c)))
    if (f.id == "parameters-not-updating") {
      EXPECT_EQ(f.actions, actions_of("optim.lr", "raise")) << f.fix;
    }
}

}  // namespace
}  // namespace glassbox::inspect::detail
