// Tested by images_test.cpp.
#include "glassbox/app/data.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/progress.h"
#include "glassbox/data/image.h"
#include "glassbox/data/image_folder.h"
#include "glassbox/data/loader.h"
#include "glassbox/data/source.h"
#include "glassbox/train/run_config.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

std::string folder_name(std::string name) {
  for (char& c : name)
    if (c == '/' || c == '\\' || c == ':') c = '_';
  return name.empty() || name == "." || name == ".." ? "class_" + name : name;
}

}  // namespace

void require_class_labels(const data::DataOptions& d, const std::string& command) {
  GB_CHECK(d.task == TaskKind::kClassification, InvalidArgument,
           command << " lays the data out by class, but data.task = \"" << name_of(d.task) << "\" has no classes",
           "use it on classification data; the targets of this data set are in its own files already");
}

WriteImagesOutcome write_images(const WriteImagesRequest& r) {
  GB_CHECK(r.image_format == "png" || r.image_format == "jpg", InvalidArgument,
           "--format must be png or jpg, got " << r.image_format, "use png (lossless) or jpg");
  GB_CHECK(!r.out.empty(), InvalidArgument, "no output folder given", "pass --out DIR");
  std::error_code ec;
  GB_CHECK(!fs::exists(r.out, ec), AlreadyExists, r.out.string() << " already exists",
           "choose a new folder; glassbox does not write into an existing one");
  train::RunConfig cfg = train::load_run_config(r.config, r.overrides);
  data::DataOptions d = cfg.data.source;
  require_class_labels(d, "glassbox data write-images");
  d.normalize = false;  // the images as stored
  if (!r.keep_val) d.val_size = 0;
  const data::Splits s = data::load_splits(d);

  WriteImagesOutcome o;
  o.out = r.out;
  for (std::int64_t k = 0; k < s.num_classes; ++k) {
    const std::string name = k < static_cast<std::int64_t>(s.class_names.size()) ? s.class_names[k] : std::to_string(k);
    o.classes.push_back(folder_name(name));
  }
  const fs::path built = temp_sibling(r.out);
  fs::create_directories(built);
  try {
    const std::vector<std::pair<std::string, std::shared_ptr<const data::Dataset>>> splits = {
        {"train", s.train}, {"val", s.val}, {"test", s.test}};
    for (const auto& [split, ds] : splits) {
      if (!ds || ds->size() == 0) continue;
      GB_CHECK(ds->sample_shape().size() == 3 && (ds->sample_shape()[0] == 1 || ds->sample_shape()[0] == 3),
               InvalidArgument,
               "the data of " << r.config.string() << " are not 1- or 3-channel images (sample shape "
                              << c10::IntArrayRef(ds->sample_shape()) << ")",
               "write_images writes image data sets; tabular data stay CSV");
      for (const auto& c : o.classes) fs::create_directories(built / split / c);
      const std::int64_t n = r.limit > 0 ? std::min(r.limit, ds->size()) : ds->size();
      const int digits = std::max<int>(5, static_cast<int>(std::to_string(n).size()));
      ProgressBar bar(std::cerr, n > 2000);
      bar.start("writing " + split, n);
      for (std::int64_t start = 0; start < n; start += 256) {
        const std::int64_t end = std::min(n, start + 256);
        const data::Batch b = ds->get_batch(torch::arange(start, end, torch::kLong));
        const at::Tensor px = (b.inputs.clamp(0, 1) * 255).round().to(torch::kUInt8).cpu();
        for (std::int64_t i = 0; i < end - start; ++i) {
          const cv::Mat img = data::tensor_to_image(px[i]);
          const std::int64_t label = b.targets[i].item<std::int64_t>();
          const fs::path file = built / split / o.classes.at(static_cast<std::size_t>(label)) /
                                fmt::format("{:0{}d}.{}", start + i, digits, r.image_format);
          // Plain writes: the folder is private until replace_dir_atomic moves it into place.
          const std::string bytes =
              r.image_format == "png" ? data::encode_png(img) : data::encode_jpeg(img, r.jpeg_quality);
          std::ofstream f(file, std::ios::binary);
          f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
          GB_CHECK(f.good(), ResourceExhausted, "cannot write " << file.string(), "check the free disk space");
        }
        bar.update(end, "", 0.0);
      }
      bar.finish(fmt::format("{} images", n));
      o.images[split] = n;
    }
    replace_dir_atomic(built, r.out);
  } catch (...) {
    fs::remove_all(built, ec);
    throw;
  }
  return o;
}

namespace {

// FNV-1a over the bytes: identical files have equal hashes (equal hashes are then compared byte
// for byte before being reported).
std::uint64_t fnv1a(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

struct FileFacts {
  std::string split;
  std::int64_t label = 0;
  std::uint64_t hash = 0;
  int height = 0, width = 0, channels = 0;
  std::string error;
};

nlohmann::json inspect_images(const data::Splits& s, const data::DataOptions& d) {
  std::vector<std::pair<std::string, const data::ImageDataset*>> splits;
  for (const auto& [name, ds] : {std::pair{"train", s.train}, std::pair{"val", s.val}, std::pair{"test", s.test}})
    if (ds) splits.emplace_back(name, dynamic_cast<const data::ImageDataset*>(ds.get()));
  std::vector<data::ImageRef> files;
  std::vector<FileFacts> facts;
  for (const auto& [name, ds] : splits) {
    const at::Tensor y = ds->all_targets();
    for (std::int64_t i = 0; i < ds->size(); ++i) {
      files.push_back(ds->files()[static_cast<std::size_t>(i)]);
      FileFacts f;
      f.split = name;
      f.label = y[i].item<std::int64_t>();
      facts.push_back(f);
    }
  }
  const auto channels = static_cast<std::size_t>(s.sample_shape.empty() ? 3 : s.sample_shape[0]);
  std::mutex mu;
  std::vector<double> sum(channels, 0.0), sq(channels, 0.0);
  double pixels = 0;
  ProgressBar bar(std::cerr, files.size() > 2000);
  bar.start("inspecting", static_cast<std::int64_t>(files.size()));
  std::atomic<std::int64_t> done{0};
  at::parallel_for(0, static_cast<std::int64_t>(files.size()), 32, [&](std::int64_t b, std::int64_t e) {
    std::vector<double> ls(channels, 0.0), lq(channels, 0.0);
    double lp = 0;
    for (std::int64_t i = b; i < e; ++i) {
      FileFacts& f = facts[static_cast<std::size_t>(i)];
      try {
        const std::string bytes = data::read_encoded(files[static_cast<std::size_t>(i)]);
        f.hash = fnv1a(bytes);
        const cv::Mat stored = data::decode_image(bytes, files[static_cast<std::size_t>(i)].name(), 0);
        f.height = stored.rows;
        f.width = stored.cols;
        f.channels = stored.channels();
        if (f.split == "train") {
          cv::Mat img = stored;
          if (static_cast<std::size_t>(img.channels()) != channels)
            img = data::decode_image(bytes, files[static_cast<std::size_t>(i)].name(), static_cast<int>(channels));
          cv::Mat dbl;
          img.convertTo(dbl, CV_64F, 1.0 / 255.0);
          cv::Scalar m, sd;
          cv::meanStdDev(dbl, m, sd);
          const double px = static_cast<double>(dbl.total());
          for (std::size_t c = 0; c < channels && c < 4; ++c) {
            ls[c] += m[static_cast<int>(c)] * px;
            lq[c] +=
                (sd[static_cast<int>(c)] * sd[static_cast<int>(c)] + m[static_cast<int>(c)] * m[static_cast<int>(c)]) *
                px;
          }
          lp += px;
        }
      } catch (const Error& err) {
        f.error = err.message();
      }
      ++done;
    }
    std::lock_guard<std::mutex> lk(mu);
    for (std::size_t c = 0; c < channels; ++c) {
      sum[c] += ls[c];
      sq[c] += lq[c];
    }
    pixels += lp;
    bar.update(done.load(), "", 0.0);
  });
  bar.finish(fmt::format("{} files", files.size()));

  nlohmann::json j;
  j["format"] = std::string(name_of(d.format));
  j["root"] = d.root;
  j["classes"] = s.class_names;
  j["files"] = files.size();
  nlohmann::json per_split = nlohmann::json::object();
  std::map<std::string, int> sizes;
  std::map<int, std::int64_t> chans;
  int min_h = 0, min_w = 0, max_h = 0, max_w = 0;
  nlohmann::json corrupt = nlohmann::json::array();
  for (std::size_t i = 0; i < facts.size(); ++i) {
    const FileFacts& f = facts[i];
    auto& sp = per_split[f.split];
    if (!sp.contains("images")) {
      sp["images"] = 0;
      sp["per_class"] = std::vector<std::int64_t>(s.class_names.size(), 0);
    }
    sp["images"] = sp["images"].get<std::int64_t>() + 1;
    sp["per_class"][static_cast<std::size_t>(f.label)] =
        sp["per_class"][static_cast<std::size_t>(f.label)].get<std::int64_t>() + 1;
    if (!f.error.empty()) {
      corrupt.push_back({{"file", files[i].name()}, {"split", f.split}, {"error", f.error}});
      continue;
    }
    sizes[fmt::format("{}x{}", f.height, f.width)] += 1;
    ++chans[f.channels];
    if (min_h == 0 || f.height * f.width < min_h * min_w) min_h = f.height, min_w = f.width;
    if (f.height * f.width > max_h * max_w) max_h = f.height, max_w = f.width;
  }
  j["splits"] = per_split;
  std::vector<std::pair<int, std::string>> common;
  for (const auto& [k, n] : sizes) common.emplace_back(n, k);
  std::sort(common.rbegin(), common.rend());
  nlohmann::json size_j = {{"smallest", fmt::format("{}x{}", min_h, min_w)},
                           {"largest", fmt::format("{}x{}", max_h, max_w)},
                           {"distinct", sizes.size()}};
  nlohmann::json top = nlohmann::json::array();
  for (std::size_t i = 0; i < common.size() && i < 5; ++i)
    top.push_back({{"size", common[i].second}, {"count", common[i].first}});
  size_j["most_common"] = top;
  j["sizes_hxw"] = size_j;
  nlohmann::json ch = nlohmann::json::object();
  for (const auto& [c, n] : chans) ch[std::to_string(c)] = n;
  j["stored_channels"] = ch;
  std::vector<double> mean(channels), stdev(channels);
  for (std::size_t c = 0; c < channels; ++c) {
    mean[c] = sum[c] / std::max(pixels, 1.0);
    stdev[c] = std::sqrt(std::max(0.0, sq[c] / std::max(pixels, 1.0) - mean[c] * mean[c]));
  }
  j["train_mean"] = mean;
  j["train_std"] = stdev;
  j["corrupt"] = corrupt;
  // Identical files: equal hashes, then equal bytes.
  std::map<std::uint64_t, std::vector<std::size_t>> by_hash;
  for (std::size_t i = 0; i < facts.size(); ++i)
    if (facts[i].error.empty()) by_hash[facts[i].hash].push_back(i);
  nlohmann::json across = nlohmann::json::array(), within = nlohmann::json::array();
  for (const auto& [h, idx] : by_hash) {
    if (idx.size() < 2) continue;
    const std::string first = data::read_encoded(files[idx[0]]);
    std::vector<std::size_t> same{idx[0]};
    for (std::size_t k = 1; k < idx.size(); ++k)
      if (data::read_encoded(files[idx[k]]) == first) same.push_back(idx[k]);
    if (same.size() < 2) continue;
    nlohmann::json group = nlohmann::json::array();
    std::set<std::string> in;
    for (std::size_t i : same) {
      group.push_back({{"file", files[i].name()}, {"split", facts[i].split}});
      in.insert(facts[i].split);
    }
    (in.size() > 1 ? across : within).push_back(group);
  }
  j["identical_across_splits"] = across;
  j["identical_within_a_split"] = within;
  return j;
}

nlohmann::json inspect_tensors(const data::Splits& s, const data::DataOptions& d) {
  nlohmann::json j;
  j["format"] = std::string(name_of(d.format));
  j["root"] = d.root;
  j["classes"] = s.class_names;
  j["sample_shape"] = s.sample_shape;
  nlohmann::json per_split = nlohmann::json::object();
  for (const auto& [name, ds] : {std::pair{"train", s.train}, std::pair{"val", s.val}, std::pair{"test", s.test}}) {
    if (!ds) continue;
    const at::Tensor y = ds->all_targets();
    std::vector<std::int64_t> counts(s.class_names.size(), 0);
    if (y.defined())
      for (std::int64_t i = 0; i < y.numel(); ++i) {
        const auto k = static_cast<std::size_t>(y[i].item<std::int64_t>());
        if (k < counts.size()) ++counts[k];
      }
    per_split[name] = {{"images", ds->size()}, {"per_class", counts}};
  }
  j["splits"] = per_split;
  if (const auto* t = dynamic_cast<const data::TensorDataset*>(s.train.get())) {
    const at::Tensor x = t->inputs().to(torch::kDouble);
    std::vector<std::int64_t> dims{0};
    for (std::int64_t k = 2; k < x.dim(); ++k) dims.push_back(k);
    const at::Tensor m = x.mean(dims), sd = x.std(dims, /*unbiased=*/false);
    j["train_mean"] = std::vector<double>(m.data_ptr<double>(), m.data_ptr<double>() + m.numel());
    j["train_std"] = std::vector<double>(sd.data_ptr<double>(), sd.data_ptr<double>() + sd.numel());
  }
  return j;
}

}  // namespace

PreviewOutcome preview_augmentation(const PreviewRequest& r) {
  GB_CHECK(r.samples >= 1 && r.variants >= 1, InvalidArgument,
           "--samples and --variants must be >= 1, got " << r.samples << " and " << r.variants, "use e.g. 8 and 6");
  GB_CHECK(!r.out.empty(), InvalidArgument, "no output file given", "pass --out grid.png");
  train::RunConfig cfg = train::load_run_config(r.config, r.overrides);
  data::DataOptions d = cfg.data.source;
  GB_CHECK(data::is_image_format(d.format), InvalidArgument,
           "data preview shows image pipelines; " << r.config.string() << " reads " << name_of(d.format) << " data",
           "set data.format = \"imagefolder\" and the transforms in [[data.train_transforms]]");
  const auto viewable = [](std::vector<data::TransformSpec> specs) {
    if (!specs.empty() && specs.back().name == "Normalize") specs.pop_back();
    return specs;
  };
  d.normalize = false;
  d.check_images = false;  // only the images shown are read
  d.on_bad_image = data::OnBadImage::kError;
  d.train_transforms = viewable(data::training_transforms(d));  // with the preset's steps
  d.augment_preset.clear();
  d.eval_transforms = viewable(d.eval_transforms);
  const data::Splits s = data::load_splits(d);
  const auto& train = dynamic_cast<const data::ImageDataset&>(*s.train);
  const data::Pipeline eval = data::make_pipeline(d.eval_transforms, "data.eval_transforms");
  const data::Pipeline aug = data::make_pipeline(d.train_transforms, "data.train_transforms");
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(r.seed));
  const at::Tensor order = at::randperm(train.size(), gen, at::kLong);
  // The trainer's rule: data.loader.seed, or trainer.seed when it is 0.
  const std::int64_t loader_seed = cfg.data.loader.seed != 0 ? cfg.data.loader.seed : cfg.trainer.seed;
  const std::int64_t rows = std::min(r.samples, train.size());
  const std::int64_t cols = 1 + r.variants;
  std::vector<cv::Mat> cells;
  int cell_h = 0, cell_w = 0;
  std::int64_t shown = 0;
  for (std::int64_t i = 0; i < train.size() && shown < rows; ++i) {
    const std::int64_t k = order[i].item<std::int64_t>();
    const data::ImageRef& file = train.files()[static_cast<std::size_t>(k)];
    cv::Mat image;
    try {
      image = data::read_image(file, static_cast<int>(train.options().channels));
    } catch (const Error&) {
      continue;  // a file that does not decode is not shown (data inspect names it)
    }
    ++shown;
    for (std::int64_t c = 0; c < cols; ++c) {
      data::Sample smp{image.clone(), {}};
      data::AugmentRng rng(data::sample_seed(data::epoch_seed(loader_seed, c - 1), k));
      (c == 0 ? eval : aug).run(smp, rng);
      cv::Mat rgb;
      if (smp.image.channels() == 1)
        cv::cvtColor(smp.image, rgb, cv::COLOR_GRAY2RGB);
      else
        rgb = smp.image;
      cell_h = std::max(cell_h, rgb.rows);
      cell_w = std::max(cell_w, rgb.cols);
      cells.push_back(rgb);
    }
  }
  GB_CHECK(shown > 0, DataLoss, "none of the training images decodes", "run glassbox data inspect to see why");
  constexpr int kGap = 4;
  cv::Mat grid(static_cast<int>(shown) * (cell_h + kGap) + kGap, static_cast<int>(cols) * (cell_w + kGap) + kGap,
               CV_8UC3, cv::Scalar(255, 255, 255));
  for (std::size_t n = 0; n < cells.size(); ++n) {
    const int row = static_cast<int>(n / static_cast<std::size_t>(cols));
    const int col = static_cast<int>(n % static_cast<std::size_t>(cols));
    const cv::Mat& c = cells[n];
    c.copyTo(grid(cv::Rect(kGap + col * (cell_w + kGap), kGap + row * (cell_h + kGap), c.cols, c.rows)));
  }
  write_file_atomic(r.out, data::encode_png(grid));
  return {r.out, shown, cols, grid.cols, grid.rows};
}

nlohmann::json inspect_data(const InspectRequest& r) {
  train::RunConfig cfg = train::load_run_config(r.config, r.overrides);
  data::DataOptions d = cfg.data.source;
  require_class_labels(d, "glassbox data inspect");
  d.normalize = false;
  d.check_images = false;  // every file is decoded below, and the bad ones reported
  const data::Splits s = data::load_splits(d);
  nlohmann::json j = data::is_image_format(d.format) ? inspect_images(s, d) : inspect_tensors(s, d);
  // The largest and smallest class of the training split.
  const auto& counts = j["splits"]["train"]["per_class"];
  std::int64_t lo = -1, hi = 0;
  for (const auto& c : counts) {
    const auto n = c.get<std::int64_t>();
    hi = std::max(hi, n);
    lo = lo < 0 ? n : std::min(lo, n);
  }
  j["train_imbalance"] = lo > 0 ? static_cast<double>(hi) / static_cast<double>(lo) : 0.0;
  return j;
}

std::string format_inspection(const nlohmann::json& j) {
  std::string out = fmt::format("{} data in {}: {} classes\n", j["format"].get<std::string>(),
                                j["root"].get<std::string>(), j["classes"].size());
  for (const auto& [split, v] : j["splits"].items()) {
    std::string per;
    for (std::size_t k = 0; k < v["per_class"].size() && k < 12; ++k)
      per += fmt::format("{}{} {}", per.empty() ? "" : ", ", j["classes"][k].get<std::string>(),
                         v["per_class"][k].get<std::int64_t>());
    if (v["per_class"].size() > 12) per += ", ...";
    out += fmt::format("  {:<5} {:>7} images ({})\n", split, v["images"].get<std::int64_t>(), per);
  }
  if (j.contains("train_imbalance") && j["train_imbalance"].get<double>() > 0)
    out += fmt::format("  largest / smallest training class: {:.2f}\n", j["train_imbalance"].get<double>());
  if (j.contains("sizes_hxw")) {
    const auto& z = j["sizes_hxw"];
    out += fmt::format("  sizes (HxW): {} distinct, {} to {}", z["distinct"].get<std::size_t>(),
                       z["smallest"].get<std::string>(), z["largest"].get<std::string>());
    if (!z["most_common"].empty())
      out += fmt::format(", most common {} ({} images)", z["most_common"][0]["size"].get<std::string>(),
                         z["most_common"][0]["count"].get<int>());
    out += "\n";
    std::string ch;
    for (const auto& [c, n] : j["stored_channels"].items())
      ch += fmt::format("{}{} channel(s): {}", ch.empty() ? "" : ", ", c, n.get<std::int64_t>());
    out += "  stored as " + ch + "\n";
  }
  if (j.contains("train_mean"))
    out += fmt::format("  training mean {:.4f}, std {:.4f} (per channel; data.mean / data.std)\n",
                       fmt::join(j["train_mean"].get<std::vector<double>>(), ", "),
                       fmt::join(j["train_std"].get<std::vector<double>>(), ", "));
  if (j.contains("corrupt")) {
    out += fmt::format("  files that do not decode: {}\n", j["corrupt"].size());
    for (std::size_t i = 0; i < j["corrupt"].size() && i < 10; ++i)
      out += "    " + j["corrupt"][i]["error"].get<std::string>() + "\n";
    out += fmt::format("  identical files in two splits: {} group(s)\n", j["identical_across_splits"].size());
    for (std::size_t i = 0; i < j["identical_across_splits"].size() && i < 10; ++i) {
      std::string g;
      for (const auto& f : j["identical_across_splits"][i])
        g += fmt::format("{}{} ({})", g.empty() ? "" : " = ", f["file"].get<std::string>(),
                         f["split"].get<std::string>());
      out += "    " + g + "\n";
    }
    out += fmt::format("  identical files within a split: {} group(s)\n", j["identical_within_a_split"].size());
  }
  return out;
}

}  // namespace glassbox::app
