// glassbox eval / explain / quickstart's closing steps, end to end through the binary: the files
// they write agree with each other and with the data, and bad input is one line with exit 2.
#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/files.h"
#include "glassbox/base/png.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox {
namespace {

namespace fs = std::filesystem;

std::string gb() { return testing::build_path("glassbox/cli/glassbox").string(); }

const std::string kSmallCnn =
    " --set model.name=cnn --set model.cnn.channels=[8,16] --set model.cnn.convs_per_stage=1 --set model.cnn.hidden=32"
    " --set data.limit_train=2000 --set data.val_size=400 --set trainer.max_epochs=1 --set "
    "trainer.enable_progress_bar=false"
    " --set trainer.enable_model_summary=false --set diagnostics.tensorboard=false";

// One small CNN run shared by the tests of this file.
const fs::path& cnn_run() {
  static const fs::path run = [] {
    const fs::path r = testing::temp_dir("cli_eval") / "cnn";
    auto [rc, out] = testing::run_command(gb() + " train --run-dir " + r.string() + kSmallCnn);
    EXPECT_EQ(rc, 0) << out;
    return r;
  }();
  return run;
}

TEST(Eval, WritesMetricsAndPredictionsThatAgree) {
  const fs::path run = cnn_run();
  const std::string ckpt = (run / "checkpoints" / "last.ckpt").string();
  auto [rc, out] = testing::run_command(gb() + " eval --checkpoint " + ckpt);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("majority-class baseline"), std::string::npos) << out;
  EXPECT_NE(out.find("macro avg"), std::string::npos) << out;
  const auto m = nlohmann::json::parse(read_file(run / "eval" / "metrics.json"));
  EXPECT_EQ(m["num_samples"].get<int>(), 10000);
  EXPECT_EQ(m["split"], "test");
  // The predictions file re-derives the confusion matrix and the accuracy.
  std::istringstream csv(read_file(run / "eval" / "predictions.csv"));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.substr(0, 34), "index,label,predicted,p_0,p_1,p_2,");
  std::vector<std::vector<int>> cm(10, std::vector<int>(10, 0));
  int rows = 0, correct = 0;
  while (std::getline(csv, line)) {
    std::istringstream f(line);
    std::string idx, label, pred;
    std::getline(f, idx, ',');
    std::getline(f, label, ',');
    std::getline(f, pred, ',');
    EXPECT_EQ(std::stoi(idx), rows);  // the test split is the test file, in order
    ++cm[std::stoi(label)][std::stoi(pred)];
    correct += label == pred ? 1 : 0;
    ++rows;
  }
  EXPECT_EQ(rows, 10000);
  EXPECT_EQ(nlohmann::json(cm), m["confusion_matrix"]);
  EXPECT_DOUBLE_EQ(m["accuracy"].get<double>(), correct / 10000.0);
  EXPECT_EQ(m["calibration"]["reliability"].size(), 15u);
  EXPECT_EQ(m["pr_curves"].size(), 10u);
  EXPECT_EQ(m["class_weights_balanced"]["weights"].size(), 10u);
  EXPECT_TRUE(fs::exists(run / "eval" / "predictions.npy"));

  // The validation split: positions in the training file, a fairness audit from a group file.
  const fs::path groups = run.parent_path() / "groups.txt";
  std::string g;
  for (int i = 0; i < 2000; ++i) g += (i % 3 == 0 ? "a\n" : "b\n");
  write_file_atomic(groups, g);
  auto [rc2, out2] =
      testing::run_command(gb() + " eval --checkpoint " + ckpt + " --split val --groups " + groups.string() +
                           " --out " + (run.parent_path() / "ev_val").string() + " --json");
  ASSERT_EQ(rc2, 0) << out2;
  const auto v = nlohmann::json::parse(out2.substr(out2.find('{')));
  EXPECT_EQ(v["num_samples"].get<int>(), 400);
  ASSERT_TRUE(v.contains("fairness"));
  EXPECT_EQ(v["fairness"]["per_class"].size(), 10u);  // ten classes, one-vs-rest each
  std::int64_t support = 0;
  for (const auto& gr : v["fairness"]["groups"]) support += gr["support"].get<std::int64_t>();
  EXPECT_EQ(support, 400);
  EXPECT_EQ(v["fairness"]["privileged"], "b");  // the largest group
}

TEST(Eval, BadInputIsOneLineAndExitTwo) {
  const fs::path run = cnn_run();
  const std::string ckpt = (run / "checkpoints" / "last.ckpt").string();
  const fs::path short_groups = run.parent_path() / "short.txt";
  write_file_atomic(short_groups, "a\nb\n");
  const fs::path groups = run.parent_path() / "test_groups.txt";
  std::string g;
  for (int i = 0; i < 10000; ++i) g += i % 2 ? "x\n" : "y\n";
  write_file_atomic(groups, g);
  const std::string before = fs::exists(run / "eval" / "metrics.json") ? read_file(run / "eval" / "metrics.json") : "";
  const std::pair<std::string, std::string> cases[] = {
      {" eval --checkpoint " + run.string() + "/nope.ckpt", "no checkpoint at"},
      {" eval --checkpoint " + ckpt + " --groups " + short_groups.string(),
       "has 2 group values, but the test split reaches row 9999"},
      {" eval --checkpoint " + ckpt + " --group-column sex", "--group-column needs a CSV or NPY data set"},
      {" eval --checkpoint " + ckpt + " --groups " + groups.string() + " --positive-class Dog",
       "unknown positive class 'Dog'"},
      {" eval --checkpoint " + ckpt + " --groups " + groups.string() + " --privileged z",
       "privileged group 'z' does not occur in test_groups"},
      {" eval --checkpoint " + ckpt + " --split validation", "--split: validation not in {test,val,train}"},
  };
  for (const auto& [args, expect] : cases) {
    auto [rc, out] = testing::run_command(gb() + args);
    EXPECT_EQ(rc, 2) << args << "\n" << out;
    EXPECT_NE(out.find(expect), std::string::npos) << args << "\n" << out;
    const std::string err = out.substr(std::min(out.size(), out.find("error:")));
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << out;
  }
  if (!before.empty()) {
    EXPECT_EQ(read_file(run / "eval" / "metrics.json"), before);
  }
}

TEST(Explain, WritesHeatMapsOfWrongAndRightPredictions) {
  const fs::path run = cnn_run();
  const std::string ckpt = (run / "checkpoints" / "last.ckpt").string();
  const fs::path out_dir = run.parent_path() / "explain";
  auto [rc, out] =
      testing::run_command(gb() + " explain --checkpoint " + ckpt +
                           " --samples 0,5 --misclassified 3 --method gradcam++ --out " + out_dir.string());
  ASSERT_EQ(rc, 0) << out;
  const auto index = nlohmann::json::parse(read_file(out_dir / "index.json"));
  EXPECT_EQ(index["method"], "gradcam++");
  EXPECT_EQ(index["layer"], "features.relu1_0");  // the last conv block of this cnn
  ASSERT_EQ(index["items"].size(), 5u);
  EXPECT_EQ(index["items"][0]["index"].get<int>(), 0);
  int wrong = 0;
  for (const auto& it : index["items"]) {
    wrong += it["correct"].get<bool>() ? 0 : 1;
    const DecodedPng png = decode_png(read_file(out_dir / it["overlay"].get<std::string>()));
    EXPECT_EQ(png.width, 28);
    EXPECT_EQ(png.channels, 3);
    EXPECT_TRUE(fs::exists(out_dir / it["heatmap"].get<std::string>()));
  }
  EXPECT_GE(wrong, 3);

  auto [rc2, out2] =
      testing::run_command(gb() + " explain --checkpoint " + ckpt + " --samples 1 --layer features.conv9");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("'features.conv9' is not a convolutional layer of cnn (hint: use --layer with one of: features, "
                      "features.conv0_0"),
            std::string::npos)
      << out2;
  auto [rc3, out3] = testing::run_command(gb() + " explain --checkpoint " + ckpt + " --samples 10000");
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("sample 10000 is outside the test split (0..9999)"), std::string::npos) << out3;
}

// A TorchScript model created in Python — torchvision's resnet18
// for 28x28 gray images, random backbone, scripted and saved with torch.jit.save, with its
// model.json — is evaluated and explained by glassbox. Python torch's own predictions on every
// test image and pytorch-grad-cam's maps are the reference.
TEST(ImportedModel, PythonScriptedResNetIsEvaluatedAndExplained) {
  const fs::path dir = testing::temp_dir("cli_import") / "py";
  const auto py = nlohmann::json::parse(testing::run_python(
      "tests/reference/make_script_model.py",
      {"--out", dir.string(), "--arch", "resnet18", "--first", "4", "--accuracy", "--test-limit", "1500"}));
  const std::string model = (dir / "model.pt").string();

  // eval: the first 1500 test images (raw uint8, as Python read them) with the sidecar's
  // preprocessing, to the default MODEL_DIR/eval.
  const std::string npy = " --set data.format=\"npy\" --set data.root=\"" + dir.string() +
                          "\" --set data.train_x=\"test_x.npy\" --set data.train_y=\"test_y.npy\" --set "
                          "data.test_x=\"test_x.npy\" --set data.test_y=\"test_y.npy\" --set data.val_size=0";
  auto [rc, out] = testing::run_command(gb() + " eval --model " + model + npy);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("(model " + model + ")"), std::string::npos) << out;
  const auto m = nlohmann::json::parse(read_file(dir / "eval" / "metrics.json"));
  EXPECT_EQ(m["num_samples"].get<int>(), 1500);
  EXPECT_EQ(m["model_file"], model);
  EXPECT_EQ(m["contract"], (dir / "model.json").string());
  EXPECT_EQ(m["per_class"][9]["name"], "Ankle boot");  // the contract's labels
  std::printf("imported resnet18: glassbox accuracy %.4f, Python torch %.4f\n", m["accuracy"].get<double>(),
              py["accuracy"].get<double>());
  EXPECT_DOUBLE_EQ(m["accuracy"].get<double>(), py["accuracy"].get<double>());
  EXPECT_GT(py["accuracy"].get<double>(), 0.3);  // a model that predicts, not one constant class
  // Every prediction, in file order, equals Python's.
  const at::Tensor table = data::read_npy(dir / "eval" / "predictions.npy");  // index, label, predicted, p...
  const at::Tensor ref = data::read_npy(dir / "predictions.npy");
  ASSERT_EQ(table.size(0), ref.size(0));
  EXPECT_TRUE(torch::equal(table.select(1, 0).to(torch::kLong), torch::arange(1500, torch::kLong)));
  const std::int64_t differ = (table.select(1, 2).to(torch::kLong) != ref.to(torch::kLong)).sum().item<std::int64_t>();
  EXPECT_EQ(differ, 0);

  // explain: Grad-CAM at layer4 of the scripted model, against pytorch-grad-cam on the eager model.
  auto [rc2, out2] = testing::run_command(gb() + " explain --model " + model + " --layer layer4 --samples 0,1,2,3");
  ASSERT_EQ(rc2, 0) << out2;
  const auto index = nlohmann::json::parse(read_file(dir / "explain" / "index.json"));
  EXPECT_EQ(index["method"], "gradcam");
  EXPECT_EQ(index["layer"], "layer4.1");  // layer4's output: its last block
  ASSERT_EQ(index["items"].size(), 4u);
  std::vector<std::int64_t> targets;
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& it = index["items"][i];
    EXPECT_EQ(it["predicted"], py["first_predictions"][i]);
    EXPECT_EQ(it["label"], py["first_labels"][i]);
    targets.push_back(it["target_class"].get<std::int64_t>());
    const DecodedPng png = decode_png(read_file(dir / "explain" / it["heatmap"].get<std::string>()));
    EXPECT_EQ(png.width, 28);
    EXPECT_EQ(png.height, 28);
    EXPECT_TRUE(fs::exists(dir / "explain" / it["overlay"].get<std::string>()));
  }
  data::write_npy(dir / "targets.npy", torch::tensor(targets, torch::kLong));
  testing::run_python("tests/reference/gradcam_ref.py",
                      {"--arch", "resnet18", "--model-json", (dir / "model_spec.json").string(), "--weights",
                       (dir / "model.safetensors").string(), "--inputs", (dir / "first_inputs.npy").string(),
                       "--targets", (dir / "targets.npy").string(), "--method", "gradcam", "--layer", "layer4", "--out",
                       (dir / "cams.npy").string()});
  const at::Tensor maps = data::read_npy(dir / "explain" / "maps.npy");
  const at::Tensor cams = data::read_npy(dir / "cams.npy");
  ASSERT_EQ(maps.sizes(), cams.sizes());
  const double diff = (maps - cams).abs().max().item<double>();
  std::printf("imported resnet18 layer4: max |glassbox explain - pytorch-grad-cam| = %.3g\n", diff);
  EXPECT_LT(diff, 1e-4);
  EXPECT_GT(maps.max().item<double>(), 0.9);

  // Without a sidecar: flags describe the model (the same preprocessing: the same predictions).
  const fs::path bare = dir.parent_path() / "bare";
  fs::create_directories(bare);
  fs::copy_file(dir / "model.pt", bare / "net.pt");
  const std::string net = (bare / "net.pt").string();
  auto [rc3, out3] = testing::run_command(gb() + " explain --model " + net + " --samples 0,1,2,3");
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("no contract for " + net + " (no net.json beside it, no --contract, no --input-shape)"),
            std::string::npos)
      << out3;
  auto [rc4, out4] = testing::run_command(gb() + " explain --model " + net +
                                          " --input-shape 1,28,28 --mean 0.286 --std 0.353 --samples 0,1,2,3 --json");
  ASSERT_EQ(rc4, 0) << out4;
  const auto idx4 = nlohmann::json::parse(read_file(bare / "explain" / "index.json"));
  EXPECT_EQ(idx4["contract"], "flags");
  EXPECT_EQ(idx4["layer"], "layer4.1");  // the default: the last block that is not a pooling layer
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(idx4["items"][i]["predicted"], py["first_predictions"][i]);
  EXPECT_EQ(idx4["items"][0]["label_name"], "Ankle boot");  // no labels given: the data's class names

  // One-line user errors.
  write_file_atomic(bare / "junk.pt", "not a TorchScript file");
  const std::pair<std::string, std::string> cases[] = {
      {" eval --model " + model + " --checkpoint " + bare.string(), "--checkpoint and --model are mutually exclusive"},
      {" eval", "no model given (hint: pass --checkpoint"},
      {" eval --model " + model + " --input-shape 1,32,32", "the model expects inputs of shape [1, 32, 32] (" +
                                                                (dir / "model.json").string() +
                                                                " + flags), the data's samples have shape [1, 28, 28]"},
      {" explain --model " + model + " --input-shape 3,28,28 --mean 0.5,0.4,0.3 --std 0.2,0.2,0.2",
       "the model expects inputs of shape [3, 28, 28] (" + (dir / "model.json").string() +
           " + flags), the data's samples have shape [1, 28, 28]"},
      {" explain --model " + (bare / "junk.pt").string() + " --input-shape 1,28,28",
       "junk.pt is not a TorchScript file"},
      {" explain --model " + (bare / "none.pt").string(), "no TorchScript file at"},
      {" eval --model " + model + " --labels " + (bare / "junk.pt").string(), "contract has 1 labels for 10 classes"},
  };
  for (const auto& [args, expect] : cases) {
    auto [rc5, out5] = testing::run_command(gb() + args);
    EXPECT_EQ(rc5, 2) << args << "\n" << out5;
    EXPECT_NE(out5.find(expect), std::string::npos) << args << "\n" << out5;
    const std::string err = out5.substr(std::min(out5.size(), out5.find("error:")));
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << out5;
  }
}

// Acceptance: quickstart ends with the report in its run directory (a short quickstart here).
TEST(Quickstart, EndsWithEvaluationExplanationsDoctorAndReport) {
  const fs::path run = testing::temp_dir("cli_qs") / "qs";
  auto [rc, out] =
      testing::run_command(gb() + " quickstart --run-dir " + run.string() +
                           " --set data.limit_train=3000 --set data.val_size=500 --set trainer.max_epochs=1"
                           " --set trainer.enable_progress_bar=false --set trainer.enable_model_summary=false");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("report: " + (run / "report.html").string()), std::string::npos) << out;
  for (const char* f :
       {"eval/metrics.json", "explain/index.json", "doctor.json", "report.html", "export/model.pt", "export/model.onnx",
        "export/model.json", "export/repository/qs/config.pbtxt", "export/repository/qs/1/model.pt"})
    EXPECT_TRUE(fs::exists(run / f)) << f;
  EXPECT_NE(out.find("export: torchscript "), std::string::npos) << out;
  // The one command that serves what was just exported.
  EXPECT_NE(out.find(" serve --model-repository " + (run / "export" / "repository").string() + "\n"), std::string::npos)
      << out;
  const std::string html = read_file(run / "report.html");
  for (const char* chart : {"data-chart=\"loss\"", "data-chart=\"confusion\"", "data-chart=\"reliability\"",
                            "data-chart=\"pr\"", "data-chart=\"gradcam\""})
    EXPECT_NE(html.find(chart), std::string::npos) << chart;
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  for (const char* remote : {"src=\"http", "href=\"http", "url(http", "@import"})
    EXPECT_EQ(html.find(remote), std::string::npos) << remote;
  EXPECT_EQ(nlohmann::json::parse(read_file(run / "explain" / "index.json"))["method"], "saliency");  // an MLP
}

}  // namespace
}  // namespace glassbox
