// Real-valued targets (data.task = regression / multilabel) from every source that carries them:
// .npy arrays, CSV target columns and an image folder's metadata.csv, and the errors that name
// a bad target.
#include <fstream>

#include <gtest/gtest.h>
#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/image.h"
#include "glassbox/data/npy.h"
#include "glassbox/data/source.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

namespace fs = std::filesystem;
using glassbox::testing::temp_dir;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.one_line();
  }
  return "<no error>";
}

DataOptions npy_options(const fs::path& d, TaskKind task) {
  DataOptions o;
  o.format = DataFormat::kNpy;
  o.root = d.string();
  o.task = task;
  o.val_size = 5;
  return o;
}

TEST(Targets, NpyRegressionKeepsValuesAndShapes) {
  const fs::path d = temp_dir("targets-npy");
  const at::Tensor y = torch::randn({20, 2}, torch::kDouble) * 100;
  write_npy(d / "train_x.npy", torch::randn({20, 3}));
  write_npy(d / "train_y.npy", y);
  write_npy(d / "test_x.npy", torch::randn({4, 3}));
  write_npy(d / "test_y.npy", torch::randn({4, 2}));
  DataOptions o = npy_options(d, TaskKind::kRegression);
  const Splits s = load_splits(o);
  EXPECT_EQ(s.task, TaskKind::kRegression);
  EXPECT_EQ(s.num_classes, 2);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(s.train->size() + s.val->size(), 20);
  // Targets are float32 [N, T], the values of the file (not normalised, not rounded), in split order.
  const Batch all = s.train->get_batch(torch::arange(s.train->size()));
  EXPECT_EQ(all.targets.scalar_type(), torch::kFloat);
  EXPECT_EQ(all.targets.sizes(), (std::vector<std::int64_t>{15, 2}));
  const at::Tensor train_and_val = torch::cat({all.targets, s.val->get_batch(torch::arange(5)).targets});
  EXPECT_TRUE(
      torch::allclose(std::get<0>(train_and_val.sum(1).sort()), std::get<0>(y.to(torch::kFloat).sum(1).sort())));
  // A [N] array is one target; target_columns name it.
  write_npy(d / "train_y.npy", torch::arange(20, torch::kInt));
  write_npy(d / "test_y.npy", torch::arange(4, torch::kInt));
  o.target_columns = {"price"};
  const Splits one = load_splits(o);
  EXPECT_EQ(one.num_classes, 1);
  EXPECT_EQ(one.class_names, (std::vector<std::string>{"price"}));
  o.target_columns = {"a", "b"};
  EXPECT_NE(message_of([&] { load_splits(o); }).find("names 2 targets but"), std::string::npos);
  // Missing values are named, not trained on.
  write_npy(d / "train_y.npy", torch::tensor({1.0, static_cast<double>(NAN)}).repeat({10}));
  o.target_columns.clear();
  EXPECT_NE(message_of([&] { load_splits(o); }).find("target 0 of sample 1 is nan"), std::string::npos);
}

TEST(Targets, NpyMultiLabelMustBeZeroOrOne) {
  const fs::path d = temp_dir("targets-multi");
  write_npy(d / "train_x.npy", torch::randn({20, 3}));
  write_npy(d / "train_y.npy", (torch::rand({20, 4}) < 0.5).to(torch::kUInt8));
  write_npy(d / "test_x.npy", torch::randn({4, 3}));
  write_npy(d / "test_y.npy", torch::ones({4, 4}, torch::kBool));
  DataOptions o = npy_options(d, TaskKind::kMultilabel);
  const Splits s = load_splits(o);
  EXPECT_EQ(s.num_classes, 4);
  EXPECT_EQ(s.test->get_batch(torch::arange(4)).targets.sum().item<float>(), 16.0F);
  write_npy(d / "test_y.npy", torch::full({4, 4}, 2.0));
  EXPECT_NE(message_of([&] { load_splits(o); }).find("label 0 of sample 0 is 2, not 0 or 1"), std::string::npos);
  write_npy(d / "test_y.npy", torch::zeros({4, 3}));
  EXPECT_NE(message_of([&] { load_splits(o); }).find("3 targets per sample but"), std::string::npos);
}

TEST(Targets, CsvTargetColumnsAreLeftOutOfTheFeatures) {
  const fs::path d = temp_dir("targets-csv");
  {
    std::ofstream tr(d / "train.csv");
    tr << "x1,width,x2,height\n";
    for (int i = 0; i < 20; ++i) tr << i << "," << i * 0.5 << "," << -i << "," << i * i << "\n";
    std::ofstream te(d / "test.csv");
    te << "x1,width,x2,height\n3,4,1,2\n";
  }
  DataOptions o;
  o.format = DataFormat::kCsv;
  o.root = d.string();
  o.task = TaskKind::kRegression;
  o.target_columns = {"height", "width"};
  o.val_size = 0;
  o.normalize = false;
  Splits s = load_splits(o);
  EXPECT_EQ(s.feature_names, (std::vector<std::string>{"x1", "x2"}));
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"height", "width"}));
  const Batch b = s.train->get_batch(torch::tensor({3}, torch::kLong));
  EXPECT_TRUE(torch::equal(b.inputs, torch::tensor({{3.0F, -3.0F}})));
  EXPECT_TRUE(torch::equal(b.targets, torch::tensor({{9.0F, 1.5F}})));
  // Regression on one column may name it with label_column.
  o.target_columns.clear();
  o.label_column = "height";
  s = load_splits(o);
  EXPECT_EQ(s.feature_names, (std::vector<std::string>{"x1", "width", "x2"}));
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"height"}));
  EXPECT_TRUE(torch::equal(s.test->get_batch(torch::tensor({0}, torch::kLong)).targets, torch::tensor({{2.0F}})));
  o.target_columns = {"heigth"};
  EXPECT_NE(message_of([&] { load_splits(o); }).find("did you mean 'height'"), std::string::npos);
  // Multi-label tables must name their label columns.
  o.task = TaskKind::kMultilabel;
  o.target_columns.clear();
  EXPECT_NE(message_of([&] { load_splits(o); }).find("needs data.target_columns"), std::string::npos);
}

TEST(Targets, OptionsThatDoNotFitTheTaskAreRefused) {
  DataOptions o;  // Fashion-MNIST's IDX files: class labels only
  o.task = TaskKind::kRegression;
  EXPECT_NE(message_of([&] { o.validate(); }).find("carries class labels only"), std::string::npos);
  o.format = DataFormat::kImageFolder;
  EXPECT_NE(message_of([&] { o.validate(); }).find("needs data.target_columns"), std::string::npos);
  DataOptions c;
  c.target_columns = {"a"};
  EXPECT_NE(message_of([&] { c.validate(); }).find("data.task = \"regression\" or \"multilabel\""), std::string::npos);
  DataOptions n = npy_options("/nonexistent", TaskKind::kMultilabel);
  n.class_names = {"a"};
  EXPECT_NE(message_of([&] { n.validate(); }).find("data.class_names applies to classification"), std::string::npos);
}

TEST(Targets, ImageFolderReadsMetadataColumns) {
  const fs::path root = temp_dir("targets-images");
  std::string csv = "file_name,split,rust,crack\n";
  for (int i = 0; i < 12; ++i) {
    const std::string name = "img/" + std::to_string(i) + ".png";
    fs::create_directories(root / "img");
    write_file_atomic(root / name, encode_png(cv::Mat(6, 5, CV_8UC1, cv::Scalar::all(10 * i))));
    csv +=
        name + "," + (i < 9 ? "train" : "test") + "," + std::to_string(i % 2) + "," + std::to_string(i % 3 == 0) + "\n";
  }
  write_file_atomic(root / "metadata.csv", csv);
  DataOptions o;
  o.format = DataFormat::kImageFolder;
  o.root = root.string();
  o.task = TaskKind::kMultilabel;
  o.target_columns = {"crack", "rust"};
  o.val_size = 0;
  o.normalize = false;
  const Splits s = load_splits(o);
  EXPECT_EQ(s.num_classes, 2);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"crack", "rust"}));
  ASSERT_EQ(s.train->size(), 9);
  ASSERT_EQ(s.test->size(), 3);
  // Each image keeps its own row's targets (pixel value 10 i identifies image i).
  const Batch b = s.test->get_batch(torch::arange(3));
  for (std::int64_t k = 0; k < 3; ++k) {
    const int i = static_cast<int>(std::lround(b.inputs[k].mean().item<double>() * 255.0 / 10.0));
    EXPECT_EQ(b.targets[k][0].item<float>(), i % 3 == 0 ? 1.0F : 0.0F) << i;
    EXPECT_EQ(b.targets[k][1].item<float>(), static_cast<float>(i % 2)) << i;
  }
  write_file_atomic(root / "metadata.csv", csv + "img/0.png,train,0.5,1\n");
  EXPECT_NE(message_of([&] { load_splits(o); }).find("label value 0.5 is not 0 or 1"), std::string::npos);
  o.task = TaskKind::kRegression;
  write_file_atomic(root / "metadata.csv", csv + "img/0.png,train,abc,1\n");
  EXPECT_NE(message_of([&] { load_splits(o); }).find("column 'rust': 'abc' is not a finite number"), std::string::npos);
}

}  // namespace
}  // namespace glassbox::data
