// Data-set workflows behind `glassbox data`: write any data set glassbox reads as an image folder.
//
//   WriteImagesRequest r; r.config = "configs/quickstart.toml"; r.out = "/tmp/fmnist-png";
//   WriteImagesOutcome o = write_images(r);   // /tmp/fmnist-png/train/<class>/00000.png, test/...
//
// The splits are written as loaded (validation goes back into train unless keep_val), un-normalised,
// as 8-bit PNG (or JPEG): mnist and uint8 npy images exactly, float images clamped to [0, 1] and
// scaled to 0..255. Class folders are the class names with '/' made '_' (sorted, they are the
// folder's classes when read back). Nothing is written unless the whole folder could be: it is
// built beside `out` and moved into place; an existing `out` is refused.
// Thread safety: one call per thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/data/source.h"

namespace glassbox::app {

struct WriteImagesRequest {
  std::filesystem::path config;        // a training config (its [data] section is read)
  std::vector<std::string> overrides;  // --set
  std::filesystem::path out;
  std::string image_format = "png";  // png | jpg
  int jpeg_quality = 95;
  bool keep_val = false;   // write the validation split as val/ instead of folding it into train/
  std::int64_t limit = 0;  // > 0: at most this many images per split (the first ones)
};

struct WriteImagesOutcome {
  std::filesystem::path out;
  std::map<std::string, std::int64_t> images;  // per split
  std::vector<std::string> classes;            // folder names
};

WriteImagesOutcome write_images(const WriteImagesRequest& request);

// `glassbox data pack`: images as WebDataset tar shards.
//
//   PackRequest r; r.source = "leaves"; r.out = "shards/train-%06d.tar";
//   PackOutcome o = pack_shards(r);   // shards/train-000000.tar ..., shards/classes.txt
//
// The source is an image folder (any layout data.format = "imagefolder" reads) or a training
// config (its image folder or shards; --set applies). Each sample is KEY.EXT, the image's bytes
// as stored (not re-encoded), and KEY.cls, the class index; KEY is the image's path relative to
// the folder without its extension (dots made '_', so webdataset keeps it whole). Every image is
// decoded first: one that does not decode stops the pack naming it (data.on_bad_image = "skip"
// leaves it out, counted). Samples are shuffled with shuffle_seed (-1 keeps the folder's order),
// so each shard mixes the classes, as a shard shuffle with a small buffer needs. Shards follow
// webdataset's ShardWriter (maxcount samples or maxsize bytes each); "{split}" in the pattern
// writes every split to its own shards, otherwise `split` names the one written. classes.txt
// (one class name per line) goes beside the shards. Nothing is overwritten; shards are written as
// NAME.partial and renamed when all are complete, so a failed pack leaves nothing behind.
struct PackRequest {
  std::filesystem::path source;        // an image folder, or a training config (.toml / .json)
  std::vector<std::string> overrides;  // --set, for a config
  std::string out;                     // e.g. "shards/train-%06d.tar" or "shards/{split}-%06d.tar"
  std::string split = "train";         // train | val | test, when out has no {split}
  std::int64_t maxcount = 100000;
  double maxsize = 3e9;
  std::int64_t shuffle_seed = 42;
};
struct PackOutcome {
  std::map<std::string, std::vector<std::string>> shards;  // per split
  std::map<std::string, std::int64_t> samples;             // per split
  std::vector<std::string> classes;
  std::vector<std::string> skipped;  // images left out, and why
};
PackOutcome pack_shards(const PackRequest& request);

// `glassbox data synth defects`: a seeded synthetic industrial-defect set, for trying the
// image workflow without data of one's own.
//
//   SynthRequest r; r.out = "parts"; r.images = 800;
//   SynthOutcome o = synth_defects(r);   // parts/<class>/<class>-NNNNNN.png, parts/metadata.csv
//
// Backlit, partly over-exposed metal washers with a threaded bore, in four imbalanced classes:
// ok 32 %, crack 28 % (thin dark lines drawn at a quarter pixel to a pixel wide), rust 22 %
// (orange-brown blotches), thread_damage 18 % (a flattened sector of the threads); exact counts by
// largest remainders. metadata.csv (file_name, label, captured) dates the images evenly over
// `days` from `start` in a shuffled class order, for split_by = "date". Image i is drawn from
// sample_seed(seed, i) alone: the same request writes the same bytes. The folder is built beside
// `out` and moved into place; an existing `out` is refused.
struct SynthRequest {
  std::filesystem::path out;
  std::int64_t images = 800;
  std::int64_t size = 96;  // pixels per side
  std::int64_t seed = 0;
  std::string start = "2025-01-06";
  std::int64_t days = 240;
};
struct SynthOutcome {
  std::filesystem::path out;
  std::map<std::string, std::int64_t> per_class;
  std::string first_date, last_date;
};
SynthOutcome synth_defects(const SynthRequest& request);

// `glassbox data preview`: what the training pipeline makes of a few images, as one PNG grid.
// Each row is one training image: first as the eval pipeline shows it, then `variants` draws of
// the training pipeline (the draws of epochs 0, 1, ...; a final Normalize is left out so the
// pixels stay viewable). Cells are padded to the largest one; gray images are drawn as gray.
struct PreviewRequest {
  std::filesystem::path config;
  std::vector<std::string> overrides;
  std::filesystem::path out;  // the PNG to write
  std::int64_t samples = 8;   // rows: the first training images of a seeded shuffle
  std::int64_t variants = 6;  // augmented columns per row
  std::int64_t seed = 0;
};
struct PreviewOutcome {
  std::filesystem::path out;
  std::int64_t rows = 0, columns = 0, width = 0, height = 0;
};
PreviewOutcome preview_augmentation(const PreviewRequest& request);

// `glassbox data inspect`: what an image folder holds, read file by file (in parallel).
//
//   nlohmann::json j = inspect_data({"configs/leaves.toml", {}});
//
// Per split: images and images per class; image sizes (min, max, the most common) and stored
// channel counts; per-channel mean/std of the training images' pixels / 255 (what data.mean/std
// take); files that do not decode (with why); files with identical bytes in two splits (a leak of
// test images into training) or twice in one split. Other data formats get the counts and the
// statistics of their tensors.
struct InspectRequest {
  std::filesystem::path config;
  std::vector<std::string> overrides;
};
nlohmann::json inspect_data(const InspectRequest& request);
// The report as text, a few lines per topic.
std::string format_inspection(const nlohmann::json& report);

// InvalidArgument naming `command` when the data's task has no class labels (write-images, pack
// and inspect lay data out or count it by class).
void require_class_labels(const data::DataOptions& d, const std::string& command);

}  // namespace glassbox::app
