// app's other workflows called directly: export (of a checkpoint, and of a config with its
// model.init_from weights), the lab's scenarios, the doctor.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/app/doctor.h"
#include "glassbox/app/export.h"
#include "glassbox/app/lab.h"
#include "glassbox/app/run.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox::app {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> tabular(const fs::path& dir) {
  torch::manual_seed(3);
  const at::Tensor y = torch::arange(200, torch::kLong) % 2;
  data::write_npy(dir / "x.npy", torch::randn({200, 6}) + y.unsqueeze(1).to(torch::kFloat));
  data::write_npy(dir / "y.npy", y);
  return {"data.format=\"npy\"",    "data.root=\"" + dir.string() + "\"",
          "data.train_x=\"x.npy\"", "data.train_y=\"y.npy\"",
          "data.test_x=\"x.npy\"",  "data.test_y=\"y.npy\"",
          "data.val_size=40",       "model.mlp.hidden=[8]",
          "trainer.max_epochs=1",   "data.loader.batch_size=40"};
}

TEST(ExportWorkflow, ACheckpointAndAConfigWithItsWeightsExportTheSameTensors) {
  const fs::path dir = testing::temp_dir("app_export");
  TrainRequest t;
  t.overrides = tabular(dir);
  t.run_dir = dir / "run";
  t.quiet = true;
  t.diagnostics = false;
  t.handle_interrupts = false;
  run_training(t, std::cout);
  const fs::path ck = dir / "run" / "checkpoints" / "last.ckpt";

  ExportJob all;
  all.checkpoint = ck;
  all.format = "all";
  const ExportOutcome o = run_export(all);
  ASSERT_EQ(o.formats.size(), 3u);
  for (const char* f : {"model.pt", "model.onnx", "repository/run/config.pbtxt"})
    EXPECT_TRUE(fs::exists(dir / "run" / "export" / f)) << f;

  ExportJob weights;
  weights.config_given = true;
  weights.overrides = tabular(dir);
  weights.overrides.push_back("model.init_from=\"" + ck.string() + "\"");
  weights.format = "weights";
  weights.out = dir / "from_config.safetensors";
  run_export(weights);
  const SafetensorsFile a = load_safetensors(ck / "model.safetensors");
  const SafetensorsFile b = load_safetensors(dir / "from_config.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, tensor] : a.tensors) {
    const at::Tensor* other = b.find(name);
    ASSERT_NE(other, nullptr) << name;
    EXPECT_TRUE(torch::equal(tensor, *other)) << name;
  }

  ExportJob bad = all;
  bad.format = "pickle";
  EXPECT_THROW(run_export(bad), Error);
  bad.format = "onnx";
  bad.request.repository.raw_input = true;
  try {
    run_export(bad);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(e.one_line().find("--platform glassbox applies to a model repository"), std::string::npos);
  }
}

TEST(LabWorkflow, ListsTheScenariosAndSuggestsTheNearestName) {
  const fs::path lab = testing::source_dir() / "lab";
  const std::vector<LabScenario> all = lab_scenarios(lab);
  ASSERT_GE(all.size(), 10u);
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].name, all[i].name);
  for (const auto& s : all) EXPECT_FALSE(s.expect.empty()) << s.name;
  LabRunRequest r;
  r.lab_dir = lab;
  r.name = "label-ofset";
  try {
    run_lab_scenario(r, std::cout);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(e.one_line().find("did you mean \"label-offset\"?"), std::string::npos) << e.one_line();
  }
}

TEST(DoctorWorkflow, ExaminesAConfigWithItsOverridesAndFindsTheLeak) {
  const fs::path dir = testing::temp_dir("app_doctor");
  DoctorRequest d;
  d.overrides = tabular(dir);
  d.options.run = false;
  // The test set is the training file itself: the doctor's leakage check must say so.
  const inspect::DoctorReport r = run_doctor(d, nullptr);
  EXPECT_NE(r.find("train-test-leakage"), nullptr) << r.to_text();
  d.overrides.push_back("trainer.lr=0.1");
  try {
    run_doctor(d, nullptr);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(e.one_line().find("did you mean \"optim.lr\"?"), std::string::npos) << e.one_line();
  }
}

}  // namespace
}  // namespace glassbox::app
