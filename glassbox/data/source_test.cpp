// Tests of the datasets and of load_splits (synthetic folders and the real Fashion-MNIST).
// Over 600 lines: one table of cases per source format and per data option, kept together.
#include "glassbox/data/source.h"

#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/idx.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

namespace fs = std::filesystem;
using glassbox::testing::temp_dir;

at::Tensor i64(std::initializer_list<std::int64_t> v) { return torch::tensor(std::vector<std::int64_t>(v)); }

template <class Fn>
Error expect_error(Fn fn, ErrorCode code, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), std::string(error_code_name(code))) << e.what();
    const std::string what = e.what();
    for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "missing '" << p << "' in: " << what;
    return e;
  }
  ADD_FAILURE() << "no glassbox::Error thrown";
  return Error(ErrorCode::kInternal, "none");
}

const TensorDataset& as_tensor(const std::shared_ptr<const Dataset>& d) {
  const auto* t = dynamic_cast<const TensorDataset*>(d.get());
  if (t == nullptr) throw std::runtime_error("not a TensorDataset");
  return *t;
}

// ------------------------------------------------------------------------------------ datasets

TEST(TensorDataset, GathersByIndexAndInfersClasses) {
  const at::Tensor x = torch::arange(24, torch::kFloat).reshape({6, 2, 2});
  const at::Tensor y = i64({0, 4, 1, 1, 2, 0});
  TensorDataset ds(x, y);
  EXPECT_EQ(ds.size(), 6);
  EXPECT_EQ(ds.num_classes(), 5);
  EXPECT_EQ(ds.sample_shape(), (std::vector<std::int64_t>{2, 2}));
  const Batch b = ds.get_batch(i64({5, 1, 1}));
  EXPECT_EQ(b.size(), 3);
  EXPECT_TRUE(torch::equal(b.inputs[0], x[5]));
  EXPECT_TRUE(torch::equal(b.inputs[1], x[1]));
  EXPECT_TRUE(torch::equal(b.targets, i64({0, 4, 4})));
  EXPECT_TRUE(torch::equal(b.indices, i64({5, 1, 1})));
  EXPECT_EQ(TensorDataset(x, y, 10).num_classes(), 10);
  expect_error([&] { TensorDataset(x, y.slice(0, 0, 5)); }, ErrorCode::kInvalidArgument,
               {"inputs have 6 samples but targets have 5"});
  expect_error(
      [&] {
        ds.get_batch(i64({0, 6}));
      },
      ErrorCode::kInvalidArgument, {"index 6 (position 1 of the batch) is out of range [0, 6)"});
  EXPECT_EQ(ds.get_batch(torch::empty({0}, torch::kLong)).inputs.sizes(), (std::vector<std::int64_t>{0, 2, 2}));
}

TEST(SubsetDataset, MapsPositionsThroughItsIndices) {
  auto base = std::make_shared<TensorDataset>(torch::arange(10, torch::kFloat).unsqueeze(1), torch::arange(10) % 3);
  SubsetDataset sub(base, i64({7, 2, 9}));
  EXPECT_EQ(sub.size(), 3);
  EXPECT_EQ(sub.num_classes(), 3);
  const Batch b = sub.get_batch(i64({2, 0}));
  EXPECT_TRUE(torch::equal(b.inputs.squeeze(1), torch::tensor({9.0f, 7.0f})));
  EXPECT_TRUE(torch::equal(b.indices, i64({2, 0})));  // positions in the subset
  EXPECT_TRUE(torch::equal(sub.all_targets(), i64({1, 2, 0})));
  EXPECT_THROW(sub.get_batch(i64({3})), Error);
  EXPECT_THROW(SubsetDataset(base, i64({10})), Error);
}

TEST(RandomSplit, DeterministicDisjointSortedAndComplete) {
  auto [a, b] = random_split_indices(1000, 100, 42);
  EXPECT_EQ(a.numel(), 900);
  EXPECT_EQ(b.numel(), 100);
  EXPECT_TRUE(torch::equal(std::get<0>(a.sort()), a));
  EXPECT_TRUE(torch::equal(std::get<0>(b.sort()), b));
  EXPECT_TRUE(torch::equal(std::get<0>(torch::cat({a, b}).sort()), torch::arange(1000, torch::kLong)));
  auto [a2, b2] = random_split_indices(1000, 100, 42);
  EXPECT_TRUE(torch::equal(b, b2));
  auto [a3, b3] = random_split_indices(1000, 100, 43);
  EXPECT_FALSE(torch::equal(b, b3));
  EXPECT_FALSE(torch::equal(b, torch::arange(900, 1000, torch::kLong)));  // not just the tail
  EXPECT_EQ(random_split_indices(10, 0, 1).second.numel(), 0);
  EXPECT_THROW(random_split_indices(10, 11, 1), Error);
}

// ------------------------------------------------------------------------- synthetic sources

// An IDX folder: train 10 images 4x4, test 6; labels 0..2 (or 0..9 with ten_classes).
fs::path make_mnist_dir(const std::string& name, bool ten_classes = false) {
  const fs::path d = temp_dir(name);
  torch::manual_seed(1);
  write_idx(d / "train-images-idx3-ubyte", torch::randint(0, 256, {10, 4, 4}).to(torch::kByte));
  at::Tensor y = ten_classes ? torch::arange(10) : torch::arange(10) % 3;
  write_idx(d / "train-labels-idx1-ubyte", y.to(torch::kByte));
  write_idx(d / "t10k-images-idx3-ubyte.gz", torch::randint(0, 256, {6, 4, 4}).to(torch::kByte), true);
  write_idx(d / "t10k-labels-idx1-ubyte.gz", (torch::arange(6) % 3).to(torch::kByte), true);
  return d;
}

TEST(LoadSplits, MnistFolderWithGzipFallback) {
  DataOptions o;
  o.root = make_mnist_dir("mnist-small").string();
  o.val_size = 2;
  Splits s = load_splits(o);
  EXPECT_EQ(s.train->size(), 8);
  EXPECT_EQ(s.val->size(), 2);
  EXPECT_EQ(s.test->size(), 6);
  EXPECT_EQ(s.sample_shape, (std::vector<std::int64_t>{1, 4, 4}));
  EXPECT_EQ(s.num_classes, 3);
  EXPECT_EQ(s.train->num_classes(), 3);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"0", "1", "2"}));
  ASSERT_EQ(s.mean.size(), 1u);
  // Inputs = (pixel / 255 - mean) / std with the training split's statistics.
  const at::Tensor raw = read_idx(fs::path(o.root) / "train-images-idx3-ubyte").to(torch::kFloat) / 255;
  auto [tr, va] = random_split_indices(10, 2, 42);
  const at::Tensor m = raw.index_select(0, tr).mean();
  const at::Tensor sd = raw.index_select(0, tr).std(/*unbiased=*/false);
  EXPECT_NEAR(s.mean[0], m.item<double>(), 1e-6);
  EXPECT_NEAR(s.std[0], sd.item<double>(), 1e-6);
  const at::Tensor expected_val = ((raw.index_select(0, va) - m) / sd).unsqueeze(1);
  EXPECT_TRUE(torch::allclose(as_tensor(s.val).inputs(), expected_val, 1e-5, 1e-5));
  const at::Tensor labels = read_idx(fs::path(o.root) / "train-labels-idx1-ubyte").to(torch::kLong);
  EXPECT_TRUE(torch::equal(as_tensor(s.val).targets(), labels.index_select(0, va)));
  EXPECT_TRUE(torch::equal(as_tensor(s.train).targets(), labels.index_select(0, tr)));

  o.val_size = 0;
  o.normalize = false;
  s = load_splits(o);
  EXPECT_EQ(s.val, nullptr);
  EXPECT_TRUE(s.mean.empty());
  EXPECT_TRUE(torch::allclose(as_tensor(s.train).inputs(), raw.unsqueeze(1)));
  o.val_size = 10;
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
               {"data.val_size (10) must be smaller than the training set (10 samples)"});
}

TEST(LoadSplits, MnistErrors) {
  const fs::path d = make_mnist_dir("mnist-bad");
  DataOptions o;
  o.root = d.string();
  o.val_size = 0;
  write_idx(d / "train-labels-idx1-ubyte", torch::zeros({9}, torch::kByte));
  expect_error([&] { load_splits(o); }, ErrorCode::kDataLoss,
               {(d / "train-images-idx3-ubyte").string() + " has 10 images but " +
                (d / "train-labels-idx1-ubyte").string() + " has 9 labels"});
  const fs::path empty = temp_dir("mnist-none");
  o.root = empty.string();
  Error e =
      expect_error([&] { load_splits(o); }, ErrorCode::kNotFound,
                   {(empty / "train-images-idx3-ubyte").string(), (empty / "train-images-idx3-ubyte.gz").string()});
  EXPECT_NE(e.hint().find("apt-get install dataset-fashion-mnist"), std::string::npos);
  EXPECT_NE(e.hint().find("data.root"), std::string::npos);
  // Ten classes under a root named "fashion": the Fashion-MNIST class names.
  o.root = make_mnist_dir("fashion-small", /*ten_classes=*/true).string();
  const Splits s = load_splits(o);
  ASSERT_EQ(s.class_names.size(), 10u);
  EXPECT_EQ(s.class_names[0], "T-shirt/top");
  EXPECT_EQ(s.class_names[9], "Ankle boot");
  o.class_names = {"a", "b"};
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument, {"data.class_names has 2 names"});
}

fs::path make_npy_dir(const std::string& name) {
  const fs::path d = temp_dir(name);
  torch::manual_seed(5);
  // Features with different scales: [40, 3] float64 (converted to float32).
  const at::Tensor x = torch::randn({40, 3}, torch::kDouble) * torch::tensor({1.0, 10.0, 0.1}, torch::kDouble) +
                       torch::tensor({5.0, -3.0, 0.0}, torch::kDouble);
  write_npy(d / "train_x.npy", x);
  write_npy(d / "train_y.npy", (torch::arange(40) % 4).to(torch::kInt));
  write_npy(d / "test_x.npy", torch::randn({12, 3}));
  write_npy(d / "test_y.npy", torch::arange(12) % 5);
  return d;
}

TEST(LoadSplits, NpyPerFeatureNormalisationAndOptions) {
  DataOptions o;
  o.format = DataFormat::kNpy;
  o.root = make_npy_dir("npy-src").string();
  o.val_size = 8;
  Splits s = load_splits(o);
  EXPECT_EQ(s.train->size(), 32);
  EXPECT_EQ(s.val->size(), 8);
  EXPECT_EQ(s.test->size(), 12);
  EXPECT_EQ(s.num_classes, 5);  // the test labels reach 4
  EXPECT_EQ(s.sample_shape, (std::vector<std::int64_t>{3}));
  ASSERT_EQ(s.mean.size(), 3u);
  const at::Tensor xt = as_tensor(s.train).inputs();
  EXPECT_EQ(xt.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(xt.mean(0), torch::zeros({3}), 0, 1e-5)) << xt.mean(0);
  EXPECT_TRUE(torch::allclose(xt.std(0, /*unbiased=*/false), torch::ones({3}), 0, 1e-5));
  EXPECT_GT(s.std[1], 5.0);  // the second feature's scale is ~10
  EXPECT_LT(s.std[2], 0.2);

  // Given statistics are applied as given.
  o.mean = {1.0, 2.0, 3.0};
  o.std = {2.0, 4.0, 0.5};
  s = load_splits(o);
  const at::Tensor raw_test = read_npy(fs::path(o.root) / "test_x.npy");
  EXPECT_TRUE(torch::allclose(as_tensor(s.test).inputs(),
                              (raw_test - torch::tensor({1.0f, 2.0f, 3.0f})) / torch::tensor({2.0f, 4.0f, 0.5f})));
  EXPECT_EQ(s.mean, o.mean);
  o.mean = {1.0};
  o.std = {2.0};
  EXPECT_TRUE(torch::allclose(as_tensor(load_splits(o).test).inputs(), (raw_test - 1) / 2));
  o.mean = {1.0, 2.0};
  o.std = {1.0, 1.0};
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument, {"data.mean has 2 values but the inputs have 3"});
  o.mean.clear();
  o.std = {1.0};
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument, {"data.mean has 0 values but data.std has 1"});
  o.std.clear();

  // limit_train and the split seed.
  o.limit_train = 20;
  o.val_size = 5;
  s = load_splits(o);
  EXPECT_EQ(s.train->size(), 15);
  const at::Tensor val_a = as_tensor(s.val).inputs();
  o.split_seed = 7;
  const at::Tensor val_b = as_tensor(load_splits(o).val).inputs();
  EXPECT_FALSE(torch::equal(val_a, val_b));

  // Labels must be >= 0.
  write_npy(fs::path(o.root) / "train_y.npy", torch::tensor({0, 1, 2, -1}).repeat({10}));
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
               {(fs::path(o.root) / "train_y.npy").string() + ": label -1 of sample 3 is negative"});
  write_npy(fs::path(o.root) / "train_y.npy", torch::arange(40).to(torch::kFloat));
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument, {"labels must be integers"});
  write_npy(fs::path(o.root) / "train_y.npy", torch::arange(39));
  expect_error([&] { load_splits(o); }, ErrorCode::kDataLoss, {"has 40 samples but", "has 39 labels"});
}

TEST(LoadSplits, CsvTables) {
  const fs::path d = temp_dir("csv-src");
  {
    std::ofstream tr(d / "train.csv");
    tr << "f1,f2,y\n";
    for (int i = 0; i < 30; ++i) tr << i << "," << (i % 5) * 2.5 << "," << i % 3 << "\n";
    std::ofstream te(d / "test.csv");
    te << "f1,f2,y\n1,2,0\n3,4,1\n";
  }
  DataOptions o;
  o.format = DataFormat::kCsv;
  o.root = d.string();
  o.label_column = "y";
  o.val_size = 6;
  const Splits s = load_splits(o);
  EXPECT_EQ(s.train->size(), 24);
  EXPECT_EQ(s.val->size(), 6);
  EXPECT_EQ(s.test->size(), 2);
  EXPECT_EQ(s.sample_shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(s.num_classes, 3);
  EXPECT_EQ(s.mean.size(), 2u);
  {
    std::ofstream te(d / "test.csv");
    te << "f1,f3,y\n1,2,0\n";
  }
  expect_error([&] { load_splits(o); }, ErrorCode::kDataLoss, {(d / "test.csv").string(), "feature columns (f1,f3)"});
  o.label_column = "why";
  expect_error([&] { load_splits(o); }, ErrorCode::kNotFound, {"no label column 'why'"});
}

TEST(DataOptions, VisitRoundTripAndValidate) {
  DataOptions o;
  load_config("format = \"npy\"\nval_size = 100\nmean = [0.5]\nstd = [0.25]\n", "t.toml", {"limit_train=1000"},
              visit_fn(o));
  EXPECT_EQ(o.format, DataFormat::kNpy);
  EXPECT_EQ(o.val_size, 100);
  EXPECT_EQ(o.limit_train, 1000);
  EXPECT_EQ(o.mean, std::vector<double>{0.5});
  EXPECT_NO_THROW(o.validate());
  DataOptions back;
  load_config(to_toml(visit_fn(o)), "round-trip", {}, visit_fn(back));
  EXPECT_EQ(back.format, DataFormat::kNpy);
  EXPECT_EQ(back.std, std::vector<double>{0.25});
  EXPECT_THROW(load_config("format = \"parquet\"\n", "t.toml", {}, visit_fn(back)), Error);
  DataOptions bad;
  bad.val_size = -1;
  expect_error([&] { bad.validate(); }, ErrorCode::kInvalidArgument,
               {"data.val_size must be 0, a fraction in (0, 1) or a count >= 1, got -1"});
  bad = DataOptions();
  bad.std = {0.0};
  bad.mean = {0.0};
  expect_error([&] { bad.validate(); }, ErrorCode::kInvalidArgument, {"data.std[0] must be > 0"});
  bad = DataOptions();
  bad.limit_train = 0;
  expect_error([&] { bad.validate(); }, ErrorCode::kInvalidArgument, {"data.limit_train"});
}

// ------------------------------------------------------------------------------------ val_size

TEST(ValSize, CountsFractionsAndZero) {
  EXPECT_EQ(DataOptions().val_size, 0.1);
  EXPECT_EQ(val_count(0, 10), 0);
  EXPECT_EQ(val_count(1, 10), 1);
  EXPECT_EQ(val_count(5000, 60000), 5000);
  // Fractions round up; each expected count is what scikit-learn's train_test_split(test_size=f)
  // puts in its test set for n samples.
  struct Case {
    std::int64_t n;
    double f;
    std::int64_t expected;
  };
  for (const Case& c : {Case{10, 0.25, 3}, Case{10, 0.7, 7}, Case{60000, 0.1, 6000}, Case{7, 0.5, 4}, Case{30, 0.1, 3},
                        Case{40, 0.15, 6}, Case{3, 0.01, 1}, Case{100, 0.333, 34}}) {
    EXPECT_EQ(val_count(c.f, c.n), c.expected) << c.n << " samples, " << c.f;
  }
}

TEST(ValSize, MalformedOrTooLargeIsAnErrorNamingTheKey) {
  Error e = expect_error([] { val_count(1.5, 100); }, ErrorCode::kInvalidArgument,
                         {"data.val_size = 1.5 is neither a fraction in (0, 1) nor a whole count"});
  EXPECT_NE(e.hint().find("e.g. 0.1"), std::string::npos) << e.hint();
  expect_error([] { val_count(-0.5, 100); }, ErrorCode::kInvalidArgument,
               {"data.val_size must be 0, a fraction in (0, 1) or a count >= 1, got -0.5"});
  expect_error([] { val_count(std::nan(""), 100); }, ErrorCode::kInvalidArgument, {"data.val_size must be"});
  e = expect_error([] { val_count(100, 100); }, ErrorCode::kInvalidArgument,
                   {"data.val_size (100) must be smaller than the training set (100 samples)"});
  EXPECT_NE(e.hint().find("data.limit_train"), std::string::npos) << e.hint();
  expect_error([] { val_count(1e30, 100); }, ErrorCode::kInvalidArgument,
               {"data.val_size (1e+30) must be smaller than the training set (100 samples)"});
  expect_error([] { val_count(0.5, 1); }, ErrorCode::kInvalidArgument,
               {"data.val_size = 0.5 takes 1 of the 1 training samples, leaving none to train on"});
  DataOptions o;
  o.val_size = 2.5;
  expect_error([&] { o.validate(); }, ErrorCode::kInvalidArgument, {"data.val_size = 2.5"});
}

TEST(ValSize, ReadFromTomlAsCountOrFraction) {
  DataOptions o;
  load_config("val_size = 0.25\n", "t.toml", {}, visit_fn(o));
  EXPECT_EQ(o.val_size, 0.25);
  DataOptions back;
  load_config(to_toml(visit_fn(o)), "round-trip", {}, visit_fn(back));
  EXPECT_EQ(back.val_size, 0.25);
  load_config("val_size = 5000\n", "t.toml", {}, visit_fn(o));
  EXPECT_EQ(o.val_size, 5000.0);
  load_config(to_toml(visit_fn(o)), "round-trip", {}, visit_fn(back));
  EXPECT_EQ(back.val_size, 5000.0);
  load_config("", "t.toml", {"val_size=0"}, visit_fn(o));
  EXPECT_EQ(o.val_size, 0.0);
  EXPECT_THROW(load_config("val_size = \"ten\"\n", "t.toml", {}, visit_fn(o)), Error);
}

TEST(LoadSplits, FractionalValSizeTakesThatShareOfTheLimitedTrainingSet) {
  DataOptions o;
  o.format = DataFormat::kNpy;
  o.root = make_npy_dir("npy-fraction").string();
  o.normalize = false;
  o.val_size = 0.15;  // 40 samples: ceil(6.0) = 6
  Splits s = load_splits(o);
  EXPECT_EQ(s.train->size(), 34);
  ASSERT_NE(s.val, nullptr);
  EXPECT_EQ(s.val->size(), 6);
  const at::Tensor x = read_npy(fs::path(o.root) / "train_x.npy").to(torch::kFloat);
  auto [tr, va] = random_split_indices(40, 6, 42);
  EXPECT_TRUE(torch::equal(as_tensor(s.val).inputs(), x.index_select(0, va)));
  EXPECT_TRUE(torch::equal(as_tensor(s.train).inputs(), x.index_select(0, tr)));
  o.limit_train = 11;  // of the first 11: ceil(1.65) = 2
  s = load_splits(o);
  EXPECT_EQ(s.train->size(), 9);
  EXPECT_EQ(s.val->size(), 2);
  o.limit_train = 1;
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
               {"data.val_size = 0.15 takes 1 of the 1 training samples"});
  o.limit_train = -1;
  o.val_size = 40;
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
               {"data.val_size (40) must be smaller than the training set (40 samples)"});
}

// ------------------------------------------------------------------------ CSV class names

fs::path write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
  return p;
}

// 12 training rows of three species (in no sorted order) and a test table.
fs::path make_species_dir(const std::string& name, const std::string& test_csv) {
  const fs::path d = temp_dir(name);
  std::string train = "sepal,petal,species\n";
  const char* species[] = {"versicolor", "setosa", "virginica"};
  for (int i = 0; i < 12; ++i) train += std::to_string(i) + "," + std::to_string(i % 3) + "," + species[i % 3] + "\n";
  write_text(d / "train.csv", train);
  write_text(d / "test.csv", test_csv);
  return d;
}

DataOptions species_options(const fs::path& d) {
  DataOptions o;
  o.format = DataFormat::kCsv;
  o.root = d.string();
  o.label_column = "species";
  o.val_size = 0;
  o.normalize = false;
  return o;
}

TEST(LoadSplits, CsvClassNamesAreEncodedInSortedOrderForBothTables) {
  const fs::path d = make_species_dir("csv-species", "sepal,petal,species\n1,1,virginica\n2,0,setosa\n");
  DataOptions o = species_options(d);
  Splits s = load_splits(o);
  EXPECT_EQ(s.num_classes, 3);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  EXPECT_EQ(s.feature_names, (std::vector<std::string>{"sepal", "petal"}));
  // Row i holds species[i % 3] = versicolor, setosa, virginica = classes 1, 0, 2.
  EXPECT_TRUE(torch::equal(as_tensor(s.train).targets(), i64({1, 0, 2}).repeat({4})));
  EXPECT_TRUE(torch::equal(as_tensor(s.test).targets(), i64({2, 0})));
  EXPECT_EQ(s.train->num_classes(), 3);

  // data.class_names, when given, sets the order (and may name classes absent from the data).
  o.class_names = {"virginica", "versicolor", "setosa", "unseen"};
  s = load_splits(o);
  EXPECT_EQ(s.num_classes, 4);
  EXPECT_EQ(s.class_names, o.class_names);
  EXPECT_TRUE(torch::equal(as_tensor(s.train).targets(), i64({1, 2, 0}).repeat({4})));
  EXPECT_TRUE(torch::equal(as_tensor(s.test).targets(), i64({0, 2})));
  o.class_names = {"setosa", "virginica"};
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
               {(d / "train.csv").string() + ": label 'versicolor' is not one of the classes of data.class_names"});

  // data.num_classes may not exceed the names.
  o.class_names.clear();
  o.num_classes = 5;
  Error e = expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
                         {"data.num_classes is 5 but the labels of " + (d / "train.csv").string() + " name 3 classes"});
  EXPECT_NE(e.hint().find("data.class_names"), std::string::npos);
  o.num_classes = 3;
  EXPECT_EQ(load_splits(o).class_names, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
}

TEST(LoadSplits, CsvTestLabelUnseenInTrainingIsAnErrorNamingValueAndFile) {
  const fs::path d = make_species_dir("csv-unseen", "sepal,petal,species\n1,1,setosa\n2,0,daisy\n");
  const DataOptions o = species_options(d);
  Error e = expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
                         {(d / "test.csv").string() + ": label 'daisy' is not one of the classes of " +
                          (d / "train.csv").string() + " (setosa, versicolor, virginica)"});
  EXPECT_EQ(e.one_line().find('\n'), std::string::npos);
  // Integer labels in one table and class names in the other.
  write_text(d / "test.csv", "sepal,petal,species\n1,1,0\n");
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
               {(d / "test.csv").string() + ": labels are integers but those of " + (d / "train.csv").string() +
                " are class names"});
  write_text(d / "test.csv", "sepal,petal,species\n");  // no test rows: nothing to encode
  EXPECT_EQ(load_splits(o).test->size(), 0);
  write_text(d / "train.csv", "sepal,petal,species\n1,1,0\n2,2,1\n");
  write_text(d / "test.csv", "sepal,petal,species\n1,1,setosa\n");
  expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
               {(d / "train.csv").string() + ": labels are integers but those of " + (d / "test.csv").string() +
                " are class names"});
}

TEST(LoadSplits, CsvIntegerLabelsKeepTheirValuesAndFeatureNames) {
  const fs::path d = temp_dir("csv-ints");
  write_text(d / "train.csv", "a,label,b\n1,2,3\n4,0,6\n7,1,9\n");
  write_text(d / "test.csv", "a,label,b\n1,3,3\n");
  DataOptions o;
  o.format = DataFormat::kCsv;
  o.root = d.string();
  o.val_size = 0;
  const Splits s = load_splits(o);
  EXPECT_EQ(s.feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_TRUE(torch::equal(as_tensor(s.train).targets(), i64({2, 0, 1})));
  // Sources without column names have none.
  DataOptions n;
  n.format = DataFormat::kNpy;
  n.root = make_npy_dir("npy-no-names").string();
  n.val_size = 0;
  EXPECT_TRUE(load_splits(n).feature_names.empty());
}

// ------------------------------------------------------------------------------ NPY layout

// Training images [12, 8, 6, 3] uint8 (channels last) and test images [4, 8, 6, 3].
fs::path make_nhwc_dir(const std::string& name) {
  const fs::path d = temp_dir(name);
  write_npy(d / "train_x.npy", torch::arange(12 * 8 * 6 * 3).remainder(256).to(torch::kByte).reshape({12, 8, 6, 3}));
  write_npy(d / "train_y.npy", torch::arange(12) % 2);
  write_npy(d / "test_x.npy", torch::arange(4 * 8 * 6 * 3).remainder(251).to(torch::kByte).reshape({4, 8, 6, 3}));
  write_npy(d / "test_y.npy", torch::arange(4) % 2);
  return d;
}

TEST(LoadSplits, ChannelsLastNpyIsRefusedWithAHintAndPermutedWithLayoutNhwc) {
  const fs::path d = make_nhwc_dir("npy-nhwc");
  DataOptions o;
  o.format = DataFormat::kNpy;
  o.root = d.string();
  o.val_size = 0;
  o.normalize = false;
  Error e = expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
                         {(d / "train_x.npy").string() + ": inputs of shape [12, 8, 6, 3] look channels-last"});
  EXPECT_NE(e.hint().find("data.layout = \"nhwc\""), std::string::npos) << e.hint();
  EXPECT_EQ(e.one_line().find('\n'), std::string::npos);

  o.layout = ArrayLayout::kNhwc;
  const Splits s = load_splits(o);
  EXPECT_EQ(s.sample_shape, (std::vector<std::int64_t>{3, 8, 6}));
  const at::Tensor raw = read_npy(d / "train_x.npy").to(torch::kFloat).div(255);
  const at::Tensor x = as_tensor(s.train).inputs();
  ASSERT_EQ(x.sizes(), (std::vector<std::int64_t>{12, 3, 8, 6}));
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_TRUE(torch::equal(x, raw.permute({0, 3, 1, 2})));
  EXPECT_EQ(x[5][2][7][1].item<float>(), raw[5][7][1][2].item<float>());
  EXPECT_EQ(as_tensor(s.test).inputs().sizes(), (std::vector<std::int64_t>{4, 3, 8, 6}));

  // Channels-first arrays with layout "nhwc" are refused the other way round.
  write_npy(d / "train_x.npy", torch::zeros({12, 3, 8, 6}));
  e = expect_error([&] { load_splits(o); }, ErrorCode::kInvalidArgument,
                   {(d / "train_x.npy").string() + ": inputs of shape [12, 3, 8, 6] look channels-first"});
  EXPECT_NE(e.hint().find("data.layout = \"nchw\""), std::string::npos) << e.hint();
}

TEST(LoadSplits, LayoutHeuristicLeavesAmbiguousShapesAlone) {
  const fs::path d = temp_dir("npy-layout-ambiguous");
  write_npy(d / "train_y.npy", torch::arange(6) % 2);
  write_npy(d / "test_y.npy", torch::arange(2) % 2);
  DataOptions o;
  o.format = DataFormat::kNpy;
  o.root = d.string();
  o.val_size = 0;
  o.normalize = false;
  // Read as they are with the default layout: channels first, small images, tabular and [N, H, W].
  for (const std::vector<std::int64_t>& shape :
       std::vector<std::vector<std::int64_t>>{{3, 8, 8}, {1, 28, 28}, {4, 4, 3}, {8, 3, 3}, {5, 5, 5}, {28, 28}, {3}}) {
    std::vector<std::int64_t> train_shape{6};
    std::vector<std::int64_t> test_shape{2};
    train_shape.insert(train_shape.end(), shape.begin(), shape.end());
    test_shape.insert(test_shape.end(), shape.begin(), shape.end());
    write_npy(d / "train_x.npy", torch::zeros(train_shape));
    write_npy(d / "test_x.npy", torch::zeros(test_shape));
    const std::vector<std::int64_t> expected =
        shape.size() == 2 ? std::vector<std::int64_t>{1, shape[0], shape[1]} : shape;
    EXPECT_EQ(load_splits(o).sample_shape, expected) << c10::IntArrayRef(shape);
  }
  // With "nhwc", 4-D arrays are permuted; other ranks are read as they are.
  o.layout = ArrayLayout::kNhwc;
  write_npy(d / "train_x.npy", torch::zeros({6, 4, 4, 3}));
  write_npy(d / "test_x.npy", torch::zeros({2, 4, 4, 3}));
  EXPECT_EQ(load_splits(o).sample_shape, (std::vector<std::int64_t>{3, 4, 4}));
  write_npy(d / "train_x.npy", torch::zeros({6, 5}));
  write_npy(d / "test_x.npy", torch::zeros({2, 5}));
  EXPECT_EQ(load_splits(o).sample_shape, (std::vector<std::int64_t>{5}));
}

TEST(DataOptions, LayoutIsAChoice) {
  DataOptions o;
  EXPECT_EQ(o.layout, ArrayLayout::kNchw);
  load_config("layout = \"nhwc\"\n", "t.toml", {}, visit_fn(o));
  EXPECT_EQ(o.layout, ArrayLayout::kNhwc);
  expect_error([&] { load_config("layout = \"NHWC\"\n", "t.toml", {}, visit_fn(o)); }, ErrorCode::kInvalidArgument,
               {"layout = \"NHWC\" is not one of: nchw, nhwc", "did you mean \"nhwc\""});
}

// ----------------------------------------------------------------------------- Fashion-MNIST

const char* kFashion = "/usr/share/datasets/fashion-mnist";

class FashionMnist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(fs::path(kFashion) / "train-images-idx3-ubyte.gz")) return;
    DataOptions o;
    o.val_size = 5000;  // as configs/quickstart.toml
    splits_ = new Splits(load_splits(o));
  }
  static void TearDownTestSuite() {
    delete splits_;
    splits_ = nullptr;
  }
  void SetUp() override {
    if (splits_ == nullptr) GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  static Splits* splits_;
};
Splits* FashionMnist::splits_ = nullptr;

TEST_F(FashionMnist, SizesClassesAndShapes) {
  const Splits& s = *splits_;
  EXPECT_EQ(s.train->size(), 55000);
  ASSERT_NE(s.val, nullptr);
  EXPECT_EQ(s.val->size(), 5000);
  EXPECT_EQ(s.test->size(), 10000);
  EXPECT_EQ(s.num_classes, 10);
  EXPECT_EQ(s.sample_shape, (std::vector<std::int64_t>{1, 28, 28}));
  EXPECT_EQ(s.class_names.front(), "T-shirt/top");
  EXPECT_EQ(s.class_names.back(), "Ankle boot");
  EXPECT_EQ(as_tensor(s.train).inputs().sizes(), (std::vector<std::int64_t>{55000, 1, 28, 28}));
  EXPECT_EQ(as_tensor(s.train).inputs().scalar_type(), torch::kFloat);
  EXPECT_EQ(as_tensor(s.train).targets().scalar_type(), torch::kLong);
  // Fashion-MNIST is balanced: 1000 test and 6000 training images per class.
  EXPECT_TRUE(torch::equal(torch::bincount(as_tensor(s.test).targets()), torch::full({10}, 1000, torch::kLong)));
  EXPECT_TRUE(torch::equal(torch::bincount(as_tensor(s.train).targets()) + torch::bincount(as_tensor(s.val).targets()),
                           torch::full({10}, 6000, torch::kLong)));
}

TEST_F(FashionMnist, NormalisedWithTheTrainingStatistics) {
  const Splits& s = *splits_;
  ASSERT_EQ(s.mean.size(), 1u);
  // The published pixel statistics of the training set: mean 0.2860, std 0.3530.
  EXPECT_NEAR(s.mean[0], 0.2860, 0.002);
  EXPECT_NEAR(s.std[0], 0.3530, 0.002);
  const at::Tensor x = as_tensor(s.train).inputs();
  EXPECT_NEAR(x.mean().item<double>(), 0.0, 1e-4);
  EXPECT_NEAR(x.std().item<double>(), 1.0, 1e-4);
  EXPECT_NEAR(as_tensor(s.test).inputs().mean().item<double>(), 0.0, 0.05);
  EXPECT_NEAR(as_tensor(s.val).inputs().mean().item<double>(), 0.0, 0.05);
}

TEST_F(FashionMnist, SplitIsDeterministicAndMatchesTheRawFiles) {
  const Splits& s = *splits_;
  auto [tr, va] = random_split_indices(60000, 5000, 42);
  const at::Tensor labels = read_idx(fs::path(kFashion) / "train-labels-idx1-ubyte.gz").to(torch::kLong);
  EXPECT_TRUE(torch::equal(as_tensor(s.val).targets(), labels.index_select(0, va)));
  EXPECT_TRUE(torch::equal(as_tensor(s.train).targets(), labels.index_select(0, tr)));
  const at::Tensor images = read_idx(fs::path(kFashion) / "train-images-idx3-ubyte.gz");
  const at::Tensor v = images.index_select(0, va.slice(0, 0, 100)).to(torch::kFloat).div(255).unsqueeze(1);
  const at::Tensor expected = (v - static_cast<float>(s.mean[0])) / static_cast<float>(s.std[0]);
  EXPECT_TRUE(torch::allclose(as_tensor(s.val).inputs().slice(0, 0, 100), expected, 1e-5, 1e-5));
}

}  // namespace
}  // namespace glassbox::data
