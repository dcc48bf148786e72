// The doctor beyond lab/: faults planted in scikit-learn's bundled data sets (iris, wine, breast
// cancer, digits) and synthetic ones of other sizes and class balances, with other models and
// magnitudes than the lab's. Each must come out with its planted cause first; the healthy sets
// must raise no error-level finding. The data come from tests/reference/doctor_sets.py.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/inspect/doctor.h"
#include "glassbox/testing/testing.h"
#include "glassbox/train/run_config.h"

namespace glassbox::inspect {
namespace {

namespace fs = std::filesystem;

const fs::path& sets_dir() {
  static const fs::path dir = [] {
    const fs::path d = testing::temp_dir("doctor_sets");
    testing::run_python("tests/reference/doctor_sets.py", {"--out", d.string()});
    return d;
  }();
  return dir;
}

DoctorReport diagnose(const std::string& set, const std::vector<std::string>& overrides) {
  const fs::path config = sets_dir() / (set + ".toml");
  std::ofstream(config) << "[data]\nformat = \"npy\"\nroot = \"" << (sets_dir() / set).string()
                        << "\"\nval_size = 0.2\n[data.loader]\nbatch_size = 32\n[model]\nname = \"mlp\"\n"
                           "[model.mlp]\nhidden = [64, 32]\n[optim]\nname = \"adam\"\nlr = 0.001\n"
                           "[trainer]\nmax_epochs = 50\nseed = 42\nnum_threads = 1\n";
  DoctorOptions o;
  o.max_steps = 300;
  o.max_seconds = 30;
  return run_doctor(train::load_run_config(config, overrides), o);
}

std::string ids(const DoctorReport& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.id + "(" + std::string(name_of(f.severity)) + ") ";
  return s;
}

struct Variation {
  const char* set;
  std::vector<std::string> overrides;
  const char* expect;
};

void expect_first(const Variation& v) {
  SCOPED_TRACE(std::string(v.set) + " -> " + v.expect);
  const DoctorReport r = diagnose(v.set, v.overrides);
  ASSERT_FALSE(r.findings.empty()) << "no finding";
  EXPECT_EQ(r.findings.front().id, v.expect) << ids(r);
}

// Faults in the data (with the healthy sets' defaults: a 64-32 ReLU MLP, Adam at 1e-3).
TEST(DoctorVariations, DataFaultsOnScikitLearnAndSyntheticSets) {
  const std::vector<Variation> cases = {
      {"wine_shuffled", {}, "labels-shuffled"},
      {"breast_cancer_offset", {}, "label-offset"},
      {"digits_label_noise", {"model.mlp.hidden=[128]"}, "label-noise"},
      {"digits_sorted", {"data.loader.shuffle=false"}, "ordered-data-without-shuffle"},
      {"digits_near_duplicates", {}, "near-duplicate-leakage"},
      {"five_classes_nan", {}, "nonfinite-input"},
      {"five_classes_constant", {}, "constant-labels"},
      {"five_classes_tiled", {}, "repeated-batches"},
      {"many_features_leak", {}, "train-test-leakage"},
      {"wine_raw", {"data.normalize=false", "optim.name=\"sgd\"", "optim.lr=0.01"}, "unnormalized-input"},
      {"small_binary_outlier", {"data.normalize=false"}, "input-outliers"},
      {"five_classes_out_of_range", {"data.num_classes=5"}, "label-out-of-range"},
      {"imbalanced_97_3_hard", {"model.mlp.hidden=[8]"}, "class-imbalance"},
  };
  for (const auto& v : cases) expect_first(v);
}

// Faults in the model, the optimiser and the trainer, on healthy data.
TEST(DoctorVariations, SetupFaultsOnScikitLearnAndSyntheticSets) {
  const std::vector<Variation> cases = {
      {"digits", {"optim.lr=1.0", "model.mlp.activation=\"tanh\""}, "lr-too-high"},
      {"breast_cancer", {"optim.lr=1e-7"}, "lr-too-low"},
      {"wine", {"optim.lr=0"}, "parameters-not-updating"},
      {"digits", {"optim.name=\"adamw\"", "optim.weight_decay=500"}, "weight-decay-too-large"},
      {"five_classes",
       {"model.mlp.hidden=[64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64,64]",
        "model.mlp.activation=\"tanh\"", "optim.name=\"sgd\"", "optim.lr=0.02", "optim.momentum=0.9"},
       "vanishing-gradients"},
      {"digits", {"model.mlp.hidden=[1]", "model.mlp.activation=\"tanh\"", "optim.lr=0.05"}, "underfitting"},
      {"five_classes", {"trainer.limit_train_batches=0.05"}, "partial-epochs-left-on"},
      {"digits", {"model.mlp.output=\"softmax\""}, "probabilities-as-logits"},
      {"moons", {"trainer.freeze=[\"body.fc*\"]"}, "no-gradient"},
      // Raw 0..16 pixels under plain SGD at 0.5: the gradients blow up, and the units they kill are
      // listed under the explosion.
      {"digits",
       {"data.normalize=false", "optim.name=\"sgd\"", "optim.lr=0.5", "model.mlp.hidden=[256,128]"},
       "exploding-gradients"},
      // Eight ReLU layers under SGD with momentum 0.9 at 0.2: the units die without an explosion,
      // and the tiny updates that follow (lr-too-low's reading) are listed under them.
      {"five_classes",
       {"model.mlp.hidden=[256,256,256,256,256,256,256,256]", "optim.name=\"sgd\"", "optim.lr=0.2",
        "optim.momentum=0.9"},
       "dead-relu"},
      {"breast_cancer", {"model.mlp.hidden=[512,512]", "optim.lr=0.01", "data.val_size=0.5"}, "overfitting"},
      {"five_classes",
       {"model.mlp.norm=\"batchnorm\"", "model.mlp.bn_momentum=1.0", "data.loader.batch_size=2"},
       "batchnorm-stats-drift"},
  };
  for (const auto& v : cases) expect_first(v);
}

// At least ten healthy setups: tabular and image-like, 150 to 4000 samples, balanced and not.
TEST(DoctorVariations, HealthySetsRaiseNoError) {
  const std::vector<std::pair<const char*, std::vector<std::string>>> healthy = {
      {"iris", {}},
      {"wine", {}},
      {"breast_cancer", {}},
      {"digits", {}},
      {"digits_images", {"model.name=\"cnn\""}},
      {"small_binary", {}},
      {"five_classes", {}},
      {"imbalanced_90_10", {}},
      {"imbalanced_70_20_10", {}},
      {"many_features", {}},
      {"moons", {"model.mlp.hidden=[32,32]"}},
      {"digits", {"optim.name=\"sgd\"", "optim.lr=0.05", "optim.momentum=0.9"}},
  };
  for (const auto& [set, overrides] : healthy) {
    SCOPED_TRACE(set);
    const DoctorReport r = diagnose(set, overrides);
    EXPECT_FALSE(r.has_errors()) << ids(r) << "\n" << r.to_text();
  }
}

}  // namespace
}  // namespace glassbox::inspect
