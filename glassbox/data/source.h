// Data sources: where the train/validation/test splits come from.
//
//   [data]
//   format = "mnist"                          # mnist (IDX folder) | npy | csv
//   root = "/usr/share/datasets/fashion-mnist"
//   val_size = 5000                           # carved from the training set with split_seed
//
//   DataOptions o;                 // defaults: Debian's Fashion-MNIST files, val_size 0.1
//   o.val_size = 5000;
//   Splits s = load_splits(o);     // s.train->size() == 55000, s.val 5000, s.test 10000
//
// Inputs come back as float32 [N, C, H, W] for images ([N, F] for tabular data), normalised with
// the training split's mean/std unless `normalize = false` or mean/std are given. Labels int64 [N].
// Every malformed file is a DataLoss/NotFound error naming the file and what is wrong.
// Details: uint8 inputs (IDX images, uint8 .npy arrays) are scaled to [0, 1]; [N, H, W] arrays get
// a channel dimension; labels must be integers >= 0. limit_train keeps the first N training
// samples (all when N exceeds the set), then val_count(val_size, N) samples are drawn with
// random_split_indices(N, that count, split_seed); both splits are materialised as TensorDatasets.
// Statistics are per channel (dim 1), population std, a constant channel gets std 1; a single
// given mean/std value applies to every channel. num_classes is max(train, test label) + 1, or
// the number of class_names when those are given (fewer names than classes is an error), or
// data.num_classes (labels outside 0..num_classes-1 are then an error naming the sample).
// Non-finite input values do not enter the statistics (they stay where they are).
// CSV: feature_names are the header's feature columns. A label column of class names (see csv.h)
// is encoded with the training table's sorted names, or with the order of data.class_names when
// given; the names become class_names, and a test label outside them is an error naming the
// value and the file.
// NPY image layout: a 4-D array is read as [N, C, H, W]; layout "nhwc" reads it as [N, H, W, C] and
// permutes it. An array that looks like the other layout is refused with a hint to set
// data.layout: [N, A, B, C] looks channels-last when C is 1, 3 or 4 and A, B > 4 (with "nchw"),
// channels-first when A is 1, 3 or 4 and B, C > 4 (with "nhwc"). Other shapes are read as the
// layout says; arrays of other ranks are not affected by it.
// Tasks other than classification (data.task): targets are float32 [N, T] — npy: a [N] or [N, T]
// array of any numeric dtype ([N] becomes [N, 1]); csv: data.target_columns (regression may name
// the single data.label_column instead); imagefolder: data.target_columns of metadata.csv. The
// output width (num_classes) is T and class_names are the target names (the columns, else
// "0".."T-1"). Multi-label targets must be 0 or 1; regression targets must be finite. IDX (mnist)
// and WebDataset sources carry class labels only.
// Thread safety: load_splits is reentrant.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "glassbox/base/config.h"
#include "glassbox/core/task_kind.h"
#include "glassbox/data/dataset.h"
#include "glassbox/data/transform_spec.h"

namespace glassbox::data {

enum class DataFormat { kMnist, kNpy, kCsv, kImageFolder, kWebDataset };
constexpr NameTable<DataFormat, 5> enum_names(DataFormat) {
  return {{{DataFormat::kMnist, "mnist"},
           {DataFormat::kNpy, "npy"},
           {DataFormat::kCsv, "csv"},
           {DataFormat::kImageFolder, "imagefolder"},
           {DataFormat::kWebDataset, "webdataset"}}};
}
static_assert(is_complete_table(enum_names(DataFormat{})));

// Formats whose samples are encoded image files (decoded, transformed and normalised per sample).
constexpr bool is_image_format(DataFormat f) { return f == DataFormat::kImageFolder || f == DataFormat::kWebDataset; }

// What a file that does not decode does: stop the run naming it, or leave it out (counted).
enum class OnBadImage { kError, kSkip };
constexpr NameTable<OnBadImage, 2> enum_names(OnBadImage) {
  return {{{OnBadImage::kError, "error"}, {OnBadImage::kSkip, "skip"}}};
}
static_assert(is_complete_table(enum_names(OnBadImage{})));

// How an image folder is split: "auto" uses train/val/test folders, else metadata.csv's split
// column, else a seeded stratified split; "folders", "column", "random" and "date" ask for one.
enum class SplitBy { kAuto, kFolders, kColumn, kRandom, kDate };
constexpr NameTable<SplitBy, 5> enum_names(SplitBy) {
  return {{{SplitBy::kAuto, "auto"},
           {SplitBy::kFolders, "folders"},
           {SplitBy::kColumn, "column"},
           {SplitBy::kRandom, "random"},
           {SplitBy::kDate, "date"}}};
}
static_assert(is_complete_table(enum_names(SplitBy{})));

// How 4-D image arrays are laid out: [N, C, H, W] or channels-last [N, H, W, C].
enum class ArrayLayout { kNchw, kNhwc };
constexpr NameTable<ArrayLayout, 2> enum_names(ArrayLayout) {
  return {{{ArrayLayout::kNchw, "nchw"}, {ArrayLayout::kNhwc, "nhwc"}}};
}
static_assert(is_complete_table(enum_names(ArrayLayout{})));

struct DataOptions {
  TaskKind task = TaskKind::kClassification;
  DataFormat format = DataFormat::kMnist;
  std::string root = "/usr/share/datasets/fashion-mnist";
  // mnist: IDX file names under root; a ".gz" variant is used when the plain file is absent.
  std::string train_images = "train-images-idx3-ubyte";
  std::string train_labels = "train-labels-idx1-ubyte";
  std::string test_images = "t10k-images-idx3-ubyte";
  std::string test_labels = "t10k-labels-idx1-ubyte";
  // npy: arrays (relative to root unless absolute); csv: files with feature columns + a label column.
  std::string train_x = "train_x.npy";
  std::string train_y = "train_y.npy";
  std::string test_x = "test_x.npy";
  std::string test_y = "test_y.npy";
  std::string train_csv = "train.csv";
  std::string test_csv = "test.csv";
  std::string label_column = "label";  // csv: name of the label column (header required)
  // regression / multilabel: the target columns (csv, or imagefolder's metadata.csv), in order.
  std::vector<std::string> target_columns;
  // Samples moved from train to validation: a count (a whole number >= 1), a fraction in (0, 1)
  // of the training set (rounded up, as scikit-learn's test_size), or 0 for none.
  double val_size = 0.1;
  ArrayLayout layout = ArrayLayout::kNchw;  // npy
  std::int64_t split_seed = 42;
  std::int64_t limit_train = -1;  // use only the first N training samples (-1: all)
  bool normalize = true;
  std::vector<double> mean;  // per channel/feature; empty: computed on the training split
  std::vector<double> std;
  // imagefolder (see image_folder.h): root/<class>/**/<image>, or train/ val/ test/ folders of
  // those, or a metadata.csv (file_name + label_column [+ split_column, date_column]).
  std::int64_t channels = 0;  // 0: as the first training image (gray 1, colour 3); 1 or 3 convert
  double test_size = 0.2;     // held out for testing when there is no test split (count or fraction)
  SplitBy split_by = SplitBy::kAuto;
  std::string metadata = "metadata.csv";  // relative to root; used when it exists
  std::string split_column = "split";     // metadata: train | val (validation) | test
  std::string date_column;                // metadata: ISO dates, for split_by = "date"
  std::string val_from;                   // split_by = "date": val_from <= date < test_from is validation
  std::string test_from;                  // ... and date >= test_from is the test split
  // webdataset (see image_folder.h): tar shards, brace-expanded, relative to root.
  std::string train_shards;         // e.g. "train-{000000..000099}.tar"
  std::string val_shards;           // empty: data.val_size of the training samples
  std::string test_shards;          // empty: data.test_size of the training samples
  std::string label_key = "cls";    // the label's member: an integer or class name; "json": field label_column
  std::string image_key;            // the image member's suffix; empty: the first with an image extension
  std::int64_t shuffle_buffer = 0;  // > 0: shards shuffled, then a buffer of this many samples; 0: uniform
  OnBadImage on_bad_image = OnBadImage::kError;
  std::vector<TransformSpec> train_transforms;  // training samples, one draw per sample and epoch
  std::string augment_preset;                  // xray | production_line | satellite (augment.h), after train_transforms
  std::vector<TransformSpec> eval_transforms;  // validation, test, eval, predict (deterministic)
  std::vector<std::string> class_names;        // empty: dataset defaults or "0".."K-1"
  std::int64_t num_classes = 0;                // the model's output width; 0: max label + 1 (or the class names)
  // Not a config key: false lets labels outside 0..num_classes-1 through (the doctor reads such
  // data to report on it instead of failing at load).
  bool check_labels = true;
  // Not a config key: false leaves out the load-time checks of image files (on_bad_image =
  // "error"); data inspect and data pack decode every file themselves and report the bad ones.
  bool check_images = true;

  void visit(FieldVisitor& v);
  void validate() const;
};

struct Splits {
  TaskKind task = TaskKind::kClassification;
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> val;  // null when val_size == 0
  std::shared_ptr<const Dataset> test;
  std::int64_t num_classes = 0;          // the model's output width (targets for regression/multilabel)
  std::vector<std::string> class_names;  // classes, or the names of the targets / labels
  std::vector<double> mean;              // the normalisation applied (empty when none)
  std::vector<double> std;
  std::vector<std::int64_t> sample_shape;
  std::vector<std::string> feature_names;  // csv: the header's feature columns, in order; else empty
  std::vector<std::string> skipped_files;  // imagefolder with on_bad_image = "skip": what was left out, and why
};

Splits load_splits(const DataOptions& options);

// The number of validation samples `val_size` (see DataOptions) takes from `n` training samples:
// 0, the count, or ceil(val_size * n) for a fraction. InvalidArgument naming data.val_size when
// it is malformed or leaves no sample to train on.
std::int64_t val_count(double val_size, std::int64_t n);

}  // namespace glassbox::data
