// load_splits for IDX, .npy and CSV sources (image folders: image_folder.cpp). Just over 600
// lines: the class-label and real-target paths share the split and normalisation code here.
#include "glassbox/data/source.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <unordered_map>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/augment.h"
#include "glassbox/data/csv.h"
#include "glassbox/data/idx.h"
#include "glassbox/data/image_folder.h"
#include "glassbox/data/npy.h"

namespace glassbox::data {
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFashionMnistClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// One split as read from disk, before normalisation.
struct RawSplit {
  at::Tensor x;  // [N, C, H, W] or [N, F] float32
  at::Tensor y;  // [N] int64
  std::string x_source;
  std::string y_source;
  std::vector<std::string> label_names;  // csv with text labels: y indexes these (sorted) names
};

// The shortest text that reads back as `v` (0.1, 5000, 1.5).
std::string format_number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// Values written with "A, B, C", at most `limit` of them.
std::string join_names(const std::vector<std::string>& names, std::size_t limit = 10) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// 0, a fraction in (0, 1) or a whole count >= 1.
void check_val_size(double v) {
  GB_CHECK(std::isfinite(v) && v >= 0, InvalidArgument,
           "data.val_size must be 0, a fraction in (0, 1) or a count >= 1, got " << format_number(v),
           "e.g. 0.1 for a tenth of the training set, 5000 for 5000 samples, 0 for no validation split");
  GB_CHECK(v < 1 || v == std::floor(v), InvalidArgument,
           "data.val_size = " << format_number(v) << " is neither a fraction in (0, 1) nor a whole count",
           "write a fraction below 1 (e.g. 0.1) or a whole number of samples (e.g. 5000)");
}

bool is_channel_count(std::int64_t c) { return c == 1 || c == 3 || c == 4; }

// The conservative guesses of the layout of a 4-D image array (see source.h).
bool looks_channels_last(const at::Tensor& x) {
  return x.dim() == 4 && is_channel_count(x.size(3)) && x.size(1) > 4 && x.size(2) > 4;
}
bool looks_channels_first(const at::Tensor& x) {
  return x.dim() == 4 && is_channel_count(x.size(1)) && x.size(2) > 4 && x.size(3) > 4;
}

fs::path under_root(const DataOptions& o, const std::string& name) {
  fs::path p(name);
  if (p.is_absolute()) return p;
  return fs::path(o.root) / p;
}

// NAME, else NAME.gz; NotFound naming both.
fs::path find_idx(const DataOptions& o, const std::string& name) {
  const fs::path plain = under_root(o, name);
  std::error_code ec;
  if (fs::is_regular_file(plain, ec)) return plain;
  fs::path gz = plain;
  gz += ".gz";
  if (fs::is_regular_file(gz, ec)) return gz;
  GB_THROW(NotFound, "no IDX file " << plain.string() << " (also tried " << gz.string() << ")",
           "install Debian's Fashion-MNIST (apt-get install dataset-fashion-mnist) or set data.root to a folder "
           "with the IDX files");
}

at::Tensor labels_to_int64(const at::Tensor& y, const std::string& source) {
  GB_CHECK(y.dim() == 1, DataLoss, source << ": labels must be one-dimensional [N], got shape " << y.sizes(),
           "store one integer class label per sample");
  const at::ScalarType t = y.scalar_type();
  GB_CHECK(at::isIntegralType(t, /*includeBool=*/false), InvalidArgument,
           source << ": labels must be integers, got " << t, "store class labels as integers 0..K-1 (np.int64)");
  return y.to(at::kLong).contiguous();
}

// Real-valued targets as float32 [N, T] ([N] becomes [N, 1]), checked for the task: finite values,
// and 0 or 1 for multi-label.
at::Tensor targets_to_float(const at::Tensor& y, TaskKind task, const std::string& source) {
  GB_CHECK(y.dim() == 1 || y.dim() == 2, DataLoss, source << ": targets must be [N] or [N, T], got shape " << y.sizes(),
           "store one row of targets per sample");
  GB_CHECK(y.scalar_type() != at::kBool || task == TaskKind::kMultilabel, InvalidArgument,
           source << ": regression targets must be numbers, got bool", "convert with a.astype(np.float32)");
  at::Tensor f = y.to(at::kFloat).contiguous();
  if (f.dim() == 1) f = f.unsqueeze(1);
  GB_CHECK(f.size(1) >= 1, DataLoss, source << ": no targets (shape " << y.sizes() << ")", "give at least one column");
  const float* p = f.const_data_ptr<float>();
  for (std::int64_t i = 0; i < f.numel(); ++i) {
    const std::int64_t row = i / f.size(1), col = i % f.size(1);
    GB_CHECK(std::isfinite(p[i]), DataLoss, source << ": target " << col << " of sample " << row << " is " << p[i],
             "fill or drop samples with missing targets");
    GB_CHECK(task != TaskKind::kMultilabel || p[i] == 0.0F || p[i] == 1.0F, InvalidArgument,
             source << ": label " << col << " of sample " << row << " is " << p[i] << ", not 0 or 1",
             "multi-label targets mark each label present (1) or absent (0)");
  }
  return f;
}

// Features to float32; uint8 arrays are images and are scaled to [0, 1]; [N, H, W] gets a channel.
at::Tensor features_to_float(const at::Tensor& x, const std::string& source) {
  GB_CHECK(x.dim() >= 2 && x.dim() <= 4, DataLoss,
           source << ": inputs must be [N, F], [N, H, W] or [N, C, H, W], got shape " << x.sizes(),
           "reshape the array so that the sample dimension comes first");
  GB_CHECK(x.scalar_type() != at::kBool, InvalidArgument, source << ": inputs must be numeric, got bool",
           "convert with a.astype(np.float32)");
  at::Tensor f = x.scalar_type() == at::kByte ? x.to(at::kFloat).div_(255.0) : x.to(at::kFloat);
  if (f.dim() == 3) f = f.unsqueeze(1);
  return f.contiguous();
}

RawSplit read_mnist(const DataOptions& o, const std::string& images, const std::string& labels) {
  const fs::path xp = find_idx(o, images);
  const fs::path yp = find_idx(o, labels);
  at::Tensor x = read_idx(xp);
  at::Tensor y = read_idx(yp);
  GB_CHECK(x.dim() == 3 || x.dim() == 4, DataLoss,
           xp.string() << ": images must be [N, H, W] (or [N, C, H, W]), got shape " << x.sizes(),
           "check data.train_images / data.test_images: this looks like a labels file");
  GB_CHECK(x.size(0) == y.size(0), DataLoss,
           xp.string() << " has " << x.size(0) << " images but " << yp.string() << " has " << y.size(0) << " labels",
           "the images and labels files must belong together; re-download the data set");
  RawSplit r;
  r.x_source = xp.string();
  r.y_source = yp.string();
  r.y = labels_to_int64(y, r.y_source);
  r.x = features_to_float(x, r.x_source);
  return r;
}

RawSplit read_npy_split(const DataOptions& o, const std::string& xs, const std::string& ys) {
  RawSplit r;
  const fs::path xp = under_root(o, xs);
  const fs::path yp = under_root(o, ys);
  r.x_source = xp.string();
  r.y_source = yp.string();
  at::Tensor x = read_npy(xp);
  at::Tensor y = read_npy(yp);
  if (o.layout == ArrayLayout::kNhwc) {
    GB_CHECK(!looks_channels_first(x), InvalidArgument,
             r.x_source << ": inputs of shape " << x.sizes()
                        << " look channels-first [N, C, H, W], but data.layout = \"nhwc\" reads them as [N, H, W, C]",
             "set data.layout = \"nchw\" (the default)");
    if (x.dim() == 4) x = x.permute({0, 3, 1, 2}).contiguous();
  } else {
    GB_CHECK(!looks_channels_last(x), InvalidArgument,
             r.x_source << ": inputs of shape " << x.sizes()
                        << " look channels-last [N, H, W, C], but the models read images as [N, C, H, W]",
             "set data.layout = \"nhwc\" to permute them on load");
  }
  GB_CHECK(x.dim() >= 1 && y.dim() >= 1 && x.size(0) == y.size(0), DataLoss,
           r.x_source << " has " << (x.dim() ? x.size(0) : 1) << " samples but " << r.y_source << " has "
                      << (y.dim() ? y.size(0) : 1) << " labels",
           "the inputs and labels arrays must have the same first dimension");
  r.y = o.task == TaskKind::kClassification ? labels_to_int64(y, r.y_source) : targets_to_float(y, o.task, r.y_source);
  r.x = features_to_float(x, r.x_source);
  return r;
}

RawSplit read_csv_split(const DataOptions& o, const std::string& file, std::vector<std::string>* names) {
  const fs::path p = under_root(o, file);
  if (o.task != TaskKind::kClassification) {
    const std::vector<std::string> columns =
        o.target_columns.empty() ? std::vector<std::string>{o.label_column} : o.target_columns;
    CsvTable t = read_csv_targets(p, columns);
    if (names != nullptr) *names = t.feature_names;
    RawSplit r;
    r.x_source = r.y_source = p.string();
    r.x = std::move(t.features);
    r.y = targets_to_float(t.targets, o.task, r.y_source);
    return r;
  }
  CsvTable t = read_csv(p, o.label_column);
  if (names != nullptr) *names = t.feature_names;
  RawSplit r;
  r.x_source = r.y_source = p.string();
  r.x = std::move(t.features);
  r.y = std::move(t.labels);
  r.label_names = std::move(t.label_names);
  return r;
}

// Re-indexes the text labels of `s` (indices into s.label_names) as indices into `classes`;
// `classes_from` says where those come from, for the error on a label outside them.
void encode_text_labels(RawSplit& s, const std::vector<std::string>& classes, const std::string& classes_from) {
  if (s.label_names == classes) return;
  std::unordered_map<std::string, std::int64_t> index;
  for (std::size_t k = 0; k < classes.size(); ++k) index.emplace(classes[k], static_cast<std::int64_t>(k));
  std::vector<std::int64_t> to_class(s.label_names.size());
  for (std::size_t k = 0; k < s.label_names.size(); ++k) {
    const auto it = index.find(s.label_names[k]);
    GB_CHECK(it != index.end(), InvalidArgument,
             s.y_source << ": label '" << s.label_names[k] << "' is not one of the classes of " << classes_from << " ("
                        << join_names(classes) << ")",
             "remove those rows, or list every class in data.class_names");
    to_class[k] = it->second;
  }
  std::int64_t* p = s.y.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < s.y.numel(); ++i) p[i] = to_class[static_cast<std::size_t>(p[i])];
  s.label_names = classes;
}

void check_labels_non_negative(const RawSplit& s) {
  if (s.y.numel() == 0) return;
  const std::int64_t* p = s.y.const_data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < s.y.numel(); ++i) {
    GB_CHECK(p[i] >= 0, InvalidArgument, s.y_source << ": label " << p[i] << " of sample " << i << " is negative",
             "class labels must be integers 0..K-1");
  }
}

bool contains_fashion(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return l.find("fashion") != std::string::npos;
}

std::vector<double> to_vector(const at::Tensor& t) {
  at::Tensor d = t.to(at::kDouble).contiguous();
  return {d.const_data_ptr<double>(), d.const_data_ptr<double>() + d.numel()};
}

}  // namespace

std::int64_t val_count(double val_size, std::int64_t n) {
  check_val_size(val_size);
  if (val_size == 0) return 0;
  if (val_size >= 1) {
    GB_CHECK(
        val_size < static_cast<double>(n), InvalidArgument,
        "data.val_size (" << format_number(val_size) << ") must be smaller than the training set (" << n << " samples)",
        "lower data.val_size (or give a fraction such as 0.1) or raise data.limit_train");
    return static_cast<std::int64_t>(val_size);
  }
  // As scikit-learn's train_test_split: ceil(test_size * n_samples), in doubles.
  const auto k = static_cast<std::int64_t>(std::ceil(val_size * static_cast<double>(n)));
  GB_CHECK(k < n, InvalidArgument,
           "data.val_size = " << format_number(val_size) << " takes " << k << " of the " << n
                              << " training samples, leaving none to train on",
           "lower data.val_size or raise data.limit_train");
  return k;
}

void DataOptions::visit(FieldVisitor& v) {
  v.choice("task", task,
           "classification (one class per sample) | regression (real-valued targets) | multilabel (0/1 per label)");
  v.choice("format", format, "mnist (a folder of IDX files) | npy | csv | imagefolder | webdataset (tar shards)");
  v.field("root", root, "folder of the data files (relative file names are resolved against it)");
  v.field("train_images", train_images, "mnist: training images IDX file (NAME or NAME.gz)");
  v.field("train_labels", train_labels, "mnist: training labels IDX file");
  v.field("test_images", test_images, "mnist: test images IDX file");
  v.field("test_labels", test_labels, "mnist: test labels IDX file");
  v.field("train_x", train_x, "npy: training inputs");
  v.field("train_y", train_y, "npy: training labels");
  v.field("test_x", test_x, "npy: test inputs");
  v.field("test_y", test_y, "npy: test labels");
  v.field("train_csv", train_csv, "csv: training table");
  v.field("test_csv", test_csv, "csv: test table");
  v.field("label_column", label_column, "csv: name of the label column (integers 0..K-1 or class names)");
  v.field("target_columns", target_columns,
          "regression / multilabel: the target columns of the csv tables or of an image folder's metadata.csv");
  v.choice("layout", layout, "npy: layout of 4-D image arrays; nhwc permutes [N, H, W, C] to [N, C, H, W] on load");
  v.field("val_size", val_size,
          "validation samples taken from the training set: a count (e.g. 5000), a fraction in (0, 1) (e.g. 0.1), "
          "or 0 for none");
  v.field("split_seed", split_seed, "seed of the train/validation split");
  v.field("limit_train", limit_train, "use only the first N training samples (-1: all)");
  v.field("normalize", normalize, "normalise inputs with the training split's per-channel mean and std");
  v.field("mean", mean, "per-channel (or per-feature) mean; empty: computed on the training split");
  v.field("std", std, "per-channel (or per-feature) std; empty: computed on the training split");
  v.field("num_classes", num_classes, "number of classes (the model's output width); 0: the largest label + 1");
  v.field("class_names", class_names, "class names; empty: the data set's defaults or 0..K-1");
  v.field("channels", channels, "images: 0 keeps the first training image's (gray 1, colour 3); 1 or 3 convert");
  v.field("test_size", test_size,
          "images: test samples held out when there is no test split: a count or a fraction in (0, 1)");
  v.choice("split_by", split_by,
           "imagefolder: auto (folders, else the split column, else random) | folders | column | random | date");
  v.field("metadata", metadata, "imagefolder: a CSV beside the images with a file_name column (used when present)");
  v.field("split_column", split_column, "imagefolder metadata: column of train / val / test");
  v.field("date_column", date_column, "imagefolder metadata: column of ISO dates (YYYY-MM-DD...) for split_by = date");
  v.field("val_from", val_from, "split_by = date: first date of the validation split");
  v.field("test_from", test_from, "split_by = date: first date of the test split");
  v.field("train_shards", train_shards,
          "webdataset: the training shards, brace-expanded and relative to root (e.g. \"train-{000000..000099}.tar\")");
  v.field("val_shards", val_shards, "webdataset: the validation shards; empty: data.val_size of the training samples");
  v.field("test_shards", test_shards, "webdataset: the test shards; empty: data.test_size of the training samples");
  v.field(
      "label_key", label_key,
      "webdataset: the member holding the label: cls (an integer or a class name), or json (field data.label_column)");
  v.field("image_key", image_key, "webdataset: the image member's suffix (e.g. jpg); empty: the first image member");
  v.field("shuffle_buffer", shuffle_buffer,
          "webdataset: > 0 shuffles the shards, then samples through a buffer of this size (near-sequential reads); "
          "0 shuffles all samples uniformly");
  v.choice("on_bad_image", on_bad_image, "images: error (stop, naming the file) | skip (leave it out, counted)");
  v.list("train_transforms", train_transforms,
         "images: augmentation of training samples, albumentations' names ([[data.train_transforms]])");
  v.field("augment_preset", augment_preset,
          "images: named training augmentation added after train_transforms (before a final Normalize): xray, "
          "production_line or satellite (docs/augmentation.md lists their steps)");
  v.list("eval_transforms", eval_transforms,
         "images: preprocessing of validation/test samples and of inference ([[data.eval_transforms]])");
}

void DataOptions::validate() const {
  check_val_size(val_size);
  GB_CHECK(num_classes >= 0, InvalidArgument, "data.num_classes must be >= 0, got " << num_classes,
           "use 0 to infer it from the labels");
  GB_CHECK(limit_train == -1 || limit_train >= 1, InvalidArgument,
           "data.limit_train must be -1 (all) or >= 1, got " << limit_train, "use -1 for the whole training set");
  GB_CHECK(mean.size() == std.size(), InvalidArgument,
           "data.mean has " << mean.size() << " values but data.std has " << std.size(),
           "give both per channel, or leave both empty to compute them on the training split");
  for (std::size_t i = 0; i < std.size(); ++i) {
    GB_CHECK(std::isfinite(std[i]) && std[i] > 0, InvalidArgument, "data.std[" << i << "] must be > 0, got " << std[i],
             "standard deviations are positive");
    GB_CHECK(std::isfinite(mean[i]), InvalidArgument, "data.mean[" << i << "] must be finite, got " << mean[i], "");
  }
  GB_CHECK(channels == 0 || channels == 1 || channels == 3, InvalidArgument,
           "data.channels must be 0, 1 or 3, got " << channels, "0 keeps the images' own channel count");
  if (format == DataFormat::kWebDataset) {
    GB_CHECK(!train_shards.empty(), InvalidArgument, "data.format = \"webdataset\" needs data.train_shards",
             "e.g. train_shards = \"train-{000000..000009}.tar\" (relative to data.root)");
    GB_CHECK(shuffle_buffer >= 0, InvalidArgument, "data.shuffle_buffer must be >= 0, got " << shuffle_buffer,
             "0 shuffles uniformly; webdataset's usual buffer is 1000");
    GB_CHECK(!label_key.empty(), InvalidArgument, "data.label_key must not be empty", "e.g. \"cls\"");
  }
  if (!augment_preset.empty()) preset_transforms(augment_preset);  // an unknown name: did-you-mean
  if (is_image_format(format)) {
    GB_CHECK(test_size >= 0 && std::isfinite(test_size) && (test_size < 1 || test_size == std::floor(test_size)),
             InvalidArgument,
             "data.test_size must be a count or a fraction in (0, 1), got " << format_number(test_size),
             "use e.g. 0.2 or 500");
    if (split_by == SplitBy::kDate) {
      GB_CHECK(!date_column.empty() && !val_from.empty() && !test_from.empty(), InvalidArgument,
               "data.split_by = \"date\" needs data.date_column, data.val_from and data.test_from",
               "e.g. date_column = \"captured\", val_from = \"2024-07-01\", test_from = \"2024-08-01\"");
      GB_CHECK(val_from <= test_from, InvalidArgument,
               "data.val_from (" << val_from << ") must not come after data.test_from (" << test_from << ")",
               "validation comes before the test period");
    }
  }
  if (format == DataFormat::kCsv) {
    GB_CHECK(!label_column.empty(), InvalidArgument, "data.label_column must not be empty for format \"csv\"",
             "name the label column, e.g. \"label\"");
  }
  if (task != TaskKind::kClassification) {
    GB_CHECK(format != DataFormat::kMnist && format != DataFormat::kWebDataset, InvalidArgument,
             "data.task = \"" << name_of(task) << "\" needs real-valued targets, but data.format = \""
                              << name_of(format) << "\" carries class labels only",
             "use format npy (a [N] or [N, T] target array), csv or imagefolder (data.target_columns)");
    GB_CHECK(!(format == DataFormat::kImageFolder && target_columns.empty()), InvalidArgument,
             "data.task = \"" << name_of(task) << "\" with an image folder needs data.target_columns",
             "name the metadata.csv columns holding the targets, e.g. target_columns = [\"width_mm\"]");
    GB_CHECK(!(format == DataFormat::kCsv && task == TaskKind::kMultilabel && target_columns.empty()), InvalidArgument,
             "data.task = \"multilabel\" with csv tables needs data.target_columns",
             "name the 0/1 label columns, e.g. target_columns = [\"rust\", \"crack\"]");
    GB_CHECK(class_names.empty(), InvalidArgument,
             "data.class_names applies to classification; the targets of data.task = \""
                 << name_of(task) << "\" are named by their columns",
             "remove data.class_names (target_columns name the outputs)");
  } else {
    GB_CHECK(target_columns.empty(), InvalidArgument,
             "data.target_columns is set but data.task = \"classification\" reads one class label",
             "set data.task = \"regression\" or \"multilabel\", or use data.label_column for the class");
  }
}

namespace {

// Both CSV tables, with one feature list and one encoding of text labels.
void read_csv_splits(const DataOptions& options, RawSplit& train, RawSplit& test,
                     std::vector<std::string>& feature_names) {
  std::vector<std::string> test_names;
  train = read_csv_split(options, options.train_csv, &feature_names);
  test = read_csv_split(options, options.test_csv, &test_names);
  if (feature_names != test_names) {
    std::ostringstream a;
    std::ostringstream b;
    for (const auto& n : feature_names) a << (a.tellp() > 0 ? "," : "") << n;
    for (const auto& n : test_names) b << (b.tellp() > 0 ? "," : "") << n;
    GB_THROW(DataLoss,
             test.x_source << ": feature columns (" << b.str() << ") differ from " << train.x_source << " (" << a.str()
                           << ")",
             "the training and test tables need the same feature columns in the same order");
  }
  // Class names in the label column: one encoding for both tables.
  const bool train_text = !train.label_names.empty();
  const bool test_text = !test.label_names.empty();
  if (train_text || test_text) {
    GB_CHECK(train_text && (test_text || test.y.numel() == 0), InvalidArgument,
             (train_text ? test.y_source : train.y_source)
                 << ": labels are integers but those of " << (train_text ? train.y_source : test.y_source)
                 << " are class names",
             "use the same kind of labels (integers 0..K-1 or class names) in the training and test tables");
    if (options.class_names.empty()) {
      encode_text_labels(test, train.label_names, train.y_source);
    } else {
      encode_text_labels(train, options.class_names, "data.class_names");
      encode_text_labels(test, options.class_names, "data.class_names");
    }
  }
}

// The class count of integer labels (checked against data.num_classes and the class names) and
// the class names.
std::int64_t classification_classes(const DataOptions& options, const RawSplit& train, const RawSplit& test,
                                    std::vector<std::string>& class_names) {
  std::int64_t num_classes = std::max<std::int64_t>(
      std::max(train.y.max().item<std::int64_t>(), test.y.numel() > 0 ? test.y.max().item<std::int64_t>() : 0) + 1, 1);
  if (options.num_classes > 0) {
    if (options.check_labels) {
      for (const RawSplit* s : {&train, &test}) {
        if (s->y.numel() == 0) continue;
        const std::int64_t* p = s->y.const_data_ptr<std::int64_t>();
        for (std::int64_t i = 0; i < s->y.numel(); ++i) {
          GB_CHECK(p[i] < options.num_classes, InvalidArgument,
                   s->y_source << ": label " << p[i] << " of sample " << i
                               << " is out of range for data.num_classes = " << options.num_classes,
                   "labels must be 0.." + std::to_string(options.num_classes - 1) +
                       " (run glassbox doctor to see all of them)");
        }
      }
    }
    num_classes = options.num_classes;
  }
  if (!options.class_names.empty()) {
    const auto k = static_cast<std::int64_t>(options.class_names.size());
    GB_CHECK(k >= num_classes, InvalidArgument,
             "data.class_names has " << k << " names but the labels go up to " << num_classes - 1,
             "give one name per class (" + std::to_string(num_classes) + " names)");
    num_classes = k;
    class_names = options.class_names;
  } else if (!train.label_names.empty()) {
    const auto k = static_cast<std::int64_t>(train.label_names.size());
    GB_CHECK(
        k >= num_classes, InvalidArgument,
        "data.num_classes is " << num_classes << " but the labels of " << train.y_source << " name " << k << " classes",
        "leave data.num_classes = 0, or list every class in data.class_names");
    num_classes = k;
    class_names = train.label_names;
  } else if (num_classes == 10 && contains_fashion(options.root)) {
    class_names = kFashionMnistClasses;
  } else {
    for (std::int64_t i = 0; i < num_classes; ++i) class_names.push_back(std::to_string(i));
  }

  return num_classes;
}

}  // namespace

Splits load_splits(const DataOptions& options) {
  options.validate();
  if (options.format == DataFormat::kImageFolder) return load_image_folder(options);
  if (options.format == DataFormat::kWebDataset) return load_webdataset(options);
  RawSplit train;
  RawSplit test;
  std::vector<std::string> feature_names;
  switch (options.format) {
    case DataFormat::kMnist:
      train = read_mnist(options, options.train_images, options.train_labels);
      test = read_mnist(options, options.test_images, options.test_labels);
      break;
    case DataFormat::kNpy:
      train = read_npy_split(options, options.train_x, options.train_y);
      test = read_npy_split(options, options.test_x, options.test_y);
      break;
    case DataFormat::kCsv: read_csv_splits(options, train, test, feature_names); break;
    case DataFormat::kImageFolder:
    case DataFormat::kWebDataset: break;  // returned above
  }
  GB_CHECK(train.x.size(0) > 0, DataLoss, train.x_source << ": the training set is empty", "check the data files");
  const auto shape_of = [](const at::Tensor& x) {
    auto s = x.sizes();
    return std::vector<std::int64_t>(s.begin() + 1, s.end());
  };
  const std::vector<std::int64_t> sample_shape = shape_of(train.x);
  if (shape_of(test.x) != sample_shape) {
    GB_THROW(DataLoss,
             test.x_source << ": test samples have shape " << c10::IntArrayRef(shape_of(test.x))
                           << " but training samples " << c10::IntArrayRef(sample_shape) << " (" << train.x_source
                           << ")",
             "the training and test inputs must have the same sample shape");
  }
  Splits out;
  out.task = options.task;
  std::int64_t num_classes = 0;
  if (options.task != TaskKind::kClassification) {
    num_classes = train.y.size(1);
    GB_CHECK(test.y.size(1) == num_classes, DataLoss,
             test.y_source << " has " << test.y.size(1) << " targets per sample but " << train.y_source << " has "
                           << num_classes,
             "the training and test targets must have the same columns");
    if (!options.target_columns.empty()) {
      out.class_names = options.target_columns;
    } else if (options.format == DataFormat::kCsv) {
      out.class_names = {options.label_column};
    } else {
      for (std::int64_t i = 0; i < num_classes; ++i) out.class_names.push_back(std::to_string(i));
    }
    GB_CHECK(static_cast<std::int64_t>(out.class_names.size()) == num_classes, InvalidArgument,
             "data.target_columns names " << out.class_names.size() << " targets but " << train.y_source << " has "
                                          << num_classes,
             "name one column per target");
  } else {
    if (options.check_labels) {
      check_labels_non_negative(train);
      check_labels_non_negative(test);
    }
    num_classes = classification_classes(options, train, test, out.class_names);
  }

  // limit_train, then the seeded validation split.
  at::Tensor x = train.x;
  at::Tensor y = train.y;
  if (options.limit_train > 0 && options.limit_train < x.size(0)) {
    x = x.slice(0, 0, options.limit_train).clone();  // frees the rest of the training set
    y = y.slice(0, 0, options.limit_train).clone();
  }
  const std::int64_t n = x.size(0);
  const std::int64_t n_val = val_count(options.val_size, n);
  at::Tensor x_train = x;
  at::Tensor y_train = y;
  at::Tensor x_val;
  at::Tensor y_val;
  if (n_val > 0) {
    auto [tr, va] = random_split_indices(n, n_val, static_cast<std::uint64_t>(options.split_seed));
    x_train = x.index_select(0, tr);
    y_train = y.index_select(0, tr);
    x_val = x.index_select(0, va);
    y_val = y.index_select(0, va);
  } else {
    x_train = x.contiguous();  // owned here: normalised in place below
    y_train = y.contiguous();
  }
  train.x = at::Tensor();
  x = at::Tensor();
  at::Tensor x_test = test.x;

  // Normalisation with the training split's statistics, per channel (dim 1).
  if (options.normalize) {
    const std::int64_t c = x_train.size(1);
    at::Tensor mean;
    at::Tensor stdev;
    if (!options.mean.empty()) {
      const auto k = static_cast<std::int64_t>(options.mean.size());
      GB_CHECK(k == c || k == 1, InvalidArgument,
               "data.mean has " << k << " values but the inputs have " << c
                                << (x_train.dim() == 2 ? " features" : " channels"),
               "give one value per channel (or one for all)");
      mean = at::tensor(options.mean, at::kDouble).expand({c}).contiguous();
      stdev = at::tensor(options.std, at::kDouble).expand({c}).contiguous();
    } else {
      std::vector<std::int64_t> dims{0};
      for (std::int64_t d = 2; d < x_train.dim(); ++d) dims.push_back(d);
      // Over the finite values only: a NaN or Inf stays in its sample instead of spreading to all.
      const at::Tensor finite = at::isfinite(x_train);
      const at::Tensor zero = at::zeros({}, x_train.options());
      const at::Tensor count = finite.sum(dims).to(at::kDouble).clamp_min(1);
      mean = at::where(finite, x_train, zero).sum(dims, false, at::kDouble) / count;
      std::vector<std::int64_t> view_c(static_cast<std::size_t>(x_train.dim()), 1);
      view_c[1] = c;
      const at::Tensor dev = at::where(finite, x_train - mean.to(at::kFloat).view(view_c), zero);
      // A constant channel keeps its scale (std 1) instead of dividing by zero.
      stdev = (dev.square().sum(dims, false, at::kDouble) / count).sqrt();
      stdev = at::where(stdev > 1e-12, stdev, at::ones_like(stdev));
    }
    std::vector<std::int64_t> view(static_cast<std::size_t>(x_train.dim()), 1);
    view[1] = c;
    const at::Tensor mf = mean.to(at::kFloat).view(view);
    const at::Tensor sf = stdev.to(at::kFloat).view(view);
    x_train.sub_(mf).div_(sf);
    if (x_val.defined()) x_val.sub_(mf).div_(sf);
    x_test.sub_(mf).div_(sf);
    out.mean = to_vector(mean);
    out.std = to_vector(stdev);
  }

  out.train = std::make_shared<TensorDataset>(x_train, y_train, num_classes);
  if (x_val.defined()) out.val = std::make_shared<TensorDataset>(x_val, y_val, num_classes);
  out.test = std::make_shared<TensorDataset>(x_test, test.y, num_classes);
  out.num_classes = num_classes;
  out.sample_shape = sample_shape;
  out.feature_names = std::move(feature_names);
  return out;
}

}  // namespace glassbox::data
