// `glassbox export` end to end: a trained run exported in every format, its files served the way
// a deployment would (raw images + the contract's preprocessing, in Python torch and
// onnxruntime: tests/reference/contract_ref.py) and compared with `glassbox eval`'s
// probabilities; trainable-only weights; bad input.
#include <fstream>
#include <iostream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/files.h"
#include "glassbox/testing/testing.h"

namespace glassbox {
namespace {

namespace fs = std::filesystem;

std::string gb() { return testing::build_path("glassbox/cli/glassbox").string(); }

// A small CNN whose feature extractor is frozen (a fine-tuned head).
const fs::path& frozen_cnn_run() {
  static const fs::path run = [] {
    const fs::path r = testing::temp_dir("cli_export") / "ft";
    auto [rc, out] =
        testing::run_command(gb() + " train --run-dir " + r.string() +
                             " --set model.name=cnn --set model.cnn.channels=[8,16] --set model.cnn.convs_per_stage=1 "
                             "--set model.cnn.hidden=32"
                             " --set data.limit_train=2000 --set data.val_size=400 --set trainer.max_epochs=1 --set "
                             "trainer.enable_progress_bar=false"
                             " --set trainer.enable_model_summary=false --set diagnostics.tensorboard=false --set "
                             "'trainer.freeze=[\"features.conv0_0.*\"]'");
    EXPECT_EQ(rc, 0) << out;
    return r;
  }();
  return run;
}

std::vector<std::vector<double>> read_probabilities(const fs::path& csv_path, int rows) {
  std::istringstream csv(read_file(csv_path));
  std::string line;
  std::getline(csv, line);
  std::vector<std::vector<double>> out;
  while (static_cast<int>(out.size()) < rows && std::getline(csv, line)) {
    std::istringstream f(line);
    std::string cell;
    std::vector<double> p;
    for (int col = 0; std::getline(f, cell, ','); ++col)
      if (col >= 3) p.push_back(std::stod(cell));
    out.push_back(p);
  }
  return out;
}

TEST(Export, EveryFormatServesTheSamePredictionsAsEval) {
  const fs::path run = frozen_cnn_run();
  const std::string ckpt = (run / "checkpoints" / "last.ckpt").string();
  auto [rc, out] = testing::run_command(gb() + " export --checkpoint " + ckpt + " --format all --json");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find("[\n")));
  ASSERT_EQ(j.size(), 3u);
  for (const auto& f : j) {
    for (const auto& a : f["artefacts"]) {
      EXPECT_TRUE(fs::exists(a["path"].get<std::string>())) << a;
      EXPECT_EQ(a["bytes"].get<std::uintmax_t>(), fs::file_size(a["path"].get<std::string>())) << a;
    }
  }
  const fs::path exp = run / "export";
  for (const char* f : {"model.pt", "model.json", "model.onnx", "repository/ft/config.pbtxt",
                        "repository/ft/1/model.pt", "repository/ft/labels.txt", "repository/ft/contract.json"})
    EXPECT_TRUE(fs::exists(exp / f)) << f;
  const auto contract = nlohmann::json::parse(read_file(exp / "model.json"));
  EXPECT_EQ(contract["input"]["shape"], nlohmann::json::array({1, 28, 28}));
  EXPECT_DOUBLE_EQ(contract["preprocessing"]["scale"].get<double>(), 1.0 / 255);
  EXPECT_NEAR(contract["preprocessing"]["mean"][0].get<double>(), 0.286, 0.002);  // Fashion-MNIST's pixel mean
  EXPECT_EQ(contract["labels"][0], "T-shirt/top");
  EXPECT_EQ(read_file(exp / "repository/ft/labels.txt").substr(0, 20), "T-shirt/top\nTrouser\n");

  // glassbox eval's probabilities, and the exported files fed raw images as the contract says.
  auto [rc2, out2] = testing::run_command(gb() + " eval --checkpoint " + ckpt);
  ASSERT_EQ(rc2, 0) << out2;
  const int n = 64;
  const auto want = read_probabilities(run / "eval" / "predictions.csv", n);
  const auto served = nlohmann::json::parse(
      testing::run_python("tests/reference/contract_ref.py",
                          {"--model", (exp / "model.pt").string(), "--onnx", (exp / "model.onnx").string(),
                           "--contract", (exp / "model.json").string(), "--images",
                           "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", "--n", std::to_string(n)}));
  double worst_ts = 0, worst_ort = 0;
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < 10; ++k) {
      worst_ts = std::max(worst_ts, std::abs(served["torchscript"][i][k].get<double>() - want[i][k]));
      worst_ort = std::max(worst_ort, std::abs(served["onnxruntime"][i][k].get<double>() - want[i][k]));
    }
  std::printf("[ served ] max |p - eval p| over %d images: torch.jit.load %.2e, onnxruntime %.2e\n", n, worst_ts,
              worst_ort);
  EXPECT_LE(worst_ts, 1e-5);
  EXPECT_LE(worst_ort, 1e-4);

  // Back into glassbox: the exported file evaluates to the checkpoint's accuracy, and a copy
  // without its model.json still finds the contract embedded in the archive.
  const auto by_checkpoint = nlohmann::json::parse(read_file(run / "eval" / "metrics.json"));
  auto [rc3, out3] = testing::run_command(gb() + " eval --model " + (exp / "model.pt").string() + " --json");
  ASSERT_EQ(rc3, 0) << out3;
  const auto by_model = nlohmann::json::parse(out3.substr(out3.find('{')));
  EXPECT_DOUBLE_EQ(by_model["accuracy"].get<double>(), by_checkpoint["accuracy"].get<double>());
  EXPECT_EQ(by_model["confusion_matrix"], by_checkpoint["confusion_matrix"]);
  const fs::path alone = run.parent_path() / "alone";
  fs::create_directories(alone);
  fs::copy_file(exp / "model.pt", alone / "copy.pt", fs::copy_options::overwrite_existing);
  auto [rc4, out4] = testing::run_command(gb() + " explain --model " + (alone / "copy.pt").string() + " --samples 0,1");
  ASSERT_EQ(rc4, 0) << out4;
  const auto index = nlohmann::json::parse(read_file(alone / "explain" / "index.json"));
  EXPECT_NE(index["contract"].get<std::string>().find("extra/contract.json"), std::string::npos) << index["contract"];
  EXPECT_EQ(index["method"], "gradcam");
}

TEST(Export, TrainableOnlyWeightsLeaveTheFrozenLayersOut) {
  const fs::path run = frozen_cnn_run();
  const std::string ckpt = (run / "checkpoints" / "last.ckpt").string();
  auto [rc, out] = testing::run_command(gb() + " export --checkpoint " + ckpt + " --format weights --trainable-only");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("trainable only:"), std::string::npos) << out;
  const fs::path file = run / "export" / "trainable.safetensors";
  ASSERT_TRUE(fs::exists(file));
  const std::string bytes = read_file(file);
  EXPECT_EQ(bytes.find("features.conv0_0.weight"), std::string::npos);
  EXPECT_NE(bytes.find("features.bn0_0.running_mean"), std::string::npos);  // its layer was trained
  EXPECT_NE(bytes.find("classifier.out.weight"), std::string::npos);
  auto [rc2, out2] = testing::run_command(gb() + " export --checkpoint " + ckpt + " --format weights --json");
  ASSERT_EQ(rc2, 0) << out2;
  const auto all = nlohmann::json::parse(out2.substr(out2.find("[\n")));
  // conv0_0: 8 x 1 x 3 x 3 weights, no bias (BatchNorm follows).
  EXPECT_EQ(all[0]["parameters"].get<std::int64_t>(), all[0]["all_parameters"].get<std::int64_t>());
  EXPECT_LT(fs::file_size(file), fs::file_size(run / "export" / "model.safetensors"));
}

TEST(Export, BadInputIsOneLineExitTwoAndLeavesFilesAlone) {
  const fs::path run = frozen_cnn_run();
  const std::string ckpt = (run / "checkpoints" / "last.ckpt").string();
  const fs::path dir = testing::temp_dir("cli_export_bad");
  write_file_atomic(dir / "model.pt", "an earlier export");
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases{
      {" --checkpoint " + (dir / "nowhere.ckpt").string(), "no checkpoint at"},
      {" --checkpoint " + ckpt + " --format onnx --trainable-only --out " + (dir / "model.pt").string(),
       "--trainable-only applies to --format weights"},
      {" --checkpoint " + ckpt + " --format repository --name 'bad name' --out " + (dir / "repo").string(), "bad name"},
      {" --checkpoint " + ckpt + " --out " + dir.string(), "is a directory"},
      {" --checkpoint " + ckpt + " --format pickle", "pickle"},
  };
  for (const auto& c : cases) {
    auto [rc, out] = testing::run_command(gb() + " export" + c.args);
    EXPECT_EQ(rc, 2) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << c.args << "\n" << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1 + (out.front() == '\n' ? 1 : 0)) << out;
  }
  EXPECT_EQ(read_file(dir / "model.pt"), "an earlier export");
  EXPECT_FALSE(fs::exists(dir / "repo" / "bad name"));
}

// The zoo from outside: `glassbox export CONFIG` of a config whose model.init_from holds
// torchvision's weights (saved by Python as safetensors) gives TorchScript and ONNX files whose
// outputs equal torchvision's (tests/reference/zoo_ref.py, zoo_export_ref.py).
TEST(Export, ZooFromTorchvisionWeightsEqualsTorchvision) {
  const fs::path dir = testing::temp_dir("cli_export_zoo");
  const std::vector<std::string> cases = {"resnet18",           "resnet34",           "resnet50",
                                          "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
                                          "efficientnet_b1",    "efficientnet_b2",    "efficientnet_b3",
                                          "vit_b_16",           "vit_small",          "vit_hybrid"};
  std::vector<std::string> args{dir.string()};
  args.insert(args.end(), cases.begin(), cases.end());
  testing::run_python("tests/reference/zoo_ref.py", args);
  for (const auto& c : cases) {
    const fs::path d = dir / c;
    // The batch as an npy data set; identity normalisation so that the model sees x itself.
    write_file_atomic(
        d / "zoo.toml",
        "[run]\nname = \"" + c + "\"\n[data]\nformat = \"npy\"\nroot = \"" + d.string() +
            "\"\ntrain_x = \"x.npy\"\ntrain_y = \"y.npy\"\ntest_x = \"x.npy\"\ntest_y = \"y.npy\"\nval_size = 0\n"
            "num_classes = 10\nmean = [0.0, 0.0, 0.0]\nstd = [1.0, 1.0, 1.0]\n"
            "[model]\nname = \"" +
            c + "\"\ninit_from = \"" + (d / "weights.safetensors").string() +
            "\"\n[model.resnet18]\nstem = \"imagenet\"\n");
    auto [rc, out] = testing::run_command(gb() + " export " + (d / "zoo.toml").string() +
                                          " --format torchscript --out " + (d / "model.pt").string());
    ASSERT_EQ(rc, 0) << c << ": " << out;
    if (c != "vit_b_16") {  // 350 MB more; its attention is vit_small's
      auto [rc2, out2] = testing::run_command(gb() + " export " + (d / "zoo.toml").string() + " --format onnx --out " +
                                              (d / "model.onnx").string());
      ASSERT_EQ(rc2, 0) << c << ": " << out2;
    }
  }
  const nlohmann::json r = nlohmann::json::parse(testing::run_python("tests/reference/zoo_export_ref.py", args));
  std::cout << "largest differences to torchvision: " << r.dump() << "\n";
  for (const auto& c : cases) {
    SCOPED_TRACE(c);
    const double scale = std::max(1.0, r[c]["scale"].get<double>());
    EXPECT_LT(r[c]["torchscript"].get<double>() / scale, 1e-5) << r[c].dump();
    if (c != "vit_b_16") {
      EXPECT_LT(r[c]["onnx"].get<double>() / scale, 1e-4) << r[c].dump();
    }
  }
  fs::remove_all(dir);  // ViT-B/16 alone is 700 MB
}

}  // namespace
}  // namespace glassbox
