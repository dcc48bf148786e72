#include "glassbox/data/webdataset.h"

#include <fstream>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/image.h"
#include "glassbox/data/image_folder.h"
#include "glassbox/data/loader.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.one_line();
  }
  return "<no error>";
}

json reference(const std::vector<std::string>& args) {
  return json::parse(testing::run_python("tests/reference/wds_ref.py", args));
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// glassbox's reading of a shard in the reference's JSON shape (key + parts as hex).
json glassbox_samples(const fs::path& shard) {
  json out = json::array();
  const ShardIndex ix = index_shard(shard);
  for (const ShardSample& s : ix.samples) {
    json parts = json::object();
    for (const auto& [suffix, m] : s.parts) parts[suffix] = hex(read_member(shard, m));
    out.push_back({{"key", s.key}, {"parts", parts}});
  }
  return out;
}

json without_urls(json samples) {
  for (auto& s : samples) s.erase("url");
  return samples;
}

TEST(BraceExpansion, EqualsPythonBraceexpand) {
  const std::vector<std::string> patterns = {"train-{000000..000003}.tar",
                                             "a{b,c{d,e}}f",
                                             "{1..10..3}",
                                             "{10..1..4}",
                                             "{-3..2}",
                                             "{-03..3}",
                                             "{01..1}",
                                             "{a..e}",
                                             "{x..B}",
                                             "{E..b..2}",
                                             "\\{a,b\\}",
                                             "{a}",
                                             "{}",
                                             "x{a,}y",
                                             "{a,b}{1..2}",
                                             "s3://b/{0..2}/p{a,b}.tar",
                                             "{0..0}",
                                             "{,}"};
  const json ref = reference([&] {
    std::vector<std::string> a = {"expand"};
    a.insert(a.end(), patterns.begin(), patterns.end());
    return a;
  }());
  ASSERT_EQ(ref.size(), patterns.size());
  for (std::size_t i = 0; i < patterns.size(); ++i) EXPECT_EQ(json(expand_braces(patterns[i])), ref[i]) << patterns[i];
  EXPECT_NE(message_of([] { expand_braces("a{b,c"); }).find("unbalanced braces"), std::string::npos);
}

TEST(ShardIndex, GroupsMembersAsPythonWebdatasetDoes) {
  const fs::path dir = testing::temp_dir("wds_tricky");
  const fs::path tar = dir / "tricky.tar";
  const json ref = reference({"tricky", tar.string()});
  ASSERT_GE(ref.size(), 6u);
  EXPECT_EQ(glassbox_samples(tar), without_urls(ref));
}

TEST(ShardIndex, ReadsWhatPythonShardWriterWrote) {
  const fs::path dir = testing::temp_dir("wds_pywrite");
  const std::string pattern = (dir / "py-%03d.tar").string();
  const json written = reference({"write", pattern, "7", "4000", "23"});
  ASSERT_EQ(written.size(), 23u);
  json got = json::array();
  std::set<std::string> shards;
  for (const auto& w : written) shards.insert(w["shard"].get<std::string>());
  for (const auto& shard : shards)
    for (const auto& s : glassbox_samples(shard)) got.push_back(s);
  json want = json::array();
  for (const auto& w : written) want.push_back({{"key", w["key"]}, {"parts", w["parts"]}});
  EXPECT_EQ(got, want);
}

TEST(ShardWriter, SplitsShardsAsPythonAndPythonReadsThem) {
  // The same samples through Python's ShardWriter and glassbox's: the same shards, byte-equal
  // members, and Python's webdataset reads glassbox's shards back as written.
  const fs::path dir = testing::temp_dir("wds_gbwrite");
  const json written = reference({"write", (dir / "py-%03d.tar").string(), "7", "4000", "23"});
  ShardWriter w((dir / "gb-%03d.tar").string(), 7, 4000);
  for (const auto& s : written) {
    std::vector<std::pair<std::string, std::string>> parts;
    for (const auto& [suffix, h] : s["parts"].items()) {
      std::string bytes;
      const std::string hx = h.get<std::string>();
      for (std::size_t i = 0; i < hx.size(); i += 2)
        bytes += static_cast<char>(std::stoi(hx.substr(i, 2), nullptr, 16));
      parts.emplace_back(suffix, bytes);
    }
    w.write(s["key"].get<std::string>(), parts);
  }
  EXPECT_FALSE(fs::exists(dir / "gb-000.tar"));  // partial names until close
  w.close();
  std::set<std::string> py_shards;
  for (const auto& s : written) py_shards.insert(fs::path(s["shard"].get<std::string>()).filename().string());
  ASSERT_EQ(w.shards().size(), py_shards.size());
  json ours =
      reference({"read", (dir / ("gb-{000.." + fmt::format("{:03d}", w.shards().size() - 1) + "}.tar")).string()});
  json want = json::array();
  for (const auto& s : written) want.push_back({{"key", s["key"]}, {"parts", s["parts"]}});
  EXPECT_EQ(without_urls(ours), want);
  // Sample by sample, the same shard as Python's ShardWriter chose.
  std::size_t k = 0;
  for (std::size_t shard = 0; shard < w.shards().size(); ++shard)
    for (const auto& s : glassbox_samples(w.shards()[shard]))
      EXPECT_EQ(fs::path(written[k++]["shard"].get<std::string>()).filename().string(),
                fmt::format("py-{:03d}.tar", shard))
          << s["key"];
  EXPECT_EQ(k, written.size());
}

TEST(ShardWriter, RefusesToOverwriteAndLeavesNothingWhenAbandoned) {
  const fs::path dir = testing::temp_dir("wds_refuse");
  {
    ShardWriter w((dir / "a-%02d.tar").string(), 2);
    w.write("k0", {{"cls", "0"}});
    w.write("k1", {{"cls", "1"}});
    w.write("k2", {{"cls", "1"}});
    // destroyed without close(): a failed pack
  }
  EXPECT_TRUE(fs::is_empty(dir));
  ShardWriter ok((dir / "b-%02d.tar").string());
  ok.write("k", {{"cls", "0"}});
  ok.close();
  ShardWriter again((dir / "b-%02d.tar").string());
  EXPECT_NE(message_of([&] { again.write("k", {{"cls", "0"}}); }).find("already exists"), std::string::npos);
  EXPECT_NE(message_of([&] { ShardWriter((dir / "c.tar").string()); }).find("exactly one %d"), std::string::npos);
  EXPECT_NE(message_of([&] { ShardWriter((dir / "c-%s.tar").string()); }).find("not an integer conversion"),
            std::string::npos);
  ShardWriter dotted((dir / "d-%02d.tar").string());
  EXPECT_NE(message_of([&] { dotted.write("a.b", {}); }).find("has a dot in its file name part"), std::string::npos);
  dotted.write("dir.v2/a", {{"cls", "1"}});  // dots in folder names are fine
}

TEST(ShardIndex, ACutShardNamesItselfAndTheMember) {
  const fs::path dir = testing::temp_dir("wds_cut");
  ShardWriter w((dir / "s-%d.tar").string());
  for (int i = 0; i < 4; ++i)
    w.write(fmt::format("k{}", i), {{"jpg", std::string(5000, static_cast<char>('a' + i))}, {"cls", "0"}});
  w.close();
  const std::string whole = read_file(dir / "s-0.tar");
  const auto cut = [&](std::size_t n) {
    const fs::path p = dir / fmt::format("cut-{}.tar", n);
    std::ofstream(p, std::ios::binary) << whole.substr(0, n);
    return message_of([&] { index_shard(p); });
  };
  // In the middle of k2.jpg's data, and in the middle of a header.
  const std::string mid_data = cut(whole.size() / 2 + 700);
  EXPECT_NE(mid_data.find("cut short"), std::string::npos) << mid_data;
  EXPECT_NE(mid_data.find("cut-"), std::string::npos) << mid_data;
  const std::string mid_header = cut(512 * 3 + 5000 + 100);
  EXPECT_NE(mid_header.find("cut-"), std::string::npos) << mid_header;
  EXPECT_NE(mid_header.find("re-copy"), std::string::npos) << mid_header;
  EXPECT_NE(cut(0).find("empty"), std::string::npos);
  EXPECT_NE(message_of([&] { index_shard(dir / "missing.tar"); }).find("does not exist"), std::string::npos);
}

// A shard set of small PNGs: sample i of shard s has the gray value 10 * s + i and class i % 3.
DataOptions shard_options(const fs::path& dir, int shards, int per_shard) {
  std::vector<std::pair<std::string, std::string>> parts;
  ShardWriter w((dir / "train-%04d.tar").string(), per_shard);
  for (int s = 0; s < shards; ++s)
    for (int i = 0; i < per_shard; ++i)
      w.write(fmt::format("s{}/{:03d}", s, i),
              {{"png", encode_png(cv::Mat(4, 3, CV_8UC1, cv::Scalar(10 * s + i)))}, {"cls", std::to_string(i % 3)}});
  w.close();
  DataOptions o;
  o.format = DataFormat::kWebDataset;
  o.root = dir.string();
  o.train_shards = fmt::format("train-{{0000..{:04d}}}.tar", shards - 1);
  o.val_size = 0;
  o.test_size = 0;
  o.normalize = false;
  return o;
}

TEST(WebDatasetSource, LoadsSamplesLabelsAndClassNames) {
  const fs::path dir = testing::temp_dir("wds_load");
  DataOptions o = shard_options(dir, 3, 5);
  write_file_atomic(dir / "classes.txt", "cat\ndog\nowl\n");
  const Splits s = load_splits(o);
  ASSERT_EQ(s.train->size(), 15);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"cat", "dog", "owl"}));
  const Batch b = s.train->get_batch(torch::tensor({0, 6, 14}));
  EXPECT_EQ(b.targets[0].item<std::int64_t>(), 0);
  EXPECT_EQ(b.targets[1].item<std::int64_t>(), 1);
  EXPECT_EQ(b.targets[2].item<std::int64_t>(), 1);
  EXPECT_NEAR(b.inputs[1].mean().item<double>(), 11.0 / 255, 1e-6);  // shard 1, sample 1
  EXPECT_NEAR(b.inputs[2].mean().item<double>(), 24.0 / 255, 1e-6);
  // Stratified validation and test carved from the training shards.
  o.val_size = 3;
  o.test_size = 3;
  const Splits c = load_splits(o);
  EXPECT_EQ(c.train->size(), 9);
  EXPECT_EQ(c.val->size(), 3);
  EXPECT_EQ(c.test->size(), 3);
  EXPECT_EQ(std::get<0>(at::_unique(c.test->all_targets())).numel(), 3);
}

TEST(WebDatasetSource, ShardOrderIsSeededLocalAndTheSameForAnyWorkerCount) {
  const fs::path dir = testing::temp_dir("wds_order");
  DataOptions o = shard_options(dir, 4, 6);
  o.shuffle_buffer = 1;  // no mixing across the buffer: shards in a shuffled order, each in order
  const Splits s = load_splits(o);
  const at::Tensor a = s.train->shuffled_order(7);
  ASSERT_TRUE(a.defined());
  EXPECT_TRUE(at::equal(std::get<0>(a.sort()), at::arange(24)));
  std::vector<std::int64_t> shard_seq;
  for (std::int64_t i = 0; i < 24; ++i) {
    const std::int64_t idx = a[i].item<std::int64_t>();
    if (i % 6 == 0) shard_seq.push_back(idx / 6);
    EXPECT_EQ(idx / 6, shard_seq.back()) << "sample " << i << " left its shard";
    if (i % 6 > 0) {
      EXPECT_EQ(idx, a[i - 1].item<std::int64_t>() + 1);
    }
  }
  bool differs = false;
  for (std::uint64_t seed = 8; seed < 20 && !differs; ++seed) differs = !at::equal(s.train->shuffled_order(seed), a);
  EXPECT_TRUE(differs);
  EXPECT_TRUE(at::equal(s.train->shuffled_order(7), a));
  // A buffer of 10 mixes neighbouring samples but keeps every sample exactly once.
  o.shuffle_buffer = 10;
  const Splits m = load_splits(o);
  const at::Tensor mixed = m.train->shuffled_order(7);
  EXPECT_TRUE(at::equal(std::get<0>(mixed.sort()), at::arange(24)));
  EXPECT_FALSE(at::equal(mixed, a));
  // The loader uses that order, and the batches do not depend on the worker count.
  const auto batches = [&](std::int64_t workers) {
    LoaderOptions lo;
    lo.batch_size = 5;
    lo.shuffle = true;
    lo.num_workers = workers;
    lo.seed = 3;
    Loader l(m.train, lo);
    l.start_epoch(1);
    std::vector<at::Tensor> out;
    while (auto b = l.next()) out.push_back(b->inputs);
    return torch::cat(out);
  };
  const at::Tensor w0 = batches(0);
  EXPECT_TRUE(at::equal(w0, batches(2)));
  LoaderOptions lo;
  lo.shuffle = true;
  lo.seed = 3;
  EXPECT_TRUE(at::equal(Loader(m.train, lo).epoch_order(1), m.train->shuffled_order(epoch_seed(3, 1))));
}

TEST(WebDatasetSource, JsonLabelsMissingMembersAndSkips) {
  const fs::path dir = testing::temp_dir("wds_json");
  ShardWriter w((dir / "j-%d.tar").string());
  const std::string png = encode_png(cv::Mat(4, 3, CV_8UC3, cv::Scalar(1, 2, 3)));
  w.write("a", {{"jpg", png}, {"json", R"({"species": "fern"})"}});
  w.write("b", {{"png", png}, {"json", R"({"species": "moss"})"}});
  w.write("c", {{"json", R"({"species": "moss"})"}});  // no image
  w.close();
  DataOptions o;
  o.format = DataFormat::kWebDataset;
  o.root = dir.string();
  o.train_shards = "j-0.tar";
  o.val_size = 0;
  o.test_size = 0;
  o.normalize = false;
  o.label_key = "json";
  o.label_column = "species";
  const std::string err = message_of([&] { load_splits(o); });
  EXPECT_NE(err.find("j-0.tar: sample c has no image member"), std::string::npos) << err;
  EXPECT_NE(err.find("on_bad_image"), std::string::npos) << err;
  o.on_bad_image = OnBadImage::kSkip;
  const Splits s = load_splits(o);
  EXPECT_EQ(s.train->size(), 2);
  EXPECT_EQ(s.class_names, (std::vector<std::string>{"fern", "moss"}));
  ASSERT_EQ(s.skipped_files.size(), 1u);
  o.label_key = "cls";
  const std::string no_label = message_of([&] { load_splits(o); });
  EXPECT_NE(no_label.find("sample a has no .cls member (its members: .jpg, .json)"), std::string::npos) << no_label;
  o.train_shards = "j-{0..1}.tar";
  EXPECT_NE(message_of([&] { load_splits(o); }).find("j-1.tar does not exist"), std::string::npos);
}

}  // namespace
}  // namespace glassbox::data
