// glassbox data pack: image folders (or any image data a config reads) as WebDataset shards.
// Tested by cli/images_cli_test.cpp (packed shards read back by Python's webdataset, refusals, a cut JPEG).
#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/app/data.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/progress.h"
#include "glassbox/data/image.h"
#include "glassbox/data/image_folder.h"
#include "glassbox/data/source.h"
#include "glassbox/data/webdataset.h"
#include "glassbox/train/run_config.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

// The sample key of an image: its path under `root` without the extension, dots made '_'.
std::string sample_key(const data::ImageRef& ref, const fs::path& root) {
  fs::path rel;
  if (!ref.member.empty()) {
    rel = data::split_member_name(ref.member).first;
  } else {
    rel = ref.file.lexically_relative(root);
    if (rel.empty() || rel.native().rfind("..", 0) == 0) rel = ref.file.filename();
    rel.replace_extension();
  }
  std::string key = rel.generic_string();
  const std::size_t slash = key.rfind('/');
  for (std::size_t i = slash == std::string::npos ? 0 : slash + 1; i < key.size(); ++i)
    if (key[i] == '.') key[i] = '_';
  if (key.empty() || key.back() == '/') key += "image";
  return key;
}

std::string image_suffix(const data::ImageRef& ref) {
  std::string ext = fs::path(ref.member.empty() ? ref.file.string() : ref.member).extension().string();
  if (!ext.empty()) ext.erase(0, 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace

PackOutcome pack_shards(const PackRequest& r) {
  GB_CHECK(!r.out.empty(), InvalidArgument, "no output pattern given", "pass --out shards/train-%06d.tar");
  GB_CHECK(r.split == "train" || r.split == "val" || r.split == "test", InvalidArgument,
           "--split must be train, val or test, got '" << r.split << "'", "or put {split} in --out");
  std::error_code ec;
  GB_CHECK(fs::exists(r.source, ec), NotFound, r.source.string() << " does not exist",
           "give an image folder or a training config");
  data::DataOptions d;
  if (fs::is_directory(r.source, ec)) {
    GB_CHECK(r.overrides.empty(), InvalidArgument, "--set applies to a config, not to the folder " << r.source.string(),
             "write a config, or leave --set out");
    d.format = data::DataFormat::kImageFolder;
    d.root = r.source.string();
    d.val_size = 0;
    d.test_size = 0;
  } else {
    d = train::load_run_config(r.source, r.overrides).data.source;
    GB_CHECK(data::is_image_format(d.format), InvalidArgument,
             r.source.string() << " reads " << name_of(d.format) << " data, not images",
             "glassbox data write-images turns it into an image folder first");
  }
  const fs::path root = d.root;
  d.normalize = false;     // nothing is decoded for statistics
  d.check_images = false;  // every image is decoded below instead
  d.train_transforms.clear();
  d.eval_transforms.clear();
  // With on_bad_image = "skip" the loader decodes every image and leaves the bad ones out;
  // otherwise every image is decoded below, before anything is written.
  const bool skip_bad = d.on_bad_image == data::OnBadImage::kSkip;
  require_class_labels(d, "glassbox data pack");
  const data::Splits s = data::load_splits(d);

  const bool per_split = r.out.find("{split}") != std::string::npos;
  std::vector<std::pair<std::string, std::shared_ptr<const data::Dataset>>> chosen;
  for (const auto& [name, ds] : {std::pair{"train", s.train}, std::pair{"val", s.val}, std::pair{"test", s.test}})
    if (ds && ds->size() > 0 && (per_split || r.split == name)) chosen.emplace_back(name, ds);
  GB_CHECK(!chosen.empty(), NotFound, r.source.string() << " has no " << r.split << " split",
           "choose --split train (a plain class folder is all train), or put {split} in --out");

  PackOutcome o;
  o.classes = s.class_names;
  // The samples of every chosen split, each image decoded once (in parallel) before anything is written.
  struct Job {
    std::string split;
    data::ImageRef ref;
    std::int64_t label;
    std::string error;
  };
  std::vector<Job> jobs;
  for (const auto& [name, ds] : chosen) {
    const auto& images = dynamic_cast<const data::ImageDataset&>(*ds);
    const at::Tensor y = images.all_targets();
    std::vector<std::int64_t> order(static_cast<std::size_t>(images.size()));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
    if (r.shuffle_seed >= 0) {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(r.shuffle_seed));
      const at::Tensor perm = at::randperm(images.size(), gen, at::kLong);
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = perm[static_cast<std::int64_t>(i)].item<std::int64_t>();
    }
    for (const std::int64_t i : order)
      jobs.push_back({name, images.files()[static_cast<std::size_t>(i)], y[i].item<std::int64_t>(), ""});
  }
  o.skipped = s.skipped_files;
  if (!skip_bad) {
    ProgressBar check(std::cerr, jobs.size() > 2000);
    check.start("checking images", static_cast<std::int64_t>(jobs.size()));
    std::atomic<std::int64_t> done{0};
    std::mutex mu;
    at::parallel_for(0, static_cast<std::int64_t>(jobs.size()), 16, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        try {
          data::read_image(jobs[static_cast<std::size_t>(i)].ref, 0);
        } catch (const Error& err) {
          jobs[static_cast<std::size_t>(i)].error = err.message();
        }
      }
      done += e - b;
      std::lock_guard<std::mutex> lk(mu);
      check.update(done.load(), "", 0.0);
    });
    check.finish(fmt::format("{} images", jobs.size()));
    for (const Job& j : jobs)
      GB_CHECK(j.error.empty(), DataLoss, j.error << " (nothing was written)",
               "replace or delete the file, or set data.on_bad_image = \"skip\" in a config to leave it out");
  }

  // classes.txt beside the shards: written when absent, else it must say the same.
  std::string classes_text;
  for (const auto& c : o.classes) classes_text += c + "\n";
  std::vector<std::unique_ptr<data::ShardWriter>> writers;
  std::map<std::string, data::ShardWriter*> by_split;
  std::set<fs::path> dirs;
  for (const auto& [name, ds] : chosen) {
    std::string pattern = r.out;
    for (std::size_t at; (at = pattern.find("{split}")) != std::string::npos;) pattern.replace(at, 7, name);
    writers.push_back(std::make_unique<data::ShardWriter>(pattern, r.maxcount, r.maxsize));
    by_split[name] = writers.back().get();
    // Refuse before writing anything when the first shard's name is taken.
    const std::string first = writers.back()->shard_name(0);
    GB_CHECK(!fs::exists(first, ec), AlreadyExists, "the shard " << first << " already exists",
             "write to an empty folder or another pattern (glassbox never overwrites shards)");
    dirs.insert(fs::absolute(fs::path(first)).parent_path());
  }
  for (const fs::path& dir : dirs) {
    const fs::path txt = dir / "classes.txt";
    if (fs::exists(txt, ec))
      GB_CHECK(read_file(txt) == classes_text, AlreadyExists,
               txt.string() << " exists and names other classes than " << r.source.string(),
               "pack into an empty folder");
  }
  ProgressBar bar(std::cerr, jobs.size() > 2000);
  bar.start("packing", static_cast<std::int64_t>(jobs.size()));
  std::map<std::string, std::set<std::string>> keys;
  std::int64_t written = 0;
  for (const Job& j : jobs) {
    std::string key = sample_key(j.ref, root);
    for (int n = 2; !keys[j.split].insert(key).second; ++n) key = sample_key(j.ref, root) + "_" + std::to_string(n);
    by_split[j.split]->write(key, {{image_suffix(j.ref), data::read_encoded(j.ref)}, {"cls", std::to_string(j.label)}});
    o.samples[j.split] += 1;
    bar.update(++written, "", 0.0);
  }
  bar.finish(fmt::format("{} samples", written));
  for (const fs::path& dir : dirs) {
    const fs::path txt = dir / "classes.txt";
    if (!fs::exists(txt, ec)) write_file_atomic(txt, classes_text);
  }
  for (const auto& [name, w] : by_split) {
    w->close();
    o.shards[name] = w->shards();
  }
  return o;
}

}  // namespace glassbox::app
