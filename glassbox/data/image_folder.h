// image_folder: folders of image files as data sets, decoded and augmented per sample on demand.
//
//   [data]
//   format = "imagefolder"
//   root = "leaves"          # leaves/<class>/**/*.jpg, or leaves/train|val|test/<class>/..., or a metadata.csv
//   [[data.train_transforms]]
//   name = "RandomResizedCrop"
//   size = [224, 224]
//   [[data.eval_transforms]]
//   name = "Resize"
//   height = 224
//   width = 224
//
//   Splits s = load_splits(options);   // s.train is an ImageDataset reading the files lazily
//
// Layouts, in the order `split_by = "auto"` tries them:
// - train/, val/ (or validation/, valid/), test/ folders under root, each holding class folders;
// - a metadata.csv under root (Hugging Face's imagefolder convention): a file_name column (paths
//   relative to root), the label column (data.label_column; without it the first folder of
//   file_name names the class) and optionally the split column (train | val | validation | test)
//   and a date column (ISO 8601, for split_by = "date": date < val_from trains, val_from <= date <
//   test_from validates, test_from <= date tests);
// - class folders directly under root, split with a seeded stratified draw: data.test_size for the
//   test split, then data.val_size of the rest for validation (counts or fractions).
// WebDataset shards (format = "webdataset"): data.train_shards (and val_shards, test_shards;
// brace-expanded, relative to root) are indexed at load (webdataset.h), each sample's image
// being its first member with an image extension (or data.image_key) and its label the
// data.label_key member (an integer, or a class name; "json": the field data.label_column of the
// .json member). Classes are data.class_names, else classes.txt beside the first training shard,
// else 0..max label. Missing val/test shards are carved from the training samples as below. The
// training order is a uniform shuffle, or with data.shuffle_buffer = N webdataset's: the shards
// shuffled, then a buffer of N samples (shuffled_order) - near-sequential reads, the same batches
// for any number of workers.
// Classes are the sorted class-folder names (torchvision's ImageFolder), or the sorted label
// values of metadata.csv (numerically when they are all integers). Files are found recursively
// with is_image_file's extensions, in torchvision's order (by folder, then by name); hidden
// folders (".ipynb_checkpoints") are not classes. An empty class folder, an unreadable folder or
// a metadata row naming a missing file is an error naming it.
// Decoding and transforms: each sample is decoded (data.channels), run through the split's
// pipeline (train_transforms with the draws of sample_seed(epoch seed, index); eval_transforms,
// which should be deterministic, for validation and test), and made a float32 [C, H, W] tensor:
// a Normalize step's output as it is, else pixels / 255 normalised with data.mean/std (computed on
// up to 10 000 training images through the eval pipeline when not given). Every sample of a split
// must come out with the same shape (else an error naming the file and a hint to add Resize).
// Bad files: with on_bad_image = "error" every file's first and last bytes are checked at load (empty,
// cut short, not an image, an unsupported TIFF channel count: an error naming it before training
// starts) and a file that still fails to decode fails the batch that reads it; with "skip"
// every file is decoded once at load and the ones that fail are left out (Splits::skipped_files).
// Thread safety: an ImageDataset is immutable; get_batch is called from loader workers at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "glassbox/data/augment.h"
#include "glassbox/data/dataset.h"
#include "glassbox/data/image.h"
#include "glassbox/data/source.h"

namespace glassbox::data {

struct ImageDatasetOptions {
  std::int64_t channels = 3;                 // 1 or 3
  std::shared_ptr<const Pipeline> pipeline;  // may be null (no transforms)
  bool pipeline_normalizes = false;          // the pipeline ends in float32 (Normalize)
  std::vector<double> mean, std;             // applied to pixels / 255 when the pipeline does not normalise
  std::vector<std::int64_t> sample_shape;    // {C, H, W} every sample must have
  std::int64_t num_classes = 0;
  std::int64_t shuffle_buffer = 0;  // > 0 with shards: webdataset's shard shuffle + buffer order
};

class ImageDataset final : public Dataset {
 public:
  // shard_of: each sample's shard (webdataset), for the shard-then-buffer order; empty otherwise.
  ImageDataset(std::vector<ImageRef> files, at::Tensor labels, ImageDatasetOptions options,
               std::vector<std::int64_t> shard_of = {});
  std::int64_t size() const override { return static_cast<std::int64_t>(files_.size()); }
  Batch get_batch(const at::Tensor& indices) const override { return get_epoch_batch(indices, 0); }
  Batch get_epoch_batch(const at::Tensor& indices, std::uint64_t epoch_seed) const override;
  std::vector<std::int64_t> sample_shape() const override { return options_.sample_shape; }
  std::int64_t num_classes() const override { return options_.num_classes; }
  at::Tensor all_targets() const override { return labels_; }
  at::Tensor shuffled_order(std::uint64_t epoch_seed) const override;

  // Sample i decoded and transformed (8-bit or float32 HWC), before it becomes a tensor.
  Sample sample(std::int64_t i, std::uint64_t epoch_seed) const;
  // The float32 [C, H, W] tensor of a transformed sample (checked against sample_shape).
  at::Tensor to_tensor(const Sample& s, const ImageRef& file) const;
  const std::vector<ImageRef>& files() const { return files_; }
  const ImageDatasetOptions& options() const { return options_; }

 private:
  // Sample i through the pipeline's steps [0, end).
  Sample transformed(std::int64_t i, std::uint64_t epoch_seed, std::size_t end) const;
  // Writes a transformed sample as float32 CHW at `out` (its shape checked against `want`), through
  // `planar` (the pipeline's last step, not yet applied) when given.
  void write_chw(const Sample& s, const ImageRef& file, const std::vector<std::int64_t>& want, float* out,
                 const PlanarStep* planar) const;

  std::vector<ImageRef> files_;
  at::Tensor labels_;
  ImageDatasetOptions options_;
  std::vector<std::int64_t> shard_of_;
};

// The training pipeline's steps: train_transforms with the augment_preset's steps added at the end
// (before a final Normalize).
std::vector<TransformSpec> training_transforms(const DataOptions& options);

// The splits of an image folder (load_splits calls this for format = "imagefolder").
Splits load_image_folder(const DataOptions& options);
// The splits of WebDataset tar shards (format = "webdataset").
Splits load_webdataset(const DataOptions& options);

}  // namespace glassbox::data
