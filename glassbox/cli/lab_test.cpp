// The fault lab end to end: every scenario under lab/ is diagnosed by `glassbox doctor --json`
// with its planted cause ranked first and at the right place; the healthy quickstart has no
// error-level finding; a training run's TensorBoard events read back with TensorBoard's reader.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "glassbox/testing/testing.h"

namespace glassbox {
namespace {

namespace fs = std::filesystem;

std::string gb() { return testing::build_path("glassbox/cli/glassbox").string(); }
fs::path lab() { return testing::source_dir() / "lab"; }

// The JSON document at the end of the doctor's stdout (progress goes to stderr).
nlohmann::json doctor_json(const std::string& config, int* rc) {
  const fs::path out = testing::temp_dir("lab_doctor") / "out.json";
  auto [code, text] = testing::run_command("cd " + testing::source_dir().string() + " && { " + gb() + " doctor " +
                                           config + " --json 2>/dev/null; } > " + out.string());
  *rc = code;
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(Lab, EveryScenarioRanksItsPlantedCauseFirstAtTheRightPlace) {
  auto [rc_data, out_data] =
      testing::run_command(testing::python().string() + " " + (lab() / "make_data.py").string() + " --all");
  ASSERT_EQ(rc_data, 0) << out_data;
  int scenarios = 0;
  for (const auto& e : fs::directory_iterator(lab())) {
    if (!fs::exists(e.path() / "lab.toml")) continue;
    ++scenarios;
    const std::string name = e.path().filename().string();
    toml::table meta = toml::parse_file((e.path() / "lab.toml").string());
    const std::string expect = meta["expect"].value_or(std::string());
    int rc = 0;
    const nlohmann::json j = doctor_json("lab/" + name + "/config.toml", &rc);
    ASSERT_FALSE(j["findings"].empty()) << name;
    const nlohmann::json& f = j["findings"][0];
    EXPECT_EQ(f["id"], expect) << name << ": " << j["findings"].dump();
    EXPECT_FALSE(f["evidence"].get<std::string>().empty()) << name;
    EXPECT_FALSE(f["fix"].get<std::string>().empty()) << name;
    if (const toml::table* where = meta["where"].as_table()) {
      for (const auto& [key, value] : *where) {
        const std::string k(key.str());
        ASSERT_TRUE(f["where"].contains(k)) << name << ": where lacks " << k << " in " << f.dump();
        if (value.is_string()) {
          EXPECT_EQ(f["where"][k], value.value_or(std::string())) << name << " " << k;
        } else if (value.is_integer()) {
          EXPECT_EQ(f["where"][k], value.value_or(std::int64_t{0})) << name << " " << k;
        }
      }
    }
    EXPECT_EQ(rc, f["severity"] == "error" ? 1 : 0) << name;
  }
  EXPECT_GE(scenarios, 31);  // 26 on tensors, 5 on image files
}

TEST(Lab, HealthyQuickstartHasNoErrorFinding) {
  int rc = 0;
  const nlohmann::json j = doctor_json("configs/quickstart.toml", &rc);
  EXPECT_EQ(rc, 0) << j.dump();
  for (const auto& f : j["findings"]) EXPECT_NE(f["severity"], "error") << f.dump();
  EXPECT_GT(j["context"]["steps"].get<int>(), 100);
}

TEST(Lab, ListAndUnknownScenario) {
  auto [rc, out] = testing::run_command("cd " + testing::source_dir().string() + " && " + gb() + " lab list");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("label-offset"), std::string::npos) << out;
  auto [rc2, out2] =
      testing::run_command("cd " + testing::source_dir().string() + " && " + gb() + " lab run label-ofset");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("did you mean \"label-offset\""), std::string::npos) << out2;
}

TEST(Lab, TrainingRunWritesTensorBoardEventsThatTensorBoardReads) {
  const fs::path run = testing::temp_dir("lab_tb") / "run";
  auto [rc, out] =
      testing::run_command(gb() + " train " + (testing::source_dir() / "configs" / "quickstart.toml").string() +
                           " --run-dir " + run.string() +
                           " --set data.limit_train=2500 --set data.val_size=500 --set trainer.max_epochs=1"
                           " --set trainer.enable_progress_bar=false --set diagnostics.probe_every_n_steps=10"
                           " --set trainer.log_every_n_steps=5 --set diagnostics.grad_norm_every_step=true");
  ASSERT_EQ(rc, 0) << out;
  const std::string text = testing::run_python("tests/reference/tensorboard_read.py", {run.string()});
  const nlohmann::json j = nlohmann::json::parse(text);
  for (const char* tag : {"train_loss", "val_acc", "grad_norm/total", "lr", "test_acc"})
    EXPECT_TRUE(j["scalars"].contains(tag)) << tag;
  // 2000 samples / batch 128 = 16 steps; the total gradient norm is logged at every one.
  EXPECT_EQ(j["scalars"]["grad_norm/total"].size(), 16u);
  EXPECT_TRUE(j["histograms"].contains("weights/body.fc0.weight")) << j["histograms"].size();
  EXPECT_TRUE(j["histograms"].contains("grads/body.fc0.weight"));
  EXPECT_TRUE(j["histograms"].contains("activations/body.act0"));
  EXPECT_TRUE(j["images"].contains("inputs/train_batch"));
  EXPECT_EQ(j["histograms"]["weights/body.fc0.weight"][0]["num"].get<double>(), 784.0 * 512.0);
  // probes.jsonl: a record at steps 0 and 10 with every layer.
  std::ifstream probes(run / "probes.jsonl");
  std::string line;
  int records = 0;
  while (std::getline(probes, line)) {
    const auto r = nlohmann::json::parse(line);
    EXPECT_EQ(r["step"], 10 * records);
    EXPECT_GE(r["activations"].size(), 6u);
    ++records;
  }
  EXPECT_EQ(records, 2);
}

}  // namespace
}  // namespace glassbox
