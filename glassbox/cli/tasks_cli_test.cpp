// Regression and multi-label runs end to end through the CLI: train, eval (its metrics recomputed
// by scikit-learn from its predictions.csv), export (the TorchScript and ONNX files run in Python
// torch and onnxruntime on the raw inputs with the contract's preprocessing), predict, and the
// one-line errors of a task that does not fit its data or loss (tests/reference/tasks_ref.py).
#include <cstdio>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/files.h"
#include "glassbox/testing/testing.h"

namespace glassbox {
namespace {

namespace fs = std::filesystem;

std::string gb() { return testing::build_path("glassbox/cli/glassbox").string(); }

const fs::path& data_dir() {
  static const fs::path d = [] {
    const fs::path dir = testing::temp_dir("cli_tasks");
    testing::run_python("tests/reference/tasks_ref.py", {"data", "--out", dir.string()});
    return dir;
  }();
  return d;
}

const std::string kQuiet =
    " --set trainer.enable_progress_bar=false --set trainer.enable_model_summary=false"
    " --set diagnostics.tensorboard=false";

// CSV rows (after the header) as numbers, keyed by their first column.
std::map<int, std::vector<double>> rows_by_index(const fs::path& csv, std::size_t first_value) {
  std::istringstream in(read_file(csv));
  std::string line;
  std::getline(in, line);
  std::map<int, std::vector<double>> out;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string cell;
    std::vector<double> v;
    int index = -1;
    for (std::size_t col = 0; std::getline(f, cell, ','); ++col) {
      if (col == 0) index = std::stoi(cell);
      if (col >= first_value) v.push_back(std::stod(cell));
    }
    out[index] = v;
  }
  return out;
}

// Exports the run, checks eval against scikit-learn and the exported files against eval.
nlohmann::json check_outside(const fs::path& run, const std::string& task, const fs::path& inputs) {
  const std::string ckpt = (run / "checkpoints" / "last.ckpt").string();
  auto [rc, out] = testing::run_command(gb() + " eval --checkpoint " + ckpt);
  EXPECT_EQ(rc, 0) << out;
  auto [rc2, out2] = testing::run_command(gb() + " export --checkpoint " + ckpt + " --format all");
  EXPECT_EQ(rc2, 0) << out2;
  const fs::path exp = run / "export";
  const auto j = nlohmann::json::parse(testing::run_python(
      "tests/reference/tasks_ref.py",
      {"check", "--eval", (run / "eval").string(), "--task", task, "--model", (exp / "model.pt").string(), "--onnx",
       (exp / "model.onnx").string(), "--contract", (exp / "model.json").string(), "--inputs", inputs.string()}));
  std::printf("[ %s ] scikit-learn %s\n[ %s ] max |metric diff| %.2e, TorchScript vs eval %.2e, ONNX vs eval %.2e\n",
              task.c_str(), j["sklearn"].dump().c_str(), task.c_str(), j["worst_metric_diff"].get<double>(),
              j["torchscript_vs_eval"].get<double>(), j["onnx_vs_eval"].get<double>());
  EXPECT_LE(j["worst_metric_diff"].get<double>(), 1e-9) << j.dump();
  EXPECT_LE(j["torchscript_vs_eval"].get<double>(), 1e-4) << j.dump();
  EXPECT_LE(j["onnx_vs_eval"].get<double>(), 1e-4) << j.dump();
  EXPECT_EQ(j["task"], task);
  EXPECT_TRUE(fs::exists(exp / "repository" / run.filename() / "config.pbtxt"));
  return j;
}

TEST(Tasks, RegressionTrainsEvaluatesExportsAndPredicts) {
  const fs::path d = data_dir() / "reg";
  const fs::path run = d.parent_path() / "reg-run";
  auto [rc, out] = testing::run_command(
      gb() + " train --run-dir " + run.string() + " --set data.format=\"csv\" --set data.root=\"" + d.string() +
      "\" --set data.task=\"regression\" --set 'data.target_columns=[\"price\",\"load\"]' --set data.val_size=100"
      " --set model.name=\"mlp\" --set 'model.mlp.hidden=[32]' --set model.mlp.dropout=0 --set optim.lr=0.01"
      " --set trainer.max_epochs=15" +
      kQuiet);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("test MAE"), std::string::npos) << out;
  const auto summary = nlohmann::json::parse(read_file(run / "summary.json"));
  EXPECT_EQ(summary["task"], "regression");
  EXPECT_EQ(summary["class_names"], nlohmann::json::array({"price", "load"}));
  // y is linear in x plus noise of 0.1: an MLP fits it well.
  EXPECT_GT(summary["test"]["r2"].get<double>(), 0.9) << summary["test"];
  EXPECT_TRUE(summary["final_metrics"].contains("val_rmse")) << summary["final_metrics"];
  EXPECT_FALSE(summary["final_metrics"].contains("val_acc"));

  const auto j = check_outside(run, "regression", d / "test.csv");
  EXPECT_NEAR(j["glassbox"]["r2"].get<double>(), summary["test"]["r2"].get<double>(), 1e-6);

  // predict on the test table (its target columns are left out): eval's predictions.
  auto [rc2, out2] =
      testing::run_command(gb() + " predict " + (d / "test.csv").string() + " --checkpoint " +
                           (run / "checkpoints" / "last.ckpt").string() + " --out " + (run / "pred.csv").string());
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_EQ(read_file(run / "pred.csv").substr(0, 17), "index,price,load\n");
  const auto predicted = rows_by_index(run / "pred.csv", 1);
  const auto evaluated = rows_by_index(run / "eval" / "predictions.csv", 1);  // y_0, pred_0, y_1, pred_1
  ASSERT_EQ(predicted.size(), evaluated.size());
  for (const auto& [i, e] : evaluated) {
    EXPECT_NEAR(predicted.at(i)[0], e[1], 1e-5 * std::max(1.0, std::abs(e[1]))) << i;
    EXPECT_NEAR(predicted.at(i)[1], e[3], 1e-5 * std::max(1.0, std::abs(e[3]))) << i;
  }
}

TEST(Tasks, MultiLabelTrainsEvaluatesExportsAndPredicts) {
  const fs::path d = data_dir() / "multi";
  const fs::path run = d.parent_path() / "multi-run";
  auto [rc, out] = testing::run_command(
      gb() + " train --run-dir " + run.string() + " --set data.format=\"npy\" --set data.root=\"" + d.string() +
      "\" --set data.task=\"multilabel\" --set data.val_size=100 --set model.name=\"mlp\""
      " --set 'model.mlp.hidden=[32]' --set optim.lr=0.01 --set trainer.max_epochs=10"
      " --set checkpoint.monitor=\"val_micro_f1\" --set checkpoint.mode=\"max\"" +
      kQuiet);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("test micro F1"), std::string::npos) << out;
  const auto summary = nlohmann::json::parse(read_file(run / "summary.json"));
  EXPECT_EQ(summary["task"], "multilabel");
  // Labels are thresholded linear functions of x with noise: well above the all-absent guess.
  EXPECT_GT(summary["test"]["micro_f1"].get<double>(), 0.8) << summary["test"];
  EXPECT_FALSE(summary["best_checkpoint"].is_null());

  check_outside(run, "multilabel", d / "test_x.npy");
  auto [rc2, out2] =
      testing::run_command(gb() + " predict " + (d / "test_x.npy").string() + " --checkpoint " +
                           (run / "checkpoints" / "last.ckpt").string() + " --out " + (run / "pred.csv").string());
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_EQ(read_file(run / "pred.csv").substr(0, 28), "index,predicted,p_0,p_1,p_2\n");
  const auto evaluated = rows_by_index(run / "eval" / "predictions.csv", 1);
  std::istringstream in(read_file(run / "pred.csv"));
  std::string line;
  std::getline(in, line);
  int checked = 0;
  while (std::getline(in, line)) {
    // index,"0|2",p0,p1,p2
    const int i = std::stoi(line.substr(0, line.find(',')));
    const std::string quoted = line.substr(line.find('"') + 1, line.rfind('"') - line.find('"') - 1);
    std::istringstream f(line.substr(line.rfind('"') + 2));
    std::string cell, expected_on;
    for (int k = 0; std::getline(f, cell, ','); ++k) {
      const double p = std::stod(cell);
      EXPECT_NEAR(p, evaluated.at(i)[static_cast<std::size_t>(2 * k + 1)], 1e-6) << line;
      if (p >= 0.5) expected_on += (expected_on.empty() ? "" : "|") + std::to_string(k);
    }
    EXPECT_EQ(quoted, expected_on) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 300);
}

TEST(Tasks, ATaskThatDoesNotFitIsOneLineExitTwo) {
  const fs::path d = data_dir() / "reg";
  const std::string csv = " --set data.format=\"csv\" --set data.root=\"" + d.string() + "\"";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --set data.task=\"regression\"", "carries class labels only"},
      {csv + " --set data.task=\"regression\" --set data.label_column=\"price\" --set loss.name=\"cross_entropy\"",
       "loss.name = \"cross_entropy\" does not fit data.task = \"regression\""},
      {csv + " --set data.label_column=\"price\" --set loss.name=\"mse\"",
       "loss.name = \"mse\" does not fit data.task = \"classification\""},
      {csv + " --set data.task=\"regression\" --set 'data.target_columns=[\"prize\"]'", "did you mean 'price'"},
      {csv + " --set data.task=\"regression\" --set data.label_column=\"price\" --set checkpoint.monitor=\"val_r2\"",
       "checkpoint.monitor = \"val_r2\" is better when higher"},
  };
  for (const auto& [flags, message] : cases) {
    auto [rc, out] = testing::run_command(gb() + " train --run-dir " + (d.parent_path() / "refused").string() +
                                          " --set trainer.fast_dev_run=1" + flags + kQuiet);
    EXPECT_EQ(rc, 2) << flags << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << flags << "\n" << out;
    EXPECT_FALSE(fs::exists(d.parent_path() / "refused")) << flags;
  }
}

}  // namespace
}  // namespace glassbox
