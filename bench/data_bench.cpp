// run_data_bench: sample JPEGs -> transforms (glassbox, then the Python anchor) -> loaders per
// worker count (glassbox pipeline, DataLoader pipeline, glassbox decode, DataLoader decode).
#include "bench/data_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "bench/serve_bench_models.h"
#include "bench/source_dir.h"
#include "glassbox/base/error.h"
#include "glassbox/data/augment.h"
#include "glassbox/data/image.h"
#include "glassbox/data/loader.h"
#include "glassbox/data/source.h"

namespace glassbox::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

constexpr int kSize = 224;
constexpr int kWidth = 500, kHeight = 375;
constexpr std::int64_t kBatch = 32;
constexpr std::int64_t kSkipBatches = 4;  // not measured: worker start-up and the first fill of the queues

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<double> load_average() {
  std::ifstream f("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  f >> a >> b >> c;
  return {a, b, c};
}

// ---- the images ----------------------------------------------------------------------------

fs::path sample_images_dir(const std::string& source_dir) {
  const fs::path lib = fs::path(source_dir) / ".venv" / "lib";
  std::error_code ec;
  if (fs::is_directory(lib, ec)) {
    for (const auto& e : fs::directory_iterator(lib, ec)) {
      const fs::path d = e.path() / "site-packages" / "sklearn" / "datasets" / "images";
      if (e.path().filename().string().rfind("python", 0) == 0 && fs::is_regular_file(d / "china.jpg", ec)) return d;
    }
  }
  GB_CHECK(false, NotFound, "scikit-learn's sample images (china.jpg, flower.jpg) are not under " << lib.string(),
           std::string("run scripts/setup to create .venv with scikit-learn"));
  return {};
}

// `n` JPEGs (quality 90) of 500x375: crops of china.jpg and flower.jpg (427x640) at different
// offsets, some flipped, under root/train/<china|flower>/, plus one file per class under
// root/test/ so that the image folder reader finds its splits without carving the training files.
void write_images(const fs::path& root, std::int64_t n, const std::string& source_dir) {
  const fs::path dir = sample_images_dir(source_dir);
  const std::vector<std::string> names{"china", "flower"};
  std::vector<cv::Mat> sources;
  for (const auto& name : names) sources.push_back(data::read_image(dir / (name + ".jpg"), 3));
  const auto write = [](const fs::path& file, const std::string& bytes) {
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  for (std::int64_t k = 0; k < n; ++k) {
    const cv::Mat& src = sources[static_cast<std::size_t>(k % 2)];
    const std::int64_t v = k / 2;
    const int dy = static_cast<int>((v * 7) % (src.rows - kHeight + 1));
    const int dx = static_cast<int>((v * 13) % (src.cols - kWidth + 1));
    cv::Mat crop = src(cv::Rect(dx, dy, kWidth, kHeight)).clone();
    const int flip = static_cast<int>(v % 4);  // none, horizontal, vertical, both
    if (flip == 1) cv::flip(crop, crop, 1);
    if (flip == 2) cv::flip(crop, crop, 0);
    if (flip == 3) cv::flip(crop, crop, -1);
    const std::string bytes = data::encode_jpeg(crop, 90);
    write(root / "train" / names[static_cast<std::size_t>(k % 2)] / fmt::format("{:04d}.jpg", k), bytes);
    if (k < 2) write(root / "test" / names[static_cast<std::size_t>(k % 2)] / "0000.jpg", bytes);
  }
}

std::vector<fs::path> train_files(const fs::path& root) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root / "train"))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// ---- transforms ----------------------------------------------------------------------------

data::TransformSpec transform_spec(const std::string& name) {
  data::TransformSpec s;
  s.name = name;
  s.p = 1;
  if (name == "Resize" || name == "CenterCrop" || name == "RandomCrop") {
    s.ints["height"] = kSize;
    s.ints["width"] = kSize;
  } else if (name == "RandomResizedCrop") {
    s.numbers["size"] = {kSize, kSize};
  } else if (name == "SmallestMaxSize" || name == "LongestMaxSize") {
    s.numbers["max_size"] = {kSize};
  }
  return s;
}

// Images/s counting only the time inside the transform (the fresh copy of the input each call
// stands for a freshly decoded image and is not counted); best of `repeats` windows of `window`
// seconds of wall time, warm-up first.
double transform_rate(const data::Transform& t, const std::vector<cv::Mat>& inputs, const DataBenchOptions& o) {
  data::AugmentRng rng(1);
  cv::Mat buffer;
  std::size_t i = 0;
  const auto once = [&] {
    inputs[i++ % inputs.size()].copyTo(buffer);
    const auto t0 = Clock::now();
    {
      data::Sample s{buffer, {}};
      t(s, rng);
    }
    return seconds_since(t0);
  };
  for (int k = 0; k < 8; ++k) once();
  double best = 0;
  for (std::int64_t r = 0; r < o.repeats; ++r) {
    // The window is wall time (the untimed copies included), so that a transform much faster than
    // the copy does not stretch it; the rate counts transform time only.
    double spent = 0;
    std::int64_t n = 0;
    const auto w0 = Clock::now();
    while (n < 3 || seconds_since(w0) < o.window) {
      spent += once();
      ++n;
    }
    best = std::max(best, static_cast<double>(n) / spent);
  }
  return best;
}

// ---- the Python anchor ---------------------------------------------------------------------

json run_python(const DataBenchOptions& o, const std::string& args, const fs::path& log) {
  const std::string cmd =
      "'" + o.python + "' '" + o.source_dir + "/bench/data_bench.py' " + args + " 2>'" + log.string() + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  GB_CHECK(p != nullptr, Unavailable, "cannot run " << cmd, std::string("run scripts/setup to create .venv"));
  std::string out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  std::string tail;
  {
    std::ifstream f(log);
    std::stringstream ss;
    ss << f.rdbuf();
    tail = ss.str();
    if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
  }
  GB_CHECK(rc == 0, Unavailable, "bench/data_bench.py " << args << " failed (exit " << rc << "): " << tail,
           std::string("check that .venv has albumentations, torchvision and opencv-python"));
  const auto last = out.find_last_of('\n', out.size() >= 2 ? out.size() - 2 : 0);
  const std::string line = last == std::string::npos ? out : out.substr(last + 1);
  GB_CHECK(!line.empty() && line[0] == '{', Internal, "bench/data_bench.py printed no JSON: " << out,
           std::string("run it by hand to see why"));
  return json::parse(line);
}

std::string common_args(const DataBenchOptions& o, const fs::path& root) {
  return fmt::format("--root '{}' --window {} --repeats {}", root.string(), o.window, o.repeats);
}

// ---- loaders -------------------------------------------------------------------------------

// glassbox's ImageDataset for the pipeline: data.format = "imagefolder" with
// RandomResizedCrop(224) + HorizontalFlip + Normalize as data.train_transforms.
std::shared_ptr<const data::Dataset> pipeline_dataset(const fs::path& root) {
  data::DataOptions d;
  d.format = data::DataFormat::kImageFolder;
  d.root = root.string();
  d.channels = 3;
  d.val_size = 0;
  data::TransformSpec flip;
  flip.name = "HorizontalFlip";
  data::TransformSpec norm;
  norm.name = "Normalize";
  d.train_transforms = {transform_spec("RandomResizedCrop"), flip, norm};
  d.eval_transforms = {transform_spec("Resize"), norm};
  return data::load_splits(d).train;
}

// The decode limit: read + decode to RGB, batches of CHW uint8 tensors (the same as the
// DataLoader's decode-only Dataset; an ImageDataset without transforms would also convert the
// full-size image to float32).
class DecodeDataset final : public data::Dataset {
 public:
  explicit DecodeDataset(std::vector<fs::path> files) : files_(std::move(files)) {}
  std::int64_t size() const override { return static_cast<std::int64_t>(files_.size()); }
  data::Batch get_batch(const at::Tensor& indices) const override {
    const at::Tensor idx = indices.to(torch::kLong).contiguous();
    std::vector<at::Tensor> images;
    const std::int64_t* p = idx.const_data_ptr<std::int64_t>();
    for (std::int64_t k = 0; k < idx.numel(); ++k)
      images.push_back(data::image_to_tensor(data::read_image(files_[static_cast<std::size_t>(p[k])], 3)));
    data::Batch b;
    b.inputs = torch::stack(images);
    b.targets = torch::zeros({idx.numel()}, torch::kLong);
    b.indices = idx;
    return b;
  }
  std::vector<std::int64_t> sample_shape() const override { return {3, kHeight, kWidth}; }

 private:
  std::vector<fs::path> files_;
};

// Images/s of a Loader over `dataset` (batches of 32, shuffled, persistent workers), epoch after
// epoch: the first batches are skipped, then the best of `repeats` windows.
double loader_rate(const std::shared_ptr<const data::Dataset>& dataset, std::int64_t workers,
                   const DataBenchOptions& o) {
  data::LoaderOptions lo;
  lo.batch_size = kBatch;
  lo.shuffle = true;
  lo.num_workers = workers;
  lo.persistent_workers = true;
  lo.seed = 0;
  data::Loader loader(dataset, lo);
  std::int64_t epoch = 0;
  loader.start_epoch(epoch);
  const auto next = [&]() -> data::Batch {
    while (true) {
      if (auto b = loader.next()) return std::move(*b);
      loader.start_epoch(++epoch);
    }
  };
  for (std::int64_t k = 0; k < kSkipBatches; ++k) next();
  double best = 0;
  for (std::int64_t r = 0; r < o.repeats; ++r) {
    std::int64_t n = 0;
    const auto t0 = Clock::now();
    while (seconds_since(t0) < o.window) n += next().size();
    best = std::max(best, static_cast<double>(n) / seconds_since(t0));
  }
  return best;
}

json goals(const json& r) {
  json g = json::array();
  const auto add = [&](const std::string& figure, const std::string& goal, const json& value, bool met) {
    g.push_back({{"figure", figure}, {"goal", goal}, {"value", value}, {"met", met}});
  };
  if (r.contains("transforms_geomean_ratio")) {
    const double geo = r["transforms_geomean_ratio"].get<double>();
    add("transforms_geomean_ratio", ">= 1.5", geo, geo >= 1.5);
    double lowest = 1e300;
    std::string which;
    for (const auto& [name, t] : r["transforms"].items())
      if (t["ratio"].is_number() && t["ratio"].get<double>() < lowest) {
        lowest = t["ratio"].get<double>();
        which = name;
      }
    add("transforms lowest ratio (" + which + ")", ">= 1.0", lowest, lowest >= 1.0);
  }
  if (r.contains("pipeline")) {
    for (const auto& [w, p] : r["pipeline"].items()) {
      if (p["ratio_vs_dataloader"].is_number()) {
        const double v = p["ratio_vs_dataloader"].get<double>();
        add("pipeline." + w + ".ratio_vs_dataloader", ">= 2", v, v >= 2);
      }
    }
    for (const auto& [w, v] : r["pipeline_vs_decode_limit"].items())
      add("pipeline_vs_decode_limit." + w, ">= 0.8", v, v.get<double>() >= 0.8);
  }
  return g;
}

}  // namespace

void DataBenchOptions::validate() const {
  GB_CHECK(window > 0 && repeats >= 1, InvalidArgument, "--window must be > 0 and --repeats >= 1",
           std::string("e.g. --window 1 --repeats 3"));
  GB_CHECK(images >= 64 && transform_images >= 1, InvalidArgument, "--images must be at least 64",
           std::string("e.g. --images 256"));
  GB_CHECK(!workers.empty() && *std::min_element(workers.begin(), workers.end()) >= 1, InvalidArgument,
           "--workers needs counts >= 1", std::string("e.g. --workers 1,2"));
  for (const auto& name : transforms) {
    const data::TransformDef* def = data::find_transform(name);
    GB_CHECK(def != nullptr && !def->composite, InvalidArgument, "--transforms: no transform named '" << name << "'",
             std::string("see docs/augmentation.md for the names (Compose, OneOf and SomeOf are not benched)"));
  }
}

json run_data_bench(const DataBenchOptions& in) {
  in.validate();
  DataBenchOptions o = in;
  if (o.source_dir.empty()) o.source_dir = default_source_dir();
  if (o.python.empty()) o.python = o.source_dir + "/.venv/bin/python";
  const auto say = [&](const std::string& line) {
    if (o.log) *o.log << line << "\n" << std::flush;
  };
  const TempDir work("glassbox-bench-data");
  const fs::path root = work.path() / "images";
  write_images(root, o.images, o.source_dir);
  const std::vector<fs::path> files = train_files(root);

  json r{{"bench", "data"},
         {"machine", machine_description()},
         {"load_average_start", load_average()},
         {"images",
          {{"count", static_cast<std::int64_t>(files.size())},
           {"width", kWidth},
           {"height", kHeight},
           {"jpeg_quality", 90},
           {"from", "scikit-learn's china.jpg and flower.jpg (crops at different offsets, flips)"}}},
         {"window_s", o.window},
         {"repeats", o.repeats}};
  json notes = json::array();

  // Single-threaded, as every figure of this part is per core.
  at::set_num_threads(1);
  data::use_single_threaded_opencv();

  if (!o.skip_transforms) {
    std::vector<std::string> names = o.transforms;
    if (names.empty())
      for (const auto& def : data::transform_registry())
        if (!def.composite) names.push_back(def.name);
    std::vector<cv::Mat> inputs;
    for (std::int64_t k = 0; k < std::min<std::int64_t>(o.transform_images, static_cast<std::int64_t>(files.size()));
         ++k)
      inputs.push_back(data::read_image(files[static_cast<std::size_t>(k)], 3));
    json transforms = json::object();
    for (const auto& name : names) {
      const auto t = data::make_transform(transform_spec(name), "bench");
      const double rate = transform_rate(*t, inputs, o);
      transforms[name] = {{"glassbox", rate}};
      say(fmt::format("  glassbox  {:<26} {:>9.0f} images/s", name, rate));
    }
    if (!o.skip_python) {
      std::string list;
      for (const auto& name : names) list += (list.empty() ? "" : ",") + name;
      const json py = run_python(
          o, fmt::format("transforms {} --images {} --names {}", common_args(o, root), o.transform_images, list),
          work.path() / "python-transforms.log");
      r["python"] = {{"albumentations", py["albumentations"]},
                     {"torchvision", py["torchvision"]},
                     {"torch", py["torch"]},
                     {"cv2", py["cv2"]}};
      double log_sum = 0;
      int counted = 0;
      for (const auto& name : names) {
        const json& p = py["result"][name];
        json& t = transforms[name];
        t["albumentations"] = p["albumentations"];
        t["torchvision"] = p["torchvision"];
        if (p.contains("albumentations_error")) t["albumentations_error"] = p["albumentations_error"];
        if (p["albumentations"].is_number()) {
          const double ratio = t["glassbox"].get<double>() / p["albumentations"].get<double>();
          t["ratio"] = ratio;
          log_sum += std::log(ratio);
          ++counted;
        } else {
          t["ratio"] = nullptr;
        }
        say(fmt::format("  python    {:<26} {}", name, p.dump()));
      }
      if (counted > 0) r["transforms_geomean_ratio"] = std::exp(log_sum / counted);
    }
    r["transforms"] = transforms;
    notes.push_back(
        "transforms: single thread (at::set_num_threads(1), OpenCV without threads; cv2.setNumThreads(0), "
        "torch.set_num_threads(1)); p = 1 and albumentations' default parameters, sizes 224 where one is required; "
        "each call gets a fresh copy of a decoded 500x375 RGB image (the copy is not timed); best of the windows. "
        "torchvision: v2 on CHW uint8 tensors, GaussianBlur with kernel_size 13 (it needs a fixed size), Normalize "
        "preceded by ToDtype(float32, scale=True), Resize with its default antialias");
  }

  if (!o.skip_loaders) {
    const auto pipeline_ds = pipeline_dataset(root);
    const std::shared_ptr<const data::Dataset> decode_ds = std::make_shared<DecodeDataset>(files);
    json pipeline = json::object(), decode = json::object(), limit = json::object();
    for (std::int64_t w : o.workers) {
      const std::string key = fmt::format("w{}", w);
      const double gb_pipe = loader_rate(pipeline_ds, w, o);
      say(fmt::format("  glassbox  pipeline {:<7} {:>9.0f} images/s", key, gb_pipe));
      const double gb_decode = loader_rate(decode_ds, w, o);
      say(fmt::format("  glassbox  decode   {:<7} {:>9.0f} images/s", key, gb_decode));
      json p{{"glassbox", gb_pipe}, {"dataloader", nullptr}, {"ratio_vs_dataloader", nullptr}, {"dali", nullptr}};
      json d{{"glassbox", gb_decode}, {"dataloader", nullptr}};
      if (!o.skip_python) {
        const std::string args =
            fmt::format("loader {} --workers {} --skip-batches {}", common_args(o, root), w, kSkipBatches);
        const double py_pipe =
            run_python(o, args + " --mode pipeline", work.path() / "python-loader.log")["result"]["images_per_s"]
                .get<double>();
        say(fmt::format("  python    pipeline {:<7} {:>9.0f} images/s", key, py_pipe));
        const double py_decode =
            run_python(o, args + " --mode decode", work.path() / "python-loader.log")["result"]["images_per_s"]
                .get<double>();
        say(fmt::format("  python    decode   {:<7} {:>9.0f} images/s", key, py_decode));
        p["dataloader"] = py_pipe;
        p["ratio_vs_dataloader"] = gb_pipe / py_pipe;
        d["dataloader"] = py_decode;
      }
      pipeline[key] = p;
      decode[key] = d;
      limit[key] = gb_pipe / gb_decode;
    }
    r["pipeline"] = pipeline;
    r["decode"] = decode;
    r["pipeline_vs_decode_limit"] = limit;
    notes.push_back(fmt::format(
        "pipeline: read + decode + RandomResizedCrop(224) + HorizontalFlip (p 0.5) + Normalize, CHW float32 batches "
        "of {} shuffled over {} files, epoch after epoch, persistent workers; the first {} batches (worker start-up) "
        "are not measured. glassbox: ImageDataset (data.format = \"imagefolder\") + Loader. dataloader: "
        "torch.utils.data.DataLoader over a Dataset reading with cv2 (IMREAD_COLOR, BGR -> RGB), albumentations "
        "Compose, HWC float32 -> CHW tensor; cv2.setNumThreads(0) in the workers",
        kBatch, files.size(), kSkipBatches));
    notes.push_back(
        "decode: read + decode to RGB only, batches of CHW uint8 tensors, the same loaders and worker counts "
        "(glassbox: a Dataset calling read_image, under the same Loader); pipeline_vs_decode_limit is glassbox's "
        "pipeline over glassbox's decode");
    notes.push_back(
        "dali: null. nvidia-dali is not installed in .venv; its wheels (nvidia-dali-cuda120, several hundred MB) are "
        "built for CUDA GPUs and this machine has none, so there is no DALI figure");
  }
  r["load_average_end"] = load_average();
  r["notes"] = notes;
  r["goals"] = goals(r);
  return r;
}

void print_data_bench(const json& r, std::ostream& out) {
  const json& mc = r["machine"];
  out << fmt::format("glassbox bench data: {} cores ({}), torch {}; {} JPEGs of {}x{}; best of {} windows of {} s\n",
                     mc["cores"].get<int>(), mc.value("cpu", "?"), mc["torch"].get<std::string>(),
                     r["images"]["count"].get<std::int64_t>(), r["images"]["width"].get<int>(),
                     r["images"]["height"].get<int>(), r["repeats"].get<std::int64_t>(), r["window_s"].get<double>());
  const auto num = [](const json& v) { return v.is_number() ? fmt::format("{:.0f}", v.get<double>()) : "-"; };
  if (r.contains("transforms")) {
    out << fmt::format("\nsingle-thread images/s\n  {:<26} {:>10} {:>15} {:>12} {:>8}\n", "transform", "glassbox",
                       "albumentations", "torchvision", "ratio");
    for (const auto& [name, t] : r["transforms"].items())
      out << fmt::format("  {:<26} {:>10} {:>15} {:>12} {:>8}\n", name, num(t["glassbox"]), num(t["albumentations"]),
                         num(t["torchvision"]),
                         t.value("ratio", json()).is_number() ? fmt::format("{:.2f}", t["ratio"].get<double>()) : "-");
    if (r.contains("transforms_geomean_ratio"))
      out << fmt::format("  geometric mean of the ratios: {:.2f}\n", r["transforms_geomean_ratio"].get<double>());
  }
  if (r.contains("pipeline")) {
    out << fmt::format(
        "\nloaders, images/s (first {} batches not measured)\n  {:<8} {:>10} {:>11} {:>8} {:>15} {:>17} {:>10}\n",
        kSkipBatches, "workers", "glassbox", "DataLoader", "ratio", "decode glassbox", "decode DataLoader",
        "vs decode");
    for (const auto& [w, p] : r["pipeline"].items()) {
      const json& d = r["decode"][w];
      out << fmt::format(
          "  {:<8} {:>10} {:>11} {:>8} {:>15} {:>17} {:>10.2f}\n", w, num(p["glassbox"]), num(p["dataloader"]),
          p["ratio_vs_dataloader"].is_number() ? fmt::format("{:.2f}", p["ratio_vs_dataloader"].get<double>()) : "-",
          num(d["glassbox"]), num(d["dataloader"]), r["pipeline_vs_decode_limit"][w].get<double>());
    }
  }
  out << "\ngoals\n";
  for (const auto& g : r["goals"])
    out << fmt::format("  {:<45} {:>7.2f} (goal {}: {})\n", g["figure"].get<std::string>(), g["value"].get<double>(),
                       g["goal"].get<std::string>(), g["met"].get<bool>() ? "met" : "MISSED");
  out << fmt::format("load average {} at the start, {} at the end\n", r["load_average_start"].dump(),
                     r["load_average_end"].dump());
}

}  // namespace glassbox::bench
