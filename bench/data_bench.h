// `glassbox bench data`: the image pipeline's throughput against what a Python user would pick,
// all measured in one run on the same JPEG files (photographs of scikit-learn's sample images,
// china.jpg and flower.jpg from the project's .venv, cropped and flipped to 500x375, quality 90):
//   transforms  single-thread images/s of every glassbox transform (p = 1, albumentations'
//               default parameters; sizes that need a value are 224) on decoded RGB uint8 images,
//               against albumentations 2.0.8 and, where it has the transform,
//               torchvision.transforms.v2 on CHW uint8 tensors (bench/data_bench.py); each figure
//               is the best of `repeats` windows of `window` seconds (wall time; the rate counts
//               the time inside the transform only)
//   pipeline    decode + RandomResizedCrop(224) + HorizontalFlip + Normalize in batches of 32 with
//               W workers: glassbox's ImageDataset + Loader against torch.utils.data.DataLoader
//               over a cv2 + albumentations Dataset (persistent workers; the first batches, which
//               hold the workers' start-up, are not measured)
//   decode      the same loaders reading and decoding only: the ceiling of the pipeline
// Ratios: transforms.<Name>.ratio (glassbox / albumentations), transforms_geomean_ratio,
// pipeline.w<W>.ratio_vs_dataloader, pipeline_vs_decode_limit.w<W> (glassbox's pipeline over its
// decode). The goals it is judged against are reported under "goals".
//
//   DataBenchOptions o; o.window = 0.2; o.transforms = {"HorizontalFlip"};
//   nlohmann::json r = run_data_bench(o);   // r["transforms"]["HorizontalFlip"]["ratio"], ...
//   print_data_bench(r, std::cout);
//
// Thread safety: one benchmark at a time per process (it sets LibTorch's and OpenCV's thread counts).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::bench {

struct DataBenchOptions {
  double window = 1.0;                      // seconds per measured window
  std::int64_t repeats = 3;                 // best of N windows
  std::int64_t images = 256;                // JPEG files written for the loaders (at least 64)
  std::int64_t transform_images = 16;       // distinct decoded images the transform timings cycle through
  std::vector<std::int64_t> workers{1, 2};  // loader worker counts
  std::vector<std::string> transforms;      // empty: every glassbox transform (composites aside)
  bool skip_transforms = false;
  bool skip_loaders = false;
  bool skip_python = false;
  std::string python;           // default: <source>/.venv/bin/python
  std::string source_dir;       // default: the compile-time source dir
  std::ostream* log = nullptr;  // progress lines; null: quiet

  // InvalidArgument naming the option.
  void validate() const;
};

// Runs the benchmark. Throws glassbox::Error when the sample images are missing or the Python
// anchor fails (with the tail of its output).
nlohmann::json run_data_bench(const DataBenchOptions& options);

// A human table of the result.
void print_data_bench(const nlohmann::json& result, std::ostream& out);

}  // namespace glassbox::bench
