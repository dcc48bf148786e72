// The glassbox binary on image data: shards packed for (and checked by) Python's webdataset,
// training on them, and bad image input answered with one line, exit 2 and nothing written.
#include <unistd.h>

#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "glassbox/base/files.h"
#include "glassbox/data/image.h"
#include "glassbox/testing/testing.h"

namespace glassbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string gb() { return testing::build_path("glassbox/cli/glassbox").string(); }

// root/<class>/<i>.png: 8x8 RGB images; class k is bright in channel k.
void write_folder(const fs::path& root, int classes, int per_class) {
  for (int k = 0; k < classes; ++k) {
    const std::string name(1, static_cast<char>('a' + k));
    fs::create_directories(root / name);
    for (int i = 0; i < per_class; ++i) {
      cv::Scalar colour(20 + i, 20 + i, 20 + i);
      colour[k % 3] = 200 + i;
      write_file_atomic(root / name / fmt::format("{}.png", i), data::encode_png(cv::Mat(8, 8, CV_8UC3, colour)));
    }
  }
}

// A small, fast training config reading `data` (TOML lines of the [data] table).
std::string config_text(const std::string& data, const std::string& extra = "") {
  return "[data]\n" + data +
         "val_size = 0\ntest_size = 0.25\n[data.loader]\nbatch_size = 4\n"
         "[model]\nname = \"cnn\"\n[model.cnn]\nchannels = [4]\nhidden = 8\n"
         "[trainer]\nmax_epochs = 1\nenable_progress_bar = false\nenable_model_summary = false\n" +
         extra;
}

std::string hex(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

int error_lines(const std::string& out) {
  int n = 0;
  for (std::size_t at = 0; (at = out.find("error:", at)) != std::string::npos; ++at) ++n;
  return n;
}

TEST(ImagesCli, PackedShardsArePythonWebDatasetsAndTrain) {
  const fs::path dir = testing::temp_dir("cli_pack");
  write_folder(dir / "imgs", 2, 6);
  const std::string pattern = (dir / "shards" / "train-%03d.tar").string();
  auto [rc, out] =
      testing::run_command(gb() + " data pack " + (dir / "imgs").string() + " --out " + pattern + " --maxcount 5");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("train: 12 samples in 3 shard(s)"), std::string::npos) << out;
  EXPECT_EQ(read_file(dir / "shards" / "classes.txt"), "a\nb\n");

  // Python's webdataset reads every image, byte for byte, with its class index.
  const json samples = json::parse(
      testing::run_python("tests/reference/wds_ref.py", {"read", (dir / "shards" / "train-{000..002}.tar").string()}));
  ASSERT_EQ(samples.size(), 12u);
  std::set<std::string> keys;
  for (const auto& s : samples) {
    const std::string key = s["key"];
    keys.insert(key);
    EXPECT_EQ(s["parts"]["png"], hex(read_file(dir / "imgs" / (key + ".png")))) << key;
    EXPECT_EQ(s["parts"]["cls"], hex(key.substr(0, 1) == "a" ? "0" : "1")) << key;
  }
  EXPECT_EQ(keys.size(), 12u);
  EXPECT_NE(samples[0]["key"], "a/0");  // shuffled before packing (--shuffle-seed 42)

  // Packing again onto existing shards is refused and changes nothing.
  const std::string before = read_file(dir / "shards" / "train-000.tar");
  auto [rc2, out2] =
      testing::run_command(gb() + " data pack " + (dir / "imgs").string() + " --out " + pattern + " --maxcount 5");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("train-000.tar already exists"), std::string::npos) << out2;
  EXPECT_EQ(read_file(dir / "shards" / "train-000.tar"), before);

  // Train on the shards (webdataset's shard shuffle + buffer), then inspect them.
  write_file_atomic(dir / "wds.toml", config_text("format = \"webdataset\"\nroot = \"" + (dir / "shards").string() +
                                                  "\"\ntrain_shards = \"train-{000..002}.tar\"\nshuffle_buffer = 4\n"));
  auto [rc3, out3] =
      testing::run_command(gb() + " train " + (dir / "wds.toml").string() + " --run-dir " + (dir / "run").string());
  ASSERT_EQ(rc3, 0) << out3;
  EXPECT_TRUE(fs::exists(dir / "run" / "summary.json"));
  auto [rc4, out4] = testing::run_command(gb() + " data inspect " + (dir / "wds.toml").string() + " --json");
  ASSERT_EQ(rc4, 0) << out4;
  const json report = json::parse(out4.substr(out4.find("{\n")));
  EXPECT_EQ(report["format"], "webdataset");
  EXPECT_EQ(report["classes"], json({"a", "b"}));
  EXPECT_EQ(report["files"], 12);
}

// Acceptance of bad input: one row per fault, each through `glassbox train` (or `data pack`).
TEST(ImagesCli, BadImageInputIsOneLineExitTwoAndWritesNothing) {
  struct Row {
    std::string name;
    std::function<void(const fs::path& root, const fs::path& dir)> plant;
    std::string expect;
    std::string extra_config = {};  // appended to the config (transforms)
    bool as_other_user = false;
    std::string data_lines = {};  // replaces the image-folder [data] lines when set
  };
  const auto jpeg = data::encode_jpeg(cv::Mat(16, 16, CV_8UC3, cv::Scalar(10, 120, 240)));
  const std::vector<Row> rows = {
      {"truncated JPEG",
       [&](const fs::path& r, const fs::path&) {
         write_file_atomic(r / "a" / "cut.jpg", jpeg.substr(0, jpeg.size() / 2));
       },
       "cut.jpg: truncated JPEG"},
      {"zero-byte file", [](const fs::path& r, const fs::path&) { write_file_atomic(r / "b" / "empty.png", ""); },
       "empty.png: empty file (0 bytes), not an image"},
      {"unsupported channel count",
       [](const fs::path& r, const fs::path&) {
         write_file_atomic(r / "a" / "bands.tif", testing::tiff_with_bands(5));
       },
       "bands.tif: unsupported channel count 5"},
      {"unreadable folder", [](const fs::path& r, const fs::path&) { fs::permissions(r / "b", fs::perms::none); },
       "cannot read the folder", "", true},
      {"empty class folder", [](const fs::path& r, const fs::path&) { fs::create_directories(r / "c"); },
       "holds no images"},
      {"metadata naming a missing file",
       [](const fs::path& r, const fs::path&) {
         write_file_atomic(r / "metadata.csv", "file_name,label\na/0.png,a\na/gone.png,a\nb/0.png,b\nb/1.png,b\n");
       },
       "file_name a/gone.png does not exist under"},
      {"shard cut in the middle",
       [](const fs::path& r, const fs::path& d) {
         auto [rc, out] =
             testing::run_command(gb() + " data pack " + r.string() + " --out " + (d / "shards" / "s-%d.tar").string());
         ASSERT_EQ(rc, 0) << out;
         const std::string whole = read_file(d / "shards" / "s-0.tar");
         write_file_atomic(d / "shards" / "s-0.tar", whole.substr(0, whole.size() / 2 + 300));
       },
       "s-0.tar", "", false, "format = \"webdataset\"\ntrain_shards = \"shards/s-0.tar\"\n"},
      {"unknown transform", [](const fs::path&, const fs::path&) {}, "name = \"RandomFlip\" is not one of",
       "[[data.train_transforms]]\nname = \"RandomFlip\"\n"},
      {"unknown parameter", [](const fs::path&, const fs::path&) {}, "did you mean \"data.train_transforms[0].limit\"?",
       "[[data.train_transforms]]\nname = \"Rotate\"\nlimt = 10\n"},
      {"parameter out of range", [](const fs::path&, const fs::path&) {}, "must be in [0, 1], got 1.5",
       "[[data.train_transforms]]\nname = \"HorizontalFlip\"\np = 1.5\n"},
  };
  const bool root_user = ::getuid() == 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const fs::path dir = testing::temp_dir("cli_bad_images");
    const fs::path root = dir / "imgs";
    write_folder(root, 2, 4);
    row.plant(root, dir);
    const std::string data_lines = row.data_lines.empty()
                                       ? "format = \"imagefolder\"\nroot = \"" + root.string() + "\"\n"
                                       : row.data_lines + "root = \"" + dir.string() + "\"\n";
    write_file_atomic(dir / "c.toml", config_text(data_lines, row.extra_config));
    // As root every folder is readable: that row runs as the unprivileged user 'nobody'.
    const std::string prefix =
        row.as_other_user && root_user ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
    auto [rc, out] = testing::run_command(prefix + gb() + " train " + (dir / "c.toml").string() + " --run-dir " +
                                          (dir / "run").string());
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find(row.expect), std::string::npos) << out;
    EXPECT_EQ(error_lines(out), 1) << out;
    EXPECT_FALSE(fs::exists(dir / "run")) << "a failed run wrote its run directory";
    fs::permissions(root / "b", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                    fs::perms::others_read | fs::perms::others_exec);
  }
  // data pack refuses a folder holding a bad image and writes no shard.
  const fs::path dir = testing::temp_dir("cli_bad_pack");
  write_folder(dir / "imgs", 2, 3);
  write_file_atomic(dir / "imgs" / "b" / "cut.jpg", jpeg.substr(0, jpeg.size() - 10));
  auto [rc, out] = testing::run_command(gb() + " data pack " + (dir / "imgs").string() + " --out " +
                                        (dir / "shards" / "t-%02d.tar").string());
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("cut.jpg: truncated JPEG"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "shards" / "t-00.tar"));
  EXPECT_FALSE(fs::exists(dir / "shards" / "classes.txt"));
}

}  // namespace
}  // namespace glassbox
