// Image folders through the workflows: written from another data set, trained on with
// augmentation, evaluated, and predicted from image files after the training data is gone.
#include <csignal>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/app/data.h"
#include "glassbox/app/evaluate.h"
#include "glassbox/app/predict.h"
#include "glassbox/app/run.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/interrupt.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/data/npy.h"
#include "glassbox/data/source.h"
#include "glassbox/testing/testing.h"
#include "glassbox/train/callback.h"
#include "glassbox/train/trainer.h"

namespace glassbox::app {
namespace {

namespace fs = std::filesystem;

// 240 gray 12x12 uint8 images of three classes: a bright square top-left, bottom-right, or none.
void write_npy_images(const fs::path& dir) {
  torch::manual_seed(5);
  at::Tensor x = (torch::rand({240, 1, 12, 12}) * 60).to(torch::kUInt8);
  const at::Tensor y = torch::arange(240, torch::kLong) % 3;
  for (std::int64_t i = 0; i < 240; ++i) {
    const std::int64_t k = y[i].item<std::int64_t>();
    if (k == 0) x[i].slice(1, 1, 6).slice(2, 1, 6).fill_(230);
    if (k == 1) x[i].slice(1, 6, 11).slice(2, 6, 11).fill_(230);
  }
  data::write_npy(dir / "x.npy", x);
  data::write_npy(dir / "y.npy", y);
}

// The first `limit` images of each split of write_npy_images' set as dir/png (train/ and a test/
// holding the same images).
void write_png_folder(const fs::path& dir, std::int64_t limit) {
  write_npy_images(dir);
  write_file_atomic(dir / "npy.toml", "[data]\nformat = \"npy\"\nroot = \"" + dir.string() +
                                          "\"\ntrain_x = \"x.npy\"\ntrain_y = \"y.npy\"\ntest_x = \"x.npy\"\n"
                                          "test_y = \"y.npy\"\n");
  WriteImagesRequest w;
  w.config = dir / "npy.toml";
  w.out = dir / "png";
  w.limit = limit;
  write_images(w);
}

TEST(ImageWorkflow, WrittenFolderTrainsEvaluatesAndPredictsWithoutItsData) {
  const fs::path dir = testing::temp_dir("app_images");
  write_npy_images(dir);
  write_file_atomic(dir / "npy.toml",
                    "[data]\nformat = \"npy\"\nroot = \"" + dir.string() +
                        "\"\ntrain_x = \"x.npy\"\ntrain_y = \"y.npy\"\ntest_x = \"x.npy\"\ntest_y = \"y.npy\"\n"
                        "class_names = [\"top\", \"bottom\", \"none\"]\n");
  WriteImagesRequest w;
  w.config = dir / "npy.toml";
  w.out = dir / "png";
  const WriteImagesOutcome wo = write_images(w);
  EXPECT_EQ(wo.images.at("train"), 240);
  EXPECT_EQ(wo.images.at("test"), 240);
  EXPECT_TRUE(fs::exists(dir / "png" / "train" / "top" / "00000.png"));
  EXPECT_TRUE(fs::exists(dir / "png" / "test" / "bottom" / "00001.png"));
  EXPECT_THROW(write_images(w), Error);  // the folder exists now: refused, nothing touched

  // Train a small CNN on the folder, with a flip in training and the folder's own split folders.
  const std::vector<std::string> common = {"data.format=\"imagefolder\"",
                                           "data.root=\"" + (dir / "png").string() + "\"",
                                           "data.val_size=30",
                                           "model.name=\"cnn\"",
                                           "model.cnn.channels=[8]",
                                           "model.cnn.hidden=16",
                                           "trainer.max_epochs=4",
                                           "data.loader.batch_size=16",
                                           "optim.lr=0.01"};
  TrainRequest t;
  t.overrides = common;
  t.overrides.push_back("data.train_transforms=[{name = \"HorizontalFlip\", p = 0.5}]");
  t.overrides.push_back("data.mixup.mixup_alpha=0.2");  // augmentation and MixUp: the run still learns
  // A file that does not decode, left out and counted (on_bad_image = "skip").
  write_file_atomic(dir / "png" / "train" / "top" / "broken.png", "\x89PNG\r\n\x1a\nbroken");
  t.overrides.push_back("data.on_bad_image=\"skip\"");
  t.run_dir = dir / "run";
  t.quiet = true;
  t.diagnostics = false;
  t.handle_interrupts = false;
  const nlohmann::json summary = run_training(t, std::cout);
  EXPECT_EQ(summary["class_names"], nlohmann::json::array({"bottom", "none", "top"}));  // sorted folder names
  ASSERT_TRUE(summary.contains("skipped_files")) << summary.dump(2);
  EXPECT_EQ(summary["skipped_files"]["count"], 1);
  EXPECT_NE(summary["skipped_files"]["first"][0].get<std::string>().find("broken.png: "), std::string::npos);
  fs::remove(dir / "png" / "train" / "top" / "broken.png");  // the steps below read the folder with "error"
  const fs::path ck = dir / "run" / "checkpoints" / "last.ckpt";
  // The run keeps a picture of its augmentation, and the report shows it.
  ASSERT_TRUE(fs::exists(dir / "run" / "augmentation.png"));
  EXPECT_EQ(read_file(dir / "run" / "augmentation.png").substr(1, 3), "PNG");
  // The stored config keeps the pipeline, every parameter written out.
  const std::string stored = read_file(dir / "run" / "config.toml");
  EXPECT_NE(stored.find("HorizontalFlip"), std::string::npos) << stored;

  EvalOptions e;
  e.checkpoint = ck;
  e.write = false;
  const nlohmann::json m = evaluate_checkpoint(e);
  EXPECT_GT(m["accuracy"].get<double>(), 0.6);  // chance is 1/3

  // The augmentation preview: rows of the eval view and flipped draws.
  PreviewRequest pv;
  pv.config = dir / "folder.toml";
  write_file_atomic(pv.config, "[data]\nformat = \"imagefolder\"\nroot = \"" + (dir / "png").string() +
                                   "\"\n[[data.train_transforms]]\nname = \"HorizontalFlip\"\n");
  pv.out = dir / "grid.png";
  pv.samples = 3;
  pv.variants = 4;
  const PreviewOutcome po0 = preview_augmentation(pv);
  EXPECT_EQ(po0.rows, 3);
  EXPECT_EQ(po0.columns, 5);
  EXPECT_EQ(po0.width, 5 * (12 + 4) + 4);
  EXPECT_TRUE(fs::exists(dir / "grid.png"));

  // Predict from the image files after the training folder is moved away.
  fs::rename(dir / "png", dir / "moved");
  PredictRequest p;
  p.model.checkpoint = ck;
  p.input = dir / "moved" / "test";
  p.out = dir / "pred.csv";
  const PredictOutcome po = run_predict(p);
  EXPECT_EQ(po.samples, 240);
  const std::string csv = read_file(dir / "pred.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "index,file,predicted,predicted_name,p_bottom,p_none,p_top");
  // Files in torchvision order: bottom/ first; most predicted as their folder's class.
  EXPECT_NE(csv.find("/moved/test/bottom/00001.png\",0,bottom,"), std::string::npos) << csv.substr(0, 400);
  EXPECT_GT(po.counts[0], 50);
  EXPECT_GT(po.counts[2], 50);
}

TEST(ImageWorkflow, InspectionFindsLeaksCorruptFilesAndStatistics) {
  const fs::path dir = testing::temp_dir("app_inspect");
  write_png_folder(dir, 30);
  // The test split holds the same images as training (the npy config reads x.npy for both), plus
  // a cut file.
  write_file_atomic(dir / "png" / "test" / "0" / "bad.png", "\x89PNG\r\n\x1a\nxx");
  write_file_atomic(dir / "folder.toml",
                    "[data]\nformat = \"imagefolder\"\nroot = \"" + (dir / "png").string() + "\"\nval_size = 0\n");
  const nlohmann::json j = inspect_data({dir / "folder.toml", {}});
  EXPECT_EQ(j["splits"]["train"]["images"], 30);
  EXPECT_EQ(j["splits"]["test"]["images"], 31);
  EXPECT_EQ(j["splits"]["train"]["per_class"], nlohmann::json::array({10, 10, 10}));
  ASSERT_EQ(j["corrupt"].size(), 1u);
  EXPECT_NE(j["corrupt"][0]["error"].get<std::string>().find("bad.png: truncated PNG"), std::string::npos);
  EXPECT_EQ(j["identical_across_splits"].size(), 30u);  // each training image is also a test image
  EXPECT_EQ(j["sizes_hxw"]["most_common"][0]["size"], "12x12");
  // The mean of the training pixels / 255, as numpy computes it from the array.
  const at::Tensor x = data::read_npy(dir / "x.npy").slice(0, 0, 30).to(torch::kDouble) / 255.0;
  EXPECT_NEAR(j["train_mean"][0].get<double>(), x.mean().item<double>(), 1e-9);
  EXPECT_NEAR(j["train_std"][0].get<double>(), x.std(/*unbiased=*/false).item<double>(), 1e-9);
  const std::string text = format_inspection(j);
  EXPECT_NE(text.find("identical files in two splits: 30 group(s)"), std::string::npos) << text;
}

TEST(ImageWorkflow, SyntheticDefectsAreSeededImbalancedAndDated) {
  const fs::path dir = testing::temp_dir("app_synth");
  SynthRequest r;
  r.out = dir / "parts";
  r.images = 120;
  r.size = 32;
  r.seed = 3;
  const SynthOutcome o = synth_defects(r);
  // 32 / 28 / 22 / 18 % of 120 by largest remainders.
  EXPECT_EQ(o.per_class,
            (std::map<std::string, std::int64_t>{{"ok", 38}, {"crack", 34}, {"rust", 26}, {"thread_damage", 22}}));
  EXPECT_EQ(o.first_date, "2025-01-06");
  EXPECT_EQ(o.last_date, "2025-09-01");
  const std::string csv = read_file(dir / "parts" / "metadata.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 121);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "file_name,label,captured");
  // The folder reads as an image data set split by capture date.
  data::DataOptions d;
  d.format = data::DataFormat::kImageFolder;
  d.root = (dir / "parts").string();
  d.split_by = data::SplitBy::kDate;
  d.date_column = "captured";
  d.val_from = "2025-07-01";
  d.test_from = "2025-08-01";
  d.normalize = false;
  const data::Splits s = data::load_splits(d);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"crack", "ok", "rust", "thread_damage"}));
  EXPECT_EQ(s.train->size() + s.val->size() + s.test->size(), 120);
  EXPECT_GT(s.test->size(), 10);
  EXPECT_EQ(s.sample_shape, (std::vector<std::int64_t>{3, 32, 32}));
  // Seeded: the same request writes the same bytes, another seed other images.
  r.out = dir / "again";
  synth_defects(r);
  EXPECT_EQ(read_file(dir / "again" / "rust" / "rust-000004.png"),
            read_file(dir / "parts" / "rust" / "rust-000004.png"));
  r.out = dir / "other";
  r.seed = 4;
  synth_defects(r);
  EXPECT_NE(read_file(dir / "other" / "rust" / "rust-000004.png"),
            read_file(dir / "parts" / "rust" / "rust-000004.png"));
  r.out = dir / "parts";
  EXPECT_THROW(synth_defects(r), Error);  // exists: refused, nothing touched
}

class InterruptAtStep final : public train::Callback {
 public:
  explicit InterruptAtStep(std::int64_t step) : step_(step) {}
  std::string name() const override { return "InterruptAtStep"; }
  void on_train_batch_end(train::Trainer& t, const train::StepOutput&, const data::Batch&) override {
    if (t.global_step() == step_) request_interrupt(SIGINT);
  }

 private:
  std::int64_t step_;
};

at::Tensor weight_of(const fs::path& ckpt, const std::string& name) {
  const SafetensorsFile f = load_safetensors(ckpt / "model.safetensors");
  const at::Tensor* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  return t == nullptr ? torch::zeros({1}) : t->clone();
}

// Augmentation draws come from (seed, epoch, sample index): a run interrupted mid-epoch and
// resumed (with loader workers) ends with the weights of the run that was never interrupted.
TEST(ImageWorkflow, AugmentedRunInterruptedMidEpochResumesBitIdentically) {
  const fs::path dir = testing::temp_dir("app_images_resume");
  write_png_folder(dir, 96);
  const std::vector<std::string> config = {
      "data.format=\"imagefolder\"",
      "data.root=\"" + (dir / "png").string() + "\"",
      "data.val_size=0",
      "data.loader.num_workers=2",
      "data.train_transforms=[{name = \"RandomCrop\", height = 10, width = 10}, {name = \"HorizontalFlip\"}, "
      "{name = \"RandomBrightnessContrast\", p = 0.8}]",
      "data.eval_transforms=[{name = \"CenterCrop\", height = 10, width = 10}]",
      "data.mixup.mixup_alpha=0.4",
      "data.mixup.cutmix_alpha=1.0",
      "model.name=\"cnn\"",
      "model.cnn.channels=[4]",
      "model.cnn.hidden=8",
      "model.cnn.dropout=0.2",
      "trainer.max_epochs=3",
      "data.loader.batch_size=16"};
  const auto request = [&](const fs::path& run) {
    TrainRequest t;
    t.overrides = config;
    t.run_dir = run;
    t.quiet = true;
    t.diagnostics = false;
    t.handle_interrupts = false;
    return t;
  };
  run_training(request(dir / "whole"), std::cout);
  TrainRequest cut = request(dir / "cut");
  cut.configure = [](train::Trainer& t, train::TaskModule&, const fs::path&, std::ostream&) {
    t.add_callback(std::make_unique<InterruptAtStep>(9));  // epoch 1, batch 3 (6 batches per epoch)
  };
  EXPECT_EQ(run_training(cut, std::cout)["stop"], "interrupted");
  clear_interrupt();
  TrainRequest again;
  again.resume = dir / "cut" / "checkpoints" / "last.ckpt";
  again.quiet = true;
  again.diagnostics = false;
  again.handle_interrupts = false;
  EXPECT_EQ(run_training(again, std::cout)["global_step"], 18);
  for (const char* name : {"classifier.out.weight", "classifier.fc.weight"}) {
    const at::Tensor a = weight_of(dir / "whole" / "checkpoints" / "last.ckpt", name);
    const at::Tensor b = weight_of(dir / "cut" / "checkpoints" / "last.ckpt", name);
    EXPECT_TRUE(torch::equal(a, b)) << name << ": max difference " << (a - b).abs().max().item<double>();
  }
}

}  // namespace
}  // namespace glassbox::app
