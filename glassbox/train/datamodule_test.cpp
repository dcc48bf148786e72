// Tests of the data modules: what info() tells the model about the data.
#include "glassbox/train/datamodule.h"

#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox::train {
namespace {

namespace fs = std::filesystem;
using glassbox::testing::temp_dir;

TEST(StandardDataModule, InfoCarriesTheCsvHeaderAndClassNames) {
  const fs::path d = temp_dir("datamodule-csv");
  {
    std::ofstream tr(d / "train.csv");
    tr << "sepal,species,petal\n";
    const char* species[] = {"versicolor", "setosa", "virginica"};
    for (int i = 0; i < 8; ++i) tr << i << "," << species[i % 3] << "," << i % 4 << "\n";
    std::ofstream(d / "test.csv") << "sepal,species,petal\n1,setosa,2\n";
  }
  DataModuleOptions o;
  o.source.format = data::DataFormat::kCsv;
  o.source.root = d.string();
  o.source.label_column = "species";
  o.source.val_size = 0.25;
  StandardDataModule dm(o);
  EXPECT_THROW(dm.info(), Error);  // before setup()
  dm.setup();
  const DataInfo info = dm.info();
  EXPECT_EQ(info.feature_names, (std::vector<std::string>{"sepal", "petal"}));
  EXPECT_EQ(info.class_names, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  EXPECT_EQ(info.num_classes, 3);
  EXPECT_EQ(info.sample_shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(info.mean.size(), 2u);
  ASSERT_NE(dm.val_dataset(), nullptr);
  EXPECT_EQ(dm.val_dataset()->size(), 2);  // ceil(0.25 * 8)
  EXPECT_EQ(dm.train_dataset()->size(), 6);
}

TEST(StandardDataModule, ArraysHaveNoFeatureNames) {
  const fs::path d = temp_dir("datamodule-npy");
  data::write_npy(d / "train_x.npy", torch::rand({10, 3}));
  data::write_npy(d / "train_y.npy", torch::arange(10) % 2);
  data::write_npy(d / "test_x.npy", torch::rand({4, 3}));
  data::write_npy(d / "test_y.npy", torch::arange(4) % 2);
  DataModuleOptions o;
  o.source.format = data::DataFormat::kNpy;
  o.source.root = d.string();
  StandardDataModule dm(o);
  dm.setup();
  EXPECT_TRUE(dm.info().feature_names.empty());
  EXPECT_EQ(dm.info().class_names, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(dm.val_dataset()->size(), 1);  // the default val_size 0.1: ceil(1.0)

  TensorDataModule tm(dm.train_dataset(), nullptr, nullptr, data::LoaderOptions());
  EXPECT_TRUE(tm.info().feature_names.empty());
}

}  // namespace
}  // namespace glassbox::train
