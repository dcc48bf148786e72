// Tested by image_folder_test.cpp.
#include "glassbox/data/image_folder.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/buffer_pool.h"
#include "glassbox/data/csv.h"
#include "glassbox/data/image.h"
#include "glassbox/data/webdataset.h"

namespace glassbox::data {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool hidden(const fs::path& p) { return !p.filename().empty() && p.filename().string()[0] == '.'; }

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

// One image and its class, before splitting.
struct Item {
  ImageRef ref;
  std::int64_t label = 0;
  std::vector<float> target;  // regression / multilabel: data.target_columns' values
  std::string split;          // "train" | "val" | "test" | "" (to be drawn)
  std::string date;
  std::int64_t shard = -1;  // webdataset: the shard's position in the split's shard list
};

std::vector<fs::path> sorted_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  GB_CHECK(!ec, NotFound, "cannot read the folder " << dir.string() << ": " << ec.message(),
           "check that it exists and that you may read it");
  for (const auto& e : it) {
    std::error_code e2;
    if (e.is_directory(e2) && !hidden(e.path())) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
  return out;
}

// Image files under `dir`, recursively, in torchvision's order: by folder, then by file name.
std::vector<fs::path> image_files(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
  GB_CHECK(!ec, NotFound, "cannot read the folder " << dir.string() << ": " << ec.message(),
           "check that it exists and that you may read it");
  for (auto end = fs::recursive_directory_iterator(); it != end; it.increment(ec)) {
    GB_CHECK(!ec, NotFound, "cannot read inside " << dir.string() << ": " << ec.message(),
             "check the permissions of its sub-folders");
    if (it->is_directory() && hidden(it->path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && is_image_file(it->path()) && !hidden(it->path()))
      found.emplace_back(it->path().parent_path().string(), it->path().filename().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (const auto& [d, f] : found) out.push_back(fs::path(d) / f);
  return out;
}

// The items of a folder of class folders; `classes` is filled from it when empty, else checked.
std::vector<Item> scan_class_folders(const fs::path& dir, std::vector<std::string>& classes, const std::string& split) {
  const std::vector<fs::path> dirs = sorted_dirs(dir);
  GB_CHECK(!dirs.empty(), NotFound, "no class folders in " << dir.string(),
           "put each class's images in a folder named after the class: " + dir.string() + "/<class>/<image>");
  const bool define = classes.empty();
  std::vector<Item> items;
  for (const fs::path& d : dirs) {
    const std::string name = d.filename().string();
    std::int64_t label = -1;
    if (define) {
      classes.push_back(name);
      label = static_cast<std::int64_t>(classes.size()) - 1;
    } else {
      const auto it = std::find(classes.begin(), classes.end(), name);
      GB_CHECK(it != classes.end(), InvalidArgument,
               d.string() << ": class '" << name << "' is not a class of the training split",
               "the training folder defines the classes; add '" + name + "' there or rename the folder");
      label = it - classes.begin();
    }
    const std::vector<fs::path> files = image_files(d);
    GB_CHECK(!files.empty(), NotFound,
             "the class folder " << d.string() << " holds no images (.jpg .jpeg .png .bmp .tif .tiff .webp .pgm .ppm)",
             "add images to it or remove it");
    for (const auto& f : files) items.push_back({ImageRef(f), label, {}, split, "", -1});
  }
  return items;
}

bool all_integers(const std::vector<std::string>& values) {
  for (const auto& v : values) {
    if (v.empty()) return false;
    std::size_t i = v[0] == '-' ? 1 : 0;
    if (i == v.size()) return false;
    for (; i < v.size(); ++i)
      if (!std::isdigit(static_cast<unsigned char>(v[i]))) return false;
  }
  return true;
}

std::string split_name(const std::string& value, const std::string& where) {
  const std::string v = lower(value);
  if (v == "train" || v == "training") return "train";
  if (v == "val" || v == "valid" || v == "validation" || v == "dev") return "val";
  if (v == "test" || v == "testing") return "test";
  GB_THROW(InvalidArgument, where << ": split '" << value << "' is not train, val (validation) or test",
           "use train, val or test in the split column");
}

// A metadata.csv: items (their files checked), classes.
std::vector<Item> read_metadata(const fs::path& root, const fs::path& path, const DataOptions& o,
                                std::vector<std::string>& classes) {
  const CsvText t = parse_csv_text(read_file(path), path.string());
  const std::string src = path.string();
  const std::size_t file_col = t.column("file_name", src, "the file_name column (Hugging Face's convention)");
  const bool has_label = std::find(t.header.begin(), t.header.end(), o.label_column) != t.header.end();
  const std::size_t label_col = has_label ? t.column(o.label_column, src, "data.label_column") : 0;
  const bool has_split = std::find(t.header.begin(), t.header.end(), o.split_column) != t.header.end();
  const std::size_t split_col = has_split ? t.column(o.split_column, src, "data.split_column") : 0;
  std::size_t date_col = 0;
  const bool has_date = !o.date_column.empty();
  if (has_date) date_col = t.column(o.date_column, src, "data.date_column");
  GB_CHECK(o.split_by != SplitBy::kColumn || has_split, NotFound,
           src << ": data.split_by = \"column\" but there is no column '" << o.split_column << "'",
           "set data.split_column to the column holding train / val / test");

  // Regression / multi-label: the target columns instead of a class label.
  const bool real = o.task != TaskKind::kClassification;
  std::vector<std::size_t> target_cols;
  if (real)
    for (const auto& c : o.target_columns) target_cols.push_back(t.column(c, src, "data.target_columns"));

  std::vector<std::string> names;
  std::vector<Item> items;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    const std::string where = src + ":" + std::to_string(t.lines[r]);
    const fs::path rel = row[file_col];
    GB_CHECK(!rel.empty(), DataLoss, where << ": empty file_name", "name the image file relative to " + root.string());
    const fs::path file = rel.is_absolute() ? rel : root / rel;
    std::error_code ec;
    GB_CHECK(fs::is_regular_file(file, ec), NotFound,
             where << ": file_name " << rel.string() << " does not exist under " << root.string(),
             "fix the row or remove it; file_name is relative to the folder holding the metadata");
    Item it;
    it.ref = file;
    if (real) {
      for (std::size_t j = 0; j < target_cols.size(); ++j) {
        const std::string& cell = row[target_cols[j]];
        char* end = nullptr;
        const double v = cell.empty() ? NAN : std::strtod(cell.c_str(), &end);
        GB_CHECK(!cell.empty() && end == cell.c_str() + cell.size() && std::isfinite(v), DataLoss,
                 where << ": column '" << o.target_columns[j] << "': "
                       << (cell.empty() ? std::string("empty target") : "'" + cell + "' is not a finite number"),
                 "give every row a numeric value in each target column");
        GB_CHECK(o.task != TaskKind::kMultilabel || v == 0.0 || v == 1.0, InvalidArgument,
                 where << ": column '" << o.target_columns[j] << "': label value " << cell << " is not 0 or 1",
                 "multi-label columns mark each label present (1) or absent (0)");
        it.target.push_back(static_cast<float>(v));
      }
    } else if (has_label) {
      GB_CHECK(!row[label_col].empty(), DataLoss, where << ": empty label in column '" << o.label_column << "'",
               "give every row its class");
      names.push_back(row[label_col]);
    } else {
      const auto first = rel.begin();
      GB_CHECK(
          std::distance(rel.begin(), rel.end()) >= 2, NotFound,
          where << ": no label column '" << o.label_column << "' and " << rel.string() << " is not in a class folder",
          "add a label column (data.label_column) or put the images in class folders");
      names.push_back(first->string());
    }
    if (has_split) it.split = split_name(row[split_col], where);
    if (has_date) {
      it.date = row[date_col];
      GB_CHECK(it.date.size() >= 10 && std::isdigit(static_cast<unsigned char>(it.date[0])) && it.date[4] == '-' &&
                   it.date[7] == '-',
               DataLoss, where << ": date '" << it.date << "' in column '" << o.date_column << "' is not ISO 8601",
               "write dates as YYYY-MM-DD (optionally followed by a time)");
      std::replace(it.date.begin(), it.date.end(), 'T', ' ');
    }
    items.push_back(it);
  }
  GB_CHECK(!items.empty(), DataLoss, src << ": no rows", "list one image per row");
  if (real) {
    classes = o.target_columns;
    return items;
  }
  // Classes: data.class_names, else the sorted distinct labels (numerically for integers).
  std::vector<std::string> distinct(names.begin(), names.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (all_integers(distinct)) {
    std::sort(distinct.begin(), distinct.end(),
              [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
  }
  classes = o.class_names.empty() ? distinct : o.class_names;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto it = std::find(classes.begin(), classes.end(), names[i]);
    GB_CHECK(it != classes.end(), InvalidArgument,
             src << ":" << t.lines[i] << ": label '" << names[i] << "' is not in data.class_names",
             "list every class in data.class_names, or leave it empty");
    items[i].label = it - classes.begin();
  }
  return items;
}

// `count` indices of `pool` drawn per class in proportion to its size (largest remainders), seeded.
std::vector<std::size_t> stratified_draw(const std::vector<std::size_t>& pool, const std::vector<Item>& items,
                                         std::int64_t count, std::uint64_t seed) {
  std::map<std::int64_t, std::vector<std::size_t>> by_class;
  for (std::size_t i : pool) by_class[items[i].label].push_back(i);
  const auto n = static_cast<double>(pool.size());
  std::vector<std::pair<double, std::int64_t>> remainders;
  std::map<std::int64_t, std::int64_t> take;
  std::int64_t taken = 0;
  for (const auto& [label, members] : by_class) {
    const double exact = static_cast<double>(count) * static_cast<double>(members.size()) / n;
    take[label] = static_cast<std::int64_t>(std::floor(exact));
    taken += take[label];
    remainders.emplace_back(exact - std::floor(exact), label);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; taken < count && i < remainders.size(); ++i, ++taken) take[remainders[i].second] += 1;
  std::vector<std::size_t> out;
  for (auto& [label, members] : by_class) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<std::uint64_t>(label) * 7919);
    const at::Tensor perm = at::randperm(static_cast<std::int64_t>(members.size()), gen, at::kLong);
    const std::int64_t k = std::min<std::int64_t>(take[label], static_cast<std::int64_t>(members.size()));
    for (std::int64_t j = 0; j < k; ++j) out.push_back(members[static_cast<std::size_t>(perm[j].item<std::int64_t>())]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t held_out(double size, std::int64_t n, const char* key) {
  if (size <= 0) return 0;
  const std::int64_t k = size >= 1 ? static_cast<std::int64_t>(size) : static_cast<std::int64_t>(std::ceil(size * n));
  GB_CHECK(k < n, InvalidArgument,
           "data." << key << " = " << size << " takes " << k << " of the " << n << " images, leaving none to train on",
           std::string("lower data.") + key);
  return k;
}

// Moves a stratified `size` of the train items to `target`.
void carve(std::vector<Item>& items, const std::string& target, double size, const char* key, std::uint64_t seed) {
  std::vector<std::size_t> pool;
  for (std::size_t i = 0; i < items.size(); ++i)
    if (items[i].split == "train") pool.push_back(i);
  const std::int64_t k = held_out(size, static_cast<std::int64_t>(pool.size()), key);
  for (std::size_t i : stratified_draw(pool, items, k, seed)) items[i].split = target;
}

bool pipeline_normalizes(const std::vector<TransformSpec>& specs) {
  return !specs.empty() && specs.back().name == "Normalize";
}

struct Stats {
  std::vector<double> mean, std;
};

// Per-channel mean/std of pixels / 255 over (up to 10 000 of) `files`, through `pipeline`.
Stats channel_stats(const std::vector<ImageRef>& files, std::int64_t channels, const Pipeline* pipeline) {
  std::vector<std::size_t> pick(files.size());
  std::iota(pick.begin(), pick.end(), 0);
  if (pick.size() > 10000) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(12345);
    const at::Tensor perm = at::randperm(static_cast<std::int64_t>(pick.size()), gen, at::kLong);
    pick.resize(10000);
    for (std::size_t i = 0; i < pick.size(); ++i)
      pick[i] = static_cast<std::size_t>(perm[static_cast<std::int64_t>(i)].item<std::int64_t>());
  }
  const auto c = static_cast<std::size_t>(channels);
  std::mutex mu;
  std::vector<double> sum(c, 0.0), sq(c, 0.0);
  double count = 0;
  std::exception_ptr error;
  at::parallel_for(0, static_cast<std::int64_t>(pick.size()), 64, [&](std::int64_t begin, std::int64_t end) {
    std::vector<double> s(c, 0.0), q(c, 0.0);
    double n = 0;
    try {
      for (std::int64_t k = begin; k < end; ++k) {
        const ImageRef& f = files[pick[static_cast<std::size_t>(k)]];
        Sample smp{read_image(f, static_cast<int>(channels)), {}};
        if (pipeline != nullptr) {
          AugmentRng rng(0);
          pipeline->run(smp, rng);
        }
        cv::Mat d;
        smp.image.convertTo(d, CV_64F, 1.0 / 255.0);
        cv::Scalar m, sd;
        cv::meanStdDev(d, m, sd);
        const double px = static_cast<double>(d.total());
        for (std::size_t ch = 0; ch < c && ch < 4; ++ch) {
          s[ch] += m[static_cast<int>(ch)] * px;
          q[ch] += (sd[static_cast<int>(ch)] * sd[static_cast<int>(ch)] +
                    m[static_cast<int>(ch)] * m[static_cast<int>(ch)]) *
                   px;
        }
        n += px;
      }
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu);
      if (!error) error = std::current_exception();
      return;
    }
    std::lock_guard<std::mutex> lk(mu);
    for (std::size_t ch = 0; ch < c; ++ch) {
      sum[ch] += s[ch];
      sq[ch] += q[ch];
    }
    count += n;
  });
  if (error) std::rethrow_exception(error);
  Stats out;
  for (std::size_t ch = 0; ch < c; ++ch) {
    const double m = sum[ch] / std::max(count, 1.0);
    const double var = std::max(0.0, sq[ch] / std::max(count, 1.0) - m * m);
    out.mean.push_back(m);
    out.std.push_back(std::sqrt(var) > 1e-12 ? std::sqrt(var) : 1.0);
  }
  return out;
}

// The cheap checks of every file (check_image, in parallel); the first failure (in item order) is thrown.
void check_files(const std::vector<Item>& items) {
  std::vector<std::exception_ptr> errors(items.size());
  at::parallel_for(0, static_cast<std::int64_t>(items.size()), 64, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      try {
        check_image(items[static_cast<std::size_t>(i)].ref);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
      }
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Decodes every file (in parallel); the ones that fail are removed and described in `skipped`.
void drop_bad_files(std::vector<Item>& items, std::int64_t channels, std::vector<std::string>& skipped) {
  std::vector<std::string> reason(items.size());
  at::parallel_for(0, static_cast<std::int64_t>(items.size()), 16, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      try {
        read_image(items[static_cast<std::size_t>(i)].ref, static_cast<int>(channels));
      } catch (const Error& err) {
        reason[static_cast<std::size_t>(i)] = err.message();
      }
    }
  });
  std::vector<Item> kept;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (reason[i].empty())
      kept.push_back(items[i]);
    else
      skipped.push_back(reason[i]);
  }
  items = std::move(kept);
}

// The splits from items whose split may still be "" (drawn here), and the image datasets.
Splits build_splits(std::vector<Item> items, std::vector<std::string> classes, const DataOptions& o,
                    const std::string& source) {
  // What the layout did not split is drawn: test first, then validation from the rest.
  bool any_test = false, any_val = false;
  for (auto& it : items) {
    if (it.split.empty()) it.split = "train";
    any_test = any_test || it.split == "test";
    any_val = any_val || it.split == "val";
  }
  const auto seed = static_cast<std::uint64_t>(o.split_seed);
  if (!any_test) carve(items, "test", o.test_size, "test_size", seed * 2 + 1);
  if (o.limit_train > 0) {
    std::int64_t kept = 0;
    std::vector<Item> limited;
    for (auto& it : items)
      if (it.split != "train" || kept++ < o.limit_train) limited.push_back(it);
    items = std::move(limited);
  }
  if (!any_val) carve(items, "val", o.val_size, "val_size", seed * 2 + 2);

  // Bad files: "skip" decodes every file now and leaves out the ones that fail; "error" reads the
  // first and last bytes of every file now (an empty, cut or foreign file stops the run before it
  // starts), and anything deeper fails the batch that decodes it.
  Splits out;
  if (o.on_bad_image == OnBadImage::kSkip) {
    drop_bad_files(items, 0, out.skipped_files);
  } else if (o.check_images) {
    check_files(items);
  }
  const std::int64_t channels = [&] {
    if (o.channels != 0) return o.channels;
    for (const auto& it : items)
      if (it.split == "train") return static_cast<std::int64_t>(read_image(it.ref, 0).channels());
    return std::int64_t{3};
  }();

  std::map<std::string, std::vector<ImageRef>> files;
  std::map<std::string, std::vector<std::int64_t>> labels, shards;
  for (const auto& it : items) {
    files[it.split].push_back(it.ref);
    labels[it.split].push_back(it.label);
    shards[it.split].push_back(it.shard);
  }
  GB_CHECK(!files["train"].empty(), DataLoss, source << ": the training split is empty",
           "check data.root, the split column, or the date cut-offs");
  std::int64_t num_classes = static_cast<std::int64_t>(classes.size());
  if (o.num_classes > 0 && o.task == TaskKind::kClassification) {
    GB_CHECK(o.num_classes >= num_classes, InvalidArgument,
             "data.num_classes = " << o.num_classes << " but the folder has " << num_classes << " classes",
             "leave data.num_classes = 0");
    num_classes = o.num_classes;
  }

  // Pipelines, normalisation and the sample shape (from the first training image through the
  // eval pipeline, which defines what the model sees at inference).
  const std::vector<TransformSpec> train_specs = training_transforms(o);
  const auto train_pipe = std::make_shared<const Pipeline>(make_pipeline(train_specs, "data.train_transforms"));
  const auto eval_pipe = std::make_shared<const Pipeline>(make_pipeline(o.eval_transforms, "data.eval_transforms"));
  ImageDatasetOptions base;
  base.channels = channels;
  base.num_classes = num_classes;
  const bool train_norm = pipeline_normalizes(train_specs);
  const bool eval_norm = pipeline_normalizes(o.eval_transforms);
  GB_CHECK(train_norm == eval_norm, InvalidArgument,
           (train_norm ? "data.train_transforms" : "data.eval_transforms")
               << " ends with Normalize but " << (train_norm ? "data.eval_transforms" : "data.train_transforms")
               << " does not",
           "end both pipelines with the same Normalize step (or neither, to use data.mean/std)");
  if (eval_norm) {
    const TransformSpec& n = o.eval_transforms.back();
    out.mean = n.numbers.count("mean") ? n.numbers.at("mean") : std::vector<double>{};
    out.std = n.numbers.count("std") ? n.numbers.at("std") : std::vector<double>{};
  } else if (o.normalize) {
    if (!o.mean.empty()) {
      GB_CHECK(o.mean.size() == 1 || static_cast<std::int64_t>(o.mean.size()) == channels, InvalidArgument,
               "data.mean has " << o.mean.size() << " values but the images have " << channels << " channels",
               "give one value per channel (or one for all)");
      out.mean = std::vector<double>(static_cast<std::size_t>(channels), 0.0);
      out.std = out.mean;
      for (std::size_t c = 0; c < out.mean.size(); ++c) {
        out.mean[c] = o.mean.size() == 1 ? o.mean[0] : o.mean[c];
        out.std[c] = o.std.size() == 1 ? o.std[0] : o.std[c];
      }
    } else {
      const Stats s = channel_stats(files["train"], channels, eval_pipe->empty() ? nullptr : eval_pipe.get());
      out.mean = s.mean;
      out.std = s.std;
    }
  }
  base.pipeline_normalizes = eval_norm;
  if (!eval_norm) {
    base.mean = out.mean;
    base.std = out.std;
  }
  {
    Sample first{read_image(files["train"].front(), static_cast<int>(channels)), {}};
    AugmentRng rng(0);
    eval_pipe->run(first, rng);
    base.sample_shape = {first.image.channels(), first.image.rows, first.image.cols};
  }
  const auto make = [&](const std::string& split, const std::shared_ptr<const Pipeline>& pipe) {
    ImageDatasetOptions opt = base;
    opt.pipeline = pipe->empty() ? nullptr : pipe;
    if (split == "train") opt.shuffle_buffer = o.shuffle_buffer;
    std::vector<std::int64_t> shard_of = shards[split];
    if (!shard_of.empty() && shard_of.front() < 0) shard_of.clear();
    at::Tensor targets = torch::tensor(labels[split], torch::kLong);
    if (o.task != TaskKind::kClassification) {
      // The split's items in the order of files[split], each with num_classes targets.
      targets = torch::empty({static_cast<std::int64_t>(files[split].size()), num_classes}, torch::kFloat);
      float* p = targets.data_ptr<float>();
      for (const auto& it : items)
        if (it.split == split) p = std::copy(it.target.begin(), it.target.end(), p);
    }
    return std::make_shared<ImageDataset>(files[split], std::move(targets), opt, std::move(shard_of));
  };
  out.train = make("train", train_pipe);
  if (!files["val"].empty()) out.val = make("val", eval_pipe);
  out.test = make("test", eval_pipe);
  out.task = o.task;
  out.num_classes = num_classes;
  out.class_names = classes;
  for (std::int64_t k = static_cast<std::int64_t>(out.class_names.size()); k < num_classes; ++k)
    out.class_names.push_back(std::to_string(k));
  out.sample_shape = base.sample_shape;
  return out;
}

}  // namespace

ImageDataset::ImageDataset(std::vector<ImageRef> files, at::Tensor labels, ImageDatasetOptions options,
                           std::vector<std::int64_t> shard_of)
    : files_(std::move(files)),
      labels_(std::move(labels)),
      options_(std::move(options)),
      shard_of_(std::move(shard_of)) {
  GB_CHECK(labels_.dim() >= 1 && labels_.size(0) == static_cast<std::int64_t>(files_.size()), Internal,
           "ImageDataset: " << files_.size() << " files but " << labels_.sizes() << " labels", "");
}

Sample ImageDataset::sample(std::int64_t i, std::uint64_t epoch_seed) const {
  return transformed(i, epoch_seed, SIZE_MAX);
}

Sample ImageDataset::transformed(std::int64_t i, std::uint64_t epoch_seed, std::size_t end) const {
  const ImageRef& f = files_.at(static_cast<std::size_t>(i));
  const int channels = static_cast<int>(options_.channels);
  if (!options_.pipeline) return Sample{read_image(f, channels), {}};
  AugmentRng rng(sample_seed(epoch_seed, i));
  if (const RegionStep* lead = options_.pipeline->leading_region()) {
    // A RandomResizedCrop first: decode the rectangle it keeps and nothing more (the same pixels).
    Sample s{
        decode_image_region(read_encoded(f), f.name(), channels, [&](int h, int w) { return lead->region(h, w, rng); }),
        {}};
    lead->apply_region(s);
    options_.pipeline->run_from(1, s, rng, end);
    return s;
  }
  Sample s{read_image(f, channels), {}};
  options_.pipeline->run_from(0, s, rng, end);
  return s;
}

void ImageDataset::write_chw(const Sample& s, const ImageRef& file, const std::vector<std::int64_t>& want, float* out,
                             const PlanarStep* planar) const {
  const cv::Mat& img = s.image;
  const std::vector<std::int64_t> shape = {img.channels(), img.rows, img.cols};
  GB_CHECK(want.empty() || shape == want, InvalidArgument,
           file.name() << ": the image comes out " << shape_text(shape) << " (CxHxW) but the data set's samples are "
                       << shape_text(want),
           "give every image one size: add a Resize (or RandomResizedCrop) step to data.train_transforms and a "
           "Resize/CenterCrop to data.eval_transforms");
  if (planar != nullptr) return planar->apply_planar(img, out);  // the pipeline's last step, fused
  // HWC -> CHW by splitting into planes that are the output's own memory (no transposing copy).
  const int c = img.channels();
  std::vector<cv::Mat> planes;
  for (int k = 0; k < c; ++k)
    planes.emplace_back(img.rows, img.cols, CV_32FC1, out + static_cast<std::ptrdiff_t>(k) * img.rows * img.cols);
  cv::Mat f;
  if (img.depth() == CV_32F) {
    f = img;
  } else {
    img.convertTo(f, CV_32F, 1.0 / 255.0);
  }
  if (c == 1) {
    f.copyTo(planes[0]);
  } else {
    cv::split(f, planes);
  }
  if (!options_.pipeline_normalizes && !options_.mean.empty()) {
    at::Tensor t = torch::from_blob(out, {c, img.rows, img.cols}, torch::kFloat);
    const at::Tensor m = torch::tensor(options_.mean, torch::kFloat).expand({c}).view({c, 1, 1});
    const at::Tensor sd = torch::tensor(options_.std, torch::kFloat).expand({c}).view({c, 1, 1});
    t.sub_(m).div_(sd);
  }
}

at::Tensor ImageDataset::to_tensor(const Sample& s, const ImageRef& file) const {
  at::Tensor t = torch::empty({s.image.channels(), s.image.rows, s.image.cols}, torch::kFloat);
  write_chw(s, file, options_.sample_shape, t.data_ptr<float>(), nullptr);
  return t;
}

at::Tensor ImageDataset::shuffled_order(std::uint64_t epoch_seed) const {
  if (shard_of_.empty() || options_.shuffle_buffer <= 0) return {};
  // webdataset's order: the shards shuffled, each read in order, through a shuffle buffer of
  // shuffle_buffer samples that starts yielding once it holds min(100, shuffle_buffer) samples.
  std::map<std::int64_t, std::vector<std::int64_t>> by_shard;
  for (std::size_t i = 0; i < shard_of_.size(); ++i) by_shard[shard_of_[i]].push_back(static_cast<std::int64_t>(i));
  std::vector<const std::vector<std::int64_t>*> shards;
  for (const auto& [k, members] : by_shard) shards.push_back(&members);
  AugmentRng rng(sample_seed(epoch_seed, -1));  // a stream no sample's draws use
  for (std::size_t i = shards.size(); i > 1; --i)
    std::swap(shards[i - 1], shards[static_cast<std::size_t>(rng.randint(0, static_cast<std::int64_t>(i) - 1))]);
  const auto bufsize = static_cast<std::size_t>(options_.shuffle_buffer);
  const std::size_t initial = std::min<std::size_t>(100, bufsize);
  std::vector<std::int64_t> order, buf;
  order.reserve(shard_of_.size());
  const auto pick = [&] {
    const auto k = static_cast<std::size_t>(rng.randint(0, static_cast<std::int64_t>(buf.size()) - 1));
    std::swap(buf[k], buf.back());
    order.push_back(buf.back());
    buf.pop_back();
  };
  std::vector<std::int64_t> stream;
  stream.reserve(shard_of_.size());
  for (const auto* members : shards) stream.insert(stream.end(), members->begin(), members->end());
  for (std::size_t next = 0; next < stream.size();) {
    buf.push_back(stream[next++]);
    if (buf.size() < bufsize && next < stream.size()) buf.push_back(stream[next++]);
    if (buf.size() >= initial) pick();
  }
  while (!buf.empty()) pick();
  return torch::tensor(order, torch::kLong);
}

Batch ImageDataset::get_epoch_batch(const at::Tensor& indices, std::uint64_t epoch_seed) const {
  const at::Tensor idx = indices.to(torch::kCPU, torch::kLong).contiguous();
  const std::int64_t n = idx.numel();
  const std::int64_t* p = idx.const_data_ptr<std::int64_t>();
  // Each sample goes straight into its slot of the batch: no per-sample tensor, no stack.
  Batch b;
  b.inputs = torch::empty({0}, torch::kFloat);
  std::vector<std::int64_t> shape = options_.sample_shape;
  // A trailing Normalize writes the batch's planes itself (no float HWC image in between).
  const PlanarStep* planar = options_.pipeline ? options_.pipeline->trailing_planar() : nullptr;
  const std::size_t end = planar != nullptr ? options_.pipeline->size() - 1 : SIZE_MAX;
  for (std::int64_t k = 0; k < n; ++k) {
    GB_CHECK(p[k] >= 0 && p[k] < size(), InvalidArgument,
             "sample index " << p[k] << " is out of range for " << size() << " images", "");
    const Sample s = transformed(p[k], epoch_seed, end);
    if (k == 0) {
      if (shape.empty()) shape = {s.image.channels(), s.image.rows, s.image.cols};
      std::vector<std::int64_t> batch_shape = {n};
      batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
      b.inputs = pooled_empty(batch_shape);  // recycled memory: no page faults per batch
    }
    write_chw(s, files_[static_cast<std::size_t>(p[k])], shape, b.inputs[k].data_ptr<float>(), planar);
  }
  b.targets = labels_.index_select(0, idx);
  b.indices = idx;
  return b;
}

std::vector<TransformSpec> training_transforms(const DataOptions& o) {
  std::vector<TransformSpec> out = o.train_transforms;
  if (o.augment_preset.empty()) return out;
  const bool normalizes = pipeline_normalizes(out);
  std::optional<TransformSpec> last;
  if (normalizes) {
    last = out.back();
    out.pop_back();
  }
  for (TransformSpec& s : preset_transforms(o.augment_preset)) out.push_back(std::move(s));
  if (last) out.push_back(*last);
  return out;
}

Splits load_image_folder(const DataOptions& o) {
  const fs::path root = o.root;
  std::error_code ec;
  GB_CHECK(fs::is_directory(root, ec), NotFound, "data.root = " << root.string() << " is not a folder",
           "point data.root at the folder of class folders (or of train/ val/ test/)");

  // The items and their splits.
  std::vector<std::string> classes = o.class_names;
  std::vector<Item> items;
  const auto sub = [&](std::initializer_list<const char*> names) -> fs::path {
    for (const char* n : names)
      if (fs::is_directory(root / n, ec)) return root / n;
    return {};
  };
  const fs::path train_dir = sub({"train", "training"});
  const fs::path meta = o.metadata.empty() ? fs::path() : root / o.metadata;
  const bool has_meta = !meta.empty() && fs::is_regular_file(meta, ec);
  // Real-valued targets live in metadata.csv: class folders cannot carry them.
  const bool real = o.task != TaskKind::kClassification;
  GB_CHECK(!real || has_meta, NotFound,
           "data.task = \"" << name_of(o.task) << "\" reads data.target_columns from " << meta.string()
                            << ", which does not exist",
           "write a metadata.csv with a file_name column and the target columns");
  GB_CHECK(!real || o.split_by != SplitBy::kFolders, InvalidArgument,
           "data.split_by = \"folders\" splits by class folders, but data.task = \"" << name_of(o.task)
                                                                                     << "\" reads metadata.csv",
           "use split_by = \"column\", \"date\" or \"random\"");
  bool use_folders = !real && (o.split_by == SplitBy::kFolders || (o.split_by == SplitBy::kAuto && !train_dir.empty()));
  GB_CHECK(o.split_by != SplitBy::kFolders || !train_dir.empty(), NotFound,
           "data.split_by = \"folders\" but " << root.string() << " has no train/ folder",
           "put the splits in train/, val/ and test/ folders, or use split_by = \"random\"");
  GB_CHECK(!(o.split_by == SplitBy::kColumn || o.split_by == SplitBy::kDate) || has_meta, NotFound,
           "data.split_by = \"" << name_of(o.split_by) << "\" needs " << meta.string(),
           "write a metadata.csv with file_name, label and split (or date) columns");
  if (use_folders) {
    if (!o.class_names.empty()) classes = o.class_names;
    items = scan_class_folders(train_dir, classes, "train");
    const fs::path val_dir = sub({"val", "validation", "valid"});
    const fs::path test_dir = sub({"test", "testing"});
    if (!val_dir.empty()) {
      auto v = scan_class_folders(val_dir, classes, "val");
      items.insert(items.end(), v.begin(), v.end());
    }
    if (!test_dir.empty()) {
      auto t = scan_class_folders(test_dir, classes, "test");
      items.insert(items.end(), t.begin(), t.end());
    }
  } else if (has_meta && o.split_by != SplitBy::kRandom) {
    items = read_metadata(root, meta, o, classes);
    if (o.split_by == SplitBy::kDate) {
      for (auto& it : items) {
        GB_CHECK(!it.date.empty(), DataLoss, it.ref.name() << ": no date", "give every row a date");
        it.split = it.date < o.val_from ? "train" : it.date < o.test_from ? "val" : "test";
      }
    }
  } else if (has_meta) {
    items = read_metadata(root, meta, o, classes);
    for (auto& it : items) it.split.clear();
  } else {
    items = scan_class_folders(root, classes, "");
  }
  return build_splits(std::move(items), std::move(classes), o, root.string());
}

namespace {

// Lists the shards of one split: the brace-expanded pattern, relative to data.root.
std::vector<fs::path> shard_list(const DataOptions& o, const std::string& pattern, const char* key) {
  std::vector<fs::path> out;
  for (const std::string& name : expand_braces(pattern)) {
    const fs::path p = fs::path(name).is_absolute() ? fs::path(name) : fs::path(o.root) / name;
    out.push_back(p);
  }
  GB_CHECK(!out.empty(), InvalidArgument, "data." << key << " = \"" << pattern << "\" names no shard",
           "e.g. train-{000000..000009}.tar");
  return out;
}

// The label of a webdataset sample as text: the label member's bytes, or a JSON field.
std::string sample_label(const ShardIndex& ix, const ShardSample& smp, const DataOptions& o) {
  const std::string where = ix.shard.string() + ": sample " + smp.key;
  const ShardMember* m = smp.find(o.label_key);
  GB_CHECK(
      m != nullptr, DataLoss,
      where << " has no ." << o.label_key << " member (its members: " <<
          [&] {
            std::string list;
            for (const auto& [suffix, mem] : smp.parts) list += (list.empty() ? "." : ", .") + suffix;
            return list;
          }()
            << ")",
      "give every sample its label member, or set data.label_key to the suffix that holds it");
  std::string text = read_member(ix.shard, *m);
  if (o.label_key == "json") {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      GB_THROW(DataLoss, where << ": the .json member is not valid JSON (" << e.what() << ")", "fix the member");
    }
    GB_CHECK(j.is_object() && j.contains(o.label_column), DataLoss,
             where << ": the .json member has no field '" << o.label_column << "'",
             "set data.label_column to the JSON field holding the class");
    const nlohmann::json& v = j[o.label_column];
    GB_CHECK(v.is_number_integer() || v.is_string(), DataLoss,
             where << ": the .json field '" << o.label_column << "' is not an integer or a class name",
             "store the class index or its name");
    return v.is_string() ? v.get<std::string>() : std::to_string(v.get<std::int64_t>());
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  text.erase(0, i);
  GB_CHECK(!text.empty(), DataLoss, where << ": the ." << o.label_key << " member is empty",
           "store the class index (or name) in it");
  return text;
}

// The member holding a sample's image: data.image_key, else the first with an image extension.
const ShardMember* sample_image(const ShardSample& smp, const DataOptions& o) {
  if (!o.image_key.empty()) return smp.find(o.image_key);
  for (const auto& [suffix, m] : smp.parts) {
    const std::size_t dot = suffix.rfind('.');
    if (is_image_file("x." + (dot == std::string::npos ? suffix : suffix.substr(dot + 1)))) return &m;
  }
  return nullptr;
}

}  // namespace

Splits load_webdataset(const DataOptions& o) {
  struct Listed {
    std::string split;
    const char* key;
    std::vector<fs::path> shards;
  };
  std::vector<Listed> lists;
  lists.push_back({"train", "train_shards", shard_list(o, o.train_shards, "train_shards")});
  if (!o.val_shards.empty()) lists.push_back({"val", "val_shards", shard_list(o, o.val_shards, "val_shards")});
  if (!o.test_shards.empty()) lists.push_back({"test", "test_shards", shard_list(o, o.test_shards, "test_shards")});
  // Index every shard (in parallel: a shard is a few thousand header reads).
  std::vector<std::pair<std::size_t, std::size_t>> jobs;
  for (std::size_t l = 0; l < lists.size(); ++l)
    for (std::size_t k = 0; k < lists[l].shards.size(); ++k) jobs.emplace_back(l, k);
  std::vector<ShardIndex> indexes(jobs.size());
  std::vector<std::exception_ptr> errors(jobs.size());
  at::parallel_for(0, static_cast<std::int64_t>(jobs.size()), 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t j = b; j < e; ++j) {
      const auto& [l, k] = jobs[static_cast<std::size_t>(j)];
      try {
        indexes[static_cast<std::size_t>(j)] = index_shard(lists[l].shards[k]);
      } catch (...) {
        errors[static_cast<std::size_t>(j)] = std::current_exception();
      }
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  // Samples become items; labels are integers, or class names encoded like a metadata label column.
  std::vector<Item> items;
  std::vector<std::string> names;
  Splits skipped_holder;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const ShardIndex& ix = indexes[j];
    for (const ShardSample& smp : ix.samples) {
      const ShardMember* img = sample_image(smp, o);
      if (img == nullptr) {
        const std::string what = ix.shard.string() + ": sample " + smp.key + " has no image member" +
                                 (o.image_key.empty() ? std::string() : " ." + o.image_key);
        GB_CHECK(o.on_bad_image == OnBadImage::kSkip, DataLoss, what,
                 "add the image, set data.image_key to its suffix, or set data.on_bad_image = \"skip\"");
        skipped_holder.skipped_files.push_back(what);
        continue;
      }
      Item it;
      it.ref.file = ix.shard;
      it.ref.member = img->name;
      it.ref.offset = img->offset;
      it.ref.size = img->size;
      it.ref.bytes = img->bytes;
      it.split = lists[jobs[j].first].split;
      it.shard = static_cast<std::int64_t>(jobs[j].second);
      names.push_back(sample_label(ix, smp, o));
      items.push_back(std::move(it));
    }
  }
  GB_CHECK(!items.empty(), DataLoss, "the shards of data.train_shards hold no samples",
           "check the shard pattern; samples are members named KEY.jpg + KEY.cls");
  // Classes: data.class_names, else classes.txt beside the first training shard (one per line,
  // written by glassbox data pack), else the integer labels themselves (0..max).
  std::vector<std::string> classes = o.class_names;
  const fs::path classes_txt = lists[0].shards.front().parent_path() / "classes.txt";
  std::error_code ec;
  if (classes.empty() && fs::is_regular_file(classes_txt, ec)) {
    std::string line;
    std::istringstream in(read_file(classes_txt));
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) classes.push_back(line);
    }
  }
  const bool integers = all_integers(names);
  if (classes.empty()) {
    std::vector<std::string> distinct(names.begin(), names.end());
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (integers) {
      std::int64_t top = 0;
      for (const auto& n : distinct) top = std::max<std::int64_t>(top, std::stoll(n));
      for (std::int64_t k = 0; k <= top; ++k) classes.push_back(std::to_string(k));
    } else {
      classes = distinct;
    }
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::int64_t label = -1;
    if (integers) {
      label = std::stoll(names[i]);
    } else {
      const auto f = std::find(classes.begin(), classes.end(), names[i]);
      if (f != classes.end()) label = f - classes.begin();
    }
    GB_CHECK(label >= 0 && label < static_cast<std::int64_t>(classes.size()), DataLoss,
             items[i].ref.name() << ": label '" << names[i] << "' is not one of the " << classes.size() << " classes",
             "list every class in data.class_names (or classes.txt beside the shards)");
    items[i].label = label;
  }
  Splits out = build_splits(std::move(items), std::move(classes), o, lists[0].shards.front().parent_path().string());
  out.skipped_files.insert(out.skipped_files.begin(), skipped_holder.skipped_files.begin(),
                           skipped_holder.skipped_files.end());
  return out;
}

}  // namespace glassbox::data
