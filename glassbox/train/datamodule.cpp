#include "glassbox/train/datamodule.h"

#include "glassbox/base/error.h"
#include "glassbox/data/mixup.h"

namespace glassbox::train {

void DataModuleOptions::visit(FieldVisitor& v) {
  source.visit(v);
  v.field("eval_batch_size", eval_batch_size, "batch size for validation and test (0: twice the training batch size)");
  v.section("loader", [this](FieldVisitor& s) { loader.visit(s); });
  v.section("mixup", [this](FieldVisitor& s) { mixup.visit(s); });
}

void DataModuleOptions::validate() const {
  source.validate();
  loader.validate();
  mixup.validate();
  GB_CHECK(eval_batch_size >= 0, InvalidArgument, "data.eval_batch_size must be >= 0, got " << eval_batch_size,
           "use 0 for the default");
}

StandardDataModule::StandardDataModule(DataModuleOptions options) : options_(std::move(options)) {
  options_.validate();
}

data::BatchTransform StandardDataModule::train_batch_transform() const {
  if (!options_.mixup.enabled()) return nullptr;
  return [mix = options_.mixup](data::Batch b, std::uint64_t seed) {
    data::AugmentRng rng(seed);
    data::mix_batch(b, mix, rng);
    return b;
  };
}

void StandardDataModule::setup() {
  if (ready_) return;
  splits_ = data::load_splits(options_.source);
  ready_ = true;
}

DataInfo StandardDataModule::info() const {
  GB_CHECK(ready_, FailedPrecondition, "DataModule::info() before setup()", "call setup() first");
  DataInfo i;
  i.sample_shape = splits_.sample_shape;
  i.num_classes = splits_.num_classes;
  i.class_names = splits_.class_names;
  i.mean = splits_.mean;
  i.std = splits_.std;
  i.feature_names = splits_.feature_names;
  i.skipped_files = splits_.skipped_files;
  return i;
}

data::LoaderOptions StandardDataModule::eval_loader_options() const {
  data::LoaderOptions o = options_.loader;
  o.shuffle = false;
  o.drop_last = false;
  o.batch_size = options_.eval_batch_size > 0 ? options_.eval_batch_size : 2 * options_.loader.batch_size;
  return o;
}

TensorDataModule::TensorDataModule(std::shared_ptr<const data::Dataset> train, std::shared_ptr<const data::Dataset> val,
                                   std::shared_ptr<const data::Dataset> test, data::LoaderOptions loader,
                                   std::int64_t num_classes)
    : train_(std::move(train)),
      val_(std::move(val)),
      test_(std::move(test)),
      loader_(loader),
      num_classes_(num_classes) {
  GB_CHECK(train_ != nullptr, InvalidArgument, "TensorDataModule needs a training set",
           "pass a dataset as the first argument");
}

DataInfo TensorDataModule::info() const {
  DataInfo i;
  i.sample_shape = train_->sample_shape();
  i.num_classes = num_classes_ > 0 ? num_classes_ : train_->num_classes();
  return i;
}

data::LoaderOptions TensorDataModule::eval_loader_options() const {
  data::LoaderOptions o = loader_;
  o.shuffle = false;
  o.drop_last = false;
  return o;
}

}  // namespace glassbox::train
