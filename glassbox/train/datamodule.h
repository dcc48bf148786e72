// DataModule: where the data comes from and how it is batched, separated from the model
// (TaskModule). Changing the data never touches model code.
//
//   StandardDataModule dm(options);   // [data] + [data.loader] sections of the config
//   dm.setup();
//   auto train = dm.train_dataset();  // shared_ptr<const data::Dataset>
//
// Thread safety: setup() once, then read-only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "glassbox/base/config.h"
#include "glassbox/data/dataset.h"
#include "glassbox/data/loader.h"
#include "glassbox/data/mixup.h"
#include "glassbox/data/source.h"

namespace glassbox::train {

// What a model needs to know about the data.
struct DataInfo {
  std::vector<std::int64_t> sample_shape;
  std::int64_t num_classes = 0;
  std::vector<std::string> class_names;
  std::vector<double> mean, std;
  // Tabular inputs' column names (the CSV header's feature columns); empty when the data has none.
  // The initializer keeps brace-initialised DataInfos without it free of -Wmissing-field-initializers.
  std::vector<std::string> feature_names = {};
  // Image files left out because they do not decode (data.on_bad_image = "skip"), each with why.
  std::vector<std::string> skipped_files = {};
};

class DataModule {
 public:
  virtual ~DataModule() = default;
  virtual void setup() = 0;
  virtual DataInfo info() const = 0;
  virtual std::shared_ptr<const data::Dataset> train_dataset() const = 0;
  virtual std::shared_ptr<const data::Dataset> val_dataset() const = 0;   // may be null
  virtual std::shared_ptr<const data::Dataset> test_dataset() const = 0;  // may be null
  // Loader options for the training split; evaluation splits use eval_loader_options().
  virtual data::LoaderOptions train_loader_options() const = 0;
  virtual data::LoaderOptions eval_loader_options() const = 0;
  // What the training loader's workers apply to each batch (MixUp/CutMix); null: nothing.
  virtual data::BatchTransform train_batch_transform() const { return nullptr; }
};

struct DataModuleOptions {
  data::DataOptions source;
  data::LoaderOptions loader;        // training loader (shuffle defaults to true)
  std::int64_t eval_batch_size = 0;  // 0: twice loader.batch_size
  data::MixupOptions mixup;          // [data.mixup]: MixUp / CutMix of training batches

  DataModuleOptions() { loader.shuffle = true; }
  void visit(FieldVisitor& v);  // source fields at the top of [data], loader in [data.loader]
  void validate() const;
};

class StandardDataModule final : public DataModule {
 public:
  explicit StandardDataModule(DataModuleOptions options);
  void setup() override;
  DataInfo info() const override;
  std::shared_ptr<const data::Dataset> train_dataset() const override { return splits_.train; }
  std::shared_ptr<const data::Dataset> val_dataset() const override { return splits_.val; }
  std::shared_ptr<const data::Dataset> test_dataset() const override { return splits_.test; }
  data::LoaderOptions train_loader_options() const override { return options_.loader; }
  data::LoaderOptions eval_loader_options() const override;
  data::BatchTransform train_batch_transform() const override;

 private:
  DataModuleOptions options_;
  data::Splits splits_;
  bool ready_ = false;
};

// Data sets already in hand (e.g. tensors built in code), with the given loader options.
//   TensorDataModule dm(std::make_shared<data::TensorDataset>(x, y, 10), nullptr, nullptr, loader);
class TensorDataModule final : public DataModule {
 public:
  TensorDataModule(std::shared_ptr<const data::Dataset> train, std::shared_ptr<const data::Dataset> val,
                   std::shared_ptr<const data::Dataset> test, data::LoaderOptions loader, std::int64_t num_classes = 0);
  void setup() override {}
  DataInfo info() const override;
  std::shared_ptr<const data::Dataset> train_dataset() const override { return train_; }
  std::shared_ptr<const data::Dataset> val_dataset() const override { return val_; }
  std::shared_ptr<const data::Dataset> test_dataset() const override { return test_; }
  data::LoaderOptions train_loader_options() const override { return loader_; }
  data::LoaderOptions eval_loader_options() const override;

 private:
  std::shared_ptr<const data::Dataset> train_, val_, test_;
  data::LoaderOptions loader_;
  std::int64_t num_classes_;
};

}  // namespace glassbox::train
