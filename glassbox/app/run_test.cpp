// app::run_training end to end on small tabular data: run directories, resume and fork, refused
// resumes, interrupts, failed starts, and checkpoints that work without their training data.
#include "glassbox/app/run.h"

#include <signal.h>

#include <map>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/app/evaluate.h"
#include "glassbox/app/explain.h"
#include "glassbox/app/inference.h"
#include "glassbox/app/predict.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/interrupt.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"
#include "glassbox/train/callback.h"
#include "glassbox/train/trainer.h"

namespace glassbox::app {
namespace {

namespace fs = std::filesystem;

// 3 classes of 8 features, separable enough to learn in a few epochs.
fs::path make_data(const std::string& name) {
  const fs::path dir = testing::temp_dir(name);
  torch::manual_seed(11);
  const auto make = [](std::int64_t n) {
    at::Tensor y = torch::arange(n, torch::kLong) % 3;
    at::Tensor x = torch::randn({n, 8}) + torch::one_hot(y, 8).to(torch::kFloat) * 2.0;
    return std::make_pair(x, y);
  };
  const auto [tx, ty] = make(320);
  const auto [sx, sy] = make(90);
  data::write_npy(dir / "train_x.npy", tx);
  data::write_npy(dir / "train_y.npy", ty);
  data::write_npy(dir / "test_x.npy", sx);
  data::write_npy(dir / "test_y.npy", sy);
  return dir;
}

std::vector<std::string> settings(const fs::path& data, std::vector<std::string> more = {}) {
  std::vector<std::string> s = {"data.format=\"npy\"",
                                "data.root=\"" + data.string() + "\"",
                                "data.train_x=\"train_x.npy\"",
                                "data.train_y=\"train_y.npy\"",
                                "data.test_x=\"test_x.npy\"",
                                "data.test_y=\"test_y.npy\"",
                                "data.val_size=64",
                                "data.loader.batch_size=32",
                                "model.name=\"mlp\"",
                                "model.mlp.hidden=[16]",
                                "optim.lr=0.01",
                                "trainer.max_epochs=2",
                                "trainer.log_every_n_steps=2",
                                "checkpoint.save_top_k=1",
                                "checkpoint.monitor=\"val_loss\""};
  s.insert(s.end(), more.begin(), more.end());
  return s;
}

TrainRequest request(const fs::path& data, const fs::path& run_dir, std::vector<std::string> more = {}) {
  TrainRequest r;
  r.overrides = settings(data, std::move(more));
  r.run_dir = run_dir;
  r.quiet = true;
  r.diagnostics = false;
  r.handle_interrupts = false;
  return r;
}

// Every file under a directory with its bytes.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_file(e.path());
  return files;
}

at::Tensor weight(const fs::path& checkpoint, const std::string& name) {
  const SafetensorsFile f = load_safetensors(checkpoint / "model.safetensors");
  const at::Tensor* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  return t == nullptr ? at::Tensor() : t->clone();
}

void expect_error(const std::function<void()>& f, ErrorCode code, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.one_line();
    EXPECT_NE(e.one_line().find(part), std::string::npos) << e.one_line();
  }
}

// Sets the interrupt flag at one step, as SIGINT would.
class InterruptAt final : public train::Callback {
 public:
  explicit InterruptAt(std::int64_t step) : step_(step) {}
  std::string name() const override { return "InterruptAt"; }
  void on_train_batch_end(train::Trainer& t, const train::StepOutput&, const data::Batch&) override {
    if (t.global_step() == step_) request_interrupt(SIGINT);
  }

 private:
  std::int64_t step_;
};

TEST(RunTraining, RefusesExistingRunDirectory) {
  const fs::path dir = testing::temp_dir("existing");
  write_file_atomic(dir / "precious.txt", "keep me");
  TrainRequest r = request(make_data("existing_data"), dir);
  expect_error([&] { run_training(r, std::cout); }, ErrorCode::kAlreadyExists,
               "already exists (hint: pass --overwrite");
  EXPECT_EQ(read_file(dir / "precious.txt"), "keep me");
}

TEST(RunTraining, ForkLeavesTheSourceRunByteIdentical) {
  const fs::path data = make_data("fork_data");
  const fs::path runs = testing::temp_dir("fork_runs");
  run_training(request(data, runs / "a", {"checkpoint.save_top_k=1"}), std::cout);
  const auto before = snapshot(runs / "a");
  TrainRequest fork;
  fork.resume = runs / "a" / "checkpoints" / "last.ckpt";
  fork.run_dir = runs / "b";
  fork.overrides = {"trainer.max_epochs=5"};
  fork.quiet = true;
  fork.diagnostics = false;
  fork.handle_interrupts = false;
  const nlohmann::json s = run_training(fork, std::cout);
  EXPECT_EQ(snapshot(runs / "a"), before);  // nothing of the parent deleted or rewritten
  EXPECT_TRUE(fs::equivalent(s["parent_run"].get<std::string>(), runs / "a"));
  EXPECT_EQ(s["resumed_from"]["step"], 16);  // 2 epochs of 256 / 32
  EXPECT_EQ(s["global_step"], 40);
  ASSERT_TRUE(s["best_checkpoint"].is_string());
  EXPECT_EQ(fs::path(s["best_checkpoint"].get<std::string>()).parent_path().parent_path(), runs / "b");
  // The fork's history starts with the parent's rows up to the checkpoint, once each.
  const std::string rows = read_file(runs / "b" / "metrics.jsonl");
  EXPECT_NE(rows.find("\"step\":2,"), std::string::npos);
}

TEST(RunTraining, ResumeWithoutConfigUsesTheStoredOneAndRefusesOtherChanges) {
  const fs::path data = make_data("stored_data");
  const fs::path run = testing::temp_dir("stored_runs") / "r";
  run_training(request(data, run, {"model.mlp.hidden=[24]"}), std::cout);
  const std::string config_before = read_file(run / "config.toml");
  TrainRequest bad;
  bad.resume = run / "checkpoints" / "last.ckpt";
  bad.overrides = {"optim.lr=0.5", "trainer.max_epochs=3"};
  bad.quiet = true;
  bad.diagnostics = false;
  bad.handle_interrupts = false;
  expect_error([&] { run_training(bad, std::cout); }, ErrorCode::kInvalidArgument, "optim.lr: 0.01 -> 0.5");
  EXPECT_EQ(read_file(run / "config.toml"), config_before);  // a failed resume rewrites nothing

  TrainRequest good = bad;
  good.overrides = {"trainer.max_epochs=3"};  // the architecture ([24]) comes from the checkpoint
  const nlohmann::json s = run_training(good, std::cout);
  EXPECT_EQ(s["epochs"], 3);
  EXPECT_EQ(s["run_dir"], run.string());
  EXPECT_NE(read_file(run / "config.toml").find("hidden = [ 24 ]"), std::string::npos)
      << read_file(run / "config.toml");
  // One history: no step logged twice by the epoch-end rows.
  std::map<std::int64_t, int> epoch_rows;
  std::istringstream in(read_file(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("epoch_end", false)) ++epoch_rows[j["step"].get<std::int64_t>()];
  }
  EXPECT_EQ(epoch_rows.size(), 3u);
  for (const auto& [step, n] : epoch_rows) EXPECT_EQ(n, 1) << "step " << step;
}

TEST(RunTraining, ALongerRunWithADerivedScheduleIsRefusedBeforeAnythingIsWritten) {
  const fs::path data = make_data("onecycle_data");
  const fs::path run = testing::temp_dir("onecycle_runs") / "r";
  run_training(request(data, run, {"scheduler.name=\"onecycle\"", "scheduler.max_lr=[0.05]"}), std::cout);
  const auto before = snapshot(run);
  TrainRequest r;
  r.resume = run / "checkpoints" / "last.ckpt";
  r.overrides = {"trainer.max_epochs=4"};
  r.quiet = true;
  r.diagnostics = false;
  expect_error([&] { run_training(r, std::cout); }, ErrorCode::kInvalidArgument, "onecycle");
  EXPECT_EQ(snapshot(run), before);
}

TEST(RunTraining, AnIncompleteCheckpointIsRefusedNamingWhatIsMissing) {
  const fs::path data = make_data("incomplete_data");
  const fs::path run = testing::temp_dir("incomplete_runs") / "r";
  run_training(request(data, run), std::cout);
  const fs::path ck = run / "checkpoints" / "last.ckpt";
  // An optimiser file with no tensors, as a half-copied checkpoint has.
  save_safetensors(ck / "optimizer.safetensors", {});
  TrainRequest r;
  r.resume = ck;
  r.quiet = true;
  r.diagnostics = false;
  expect_error([&] { run_training(r, std::cout); }, ErrorCode::kFailedPrecondition, "optimiser state");
  std::filesystem::remove(ck / "extra.safetensors");
  save_safetensors(ck / "extra.safetensors", {});
  expect_error([&] { run_training(r, std::cout); }, ErrorCode::kFailedPrecondition, "RNG state");
  // Its weights can still start a new run.
  TrainRequest init = request(data, run.parent_path() / "from_weights");
  init.init_from = ck;
  const nlohmann::json s = run_training(init, std::cout);
  EXPECT_EQ(s["init_from"], ck.string());
}

TEST(RunTraining, AFailedStartLeavesNoRunDirectory) {
  const fs::path data = make_data("failed_start_data");
  const fs::path run = testing::temp_dir("failed_start") / "r";
  // cuda:7: no such device, with or without a GPU.
  try {
    run_training(request(data, run, {"trainer.device=\"cuda:7\""}), std::cout);
    ADD_FAILURE() << "cuda:7 accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(is_user_error(e.code())) << e.one_line();  // exit status 2, with or without a GPU
    EXPECT_NE(e.one_line().find("cuda:7"), std::string::npos) << e.one_line();
  }
  EXPECT_FALSE(fs::exists(run));
  expect_error([&] { run_training(request(data, run, {"data.train_x=\"missing.npy\""}), std::cout); },
               ErrorCode::kNotFound, "missing.npy");
  EXPECT_FALSE(fs::exists(run));
  // The corrected retry works.
  EXPECT_NO_THROW(run_training(request(data, run), std::cout));
}

TEST(RunTraining, AnInterruptMidEpochSavesAndTheResumeIsBitIdentical) {
  const fs::path data = make_data("interrupt_data");
  const fs::path runs = testing::temp_dir("interrupt_runs");
  run_training(request(data, runs / "whole", {"trainer.max_epochs=3", "model.mlp.dropout=0.2"}), std::cout);

  TrainRequest cut = request(data, runs / "cut", {"trainer.max_epochs=3", "model.mlp.dropout=0.2"});
  cut.configure = [](train::Trainer& t, train::TaskModule&, const fs::path&, std::ostream&) {
    t.add_callback(std::make_unique<InterruptAt>(13));  // mid-epoch 1 (8 steps per epoch)
  };
  const nlohmann::json s = run_training(cut, std::cout);
  EXPECT_EQ(s["stop"], "interrupted");
  EXPECT_EQ(s["global_step"], 13);
  EXPECT_TRUE(s["test"].is_null());
  const nlohmann::json state =
      nlohmann::json::parse(read_file(runs / "cut" / "checkpoints" / "last.ckpt" / "state.json"));
  EXPECT_EQ(state["resume"]["epoch"], 1);
  EXPECT_EQ(state["resume"]["batch"], 5);
  clear_interrupt();

  TrainRequest again;
  again.resume = runs / "cut" / "checkpoints" / "last.ckpt";
  again.quiet = true;
  again.diagnostics = false;
  again.handle_interrupts = false;
  const nlohmann::json done = run_training(again, std::cout);
  EXPECT_EQ(done["global_step"], 24);
  for (const char* name : {"body.fc0.weight", "body.head.weight", "body.head.bias"}) {
    const at::Tensor a = weight(runs / "whole" / "checkpoints" / "last.ckpt", name);
    const at::Tensor b = weight(runs / "cut" / "checkpoints" / "last.ckpt", name);
    ASSERT_TRUE(a.defined() && b.defined());
    EXPECT_TRUE(torch::equal(a, b)) << name << ": max difference " << (a - b).abs().max().item<double>();
  }
}

TEST(RunTraining, ANonFiniteStopNeverSavesNonFiniteWeightsAndTestsWhatWasFinite) {
  const fs::path data = make_data("nonfinite_data");
  const fs::path run = testing::temp_dir("nonfinite_runs") / "r";
  // Finite for the first epoch (checkpointed), then the learning rate explodes the weights.
  TrainRequest r = request(data, run,
                           {"trainer.max_epochs=4", "optim.name=\"sgd\"", "optim.lr=0.05", "scheduler.name=\"step\"",
                            "scheduler.step_size=1", "scheduler.gamma=1e30", "scheduler.interval=\"epoch\"",
                            "diagnostics.tensorboard=false"});
  r.diagnostics = true;  // the non-finite monitor stops the run
  const nlohmann::json s = run_training(r, std::cout);
  EXPECT_EQ(s["stop"], "nonfinite") << s.dump(2);
  for (const auto& e : fs::recursive_directory_iterator(run / "checkpoints")) {
    if (e.path().filename() != "model.safetensors") continue;
    for (const auto& [name, t] : load_safetensors(e.path()).tensors)
      EXPECT_TRUE(t.isfinite().all().item<bool>()) << e.path() << " " << name;
  }
  if (s["test"].is_null()) {
    EXPECT_NE(s.value("test_note", "").find("not tested"), std::string::npos) << s.dump(2);
  } else {
    EXPECT_NE(s["tested_with"].get<std::string>(), "final weights") << s.dump(2);
    EXPECT_TRUE(std::isfinite(s["test"]["loss"].get<double>()));
  }
}

TEST(PortableCheckpoint, EvaluatesExportsAndPredictsWithoutItsTrainingData) {
  const fs::path data = make_data("portable_data");
  const fs::path run = testing::temp_dir("portable_runs") / "r";
  run_training(request(data, run), std::cout);
  const fs::path moved = data.string() + "-moved";
  fs::remove_all(moved);
  fs::rename(data, moved);
  const fs::path ck = run / "checkpoints" / "last.ckpt";

  LoadedModel m = load_checkpoint_for_inference(ck);
  EXPECT_EQ(m.info.sample_shape, std::vector<std::int64_t>{8});
  EXPECT_EQ(m.info.num_classes, 3);
  // Evaluation on the data at its new place, with the checkpoint's normalisation.
  EvalOptions eo;
  eo.checkpoint = ck;
  eo.data_overrides = {"data.root=\"" + moved.string() + "\""};
  eo.out_dir = run / "eval_moved";
  const nlohmann::json j = evaluate_checkpoint(eo);
  EXPECT_GT(j["accuracy"].get<double>(), 0.6);
  // A test split alone is enough.
  const fs::path only_test = testing::temp_dir("portable_test_only");
  fs::copy_file(moved / "test_x.npy", only_test / "test_x.npy");
  fs::copy_file(moved / "test_y.npy", only_test / "test_y.npy");
  eo.data_overrides = {"data.root=\"" + only_test.string() + "\""};
  const nlohmann::json t = evaluate_checkpoint(eo);
  EXPECT_EQ(t["num_samples"], 90);
  EXPECT_DOUBLE_EQ(t["accuracy"].get<double>(), j["accuracy"].get<double>());
  eo.split = "val";
  expect_error([&] { evaluate_checkpoint(eo); }, ErrorCode::kNotFound, "needs the training file");
  eo.split = "test";
  eo.data_overrides = {"model.mlp.hidden=[4]"};
  expect_error([&] { evaluate_checkpoint(eo); }, ErrorCode::kInvalidArgument, "model.mlp.hidden");

  // Attributions per feature for a tabular model (Integrated Gradients by default).
  ExplainRequest er;
  er.checkpoint = ck;
  er.data_overrides = {"data.root=\"" + moved.string() + "\""};
  er.misclassified = 3;
  er.correct = 3;
  er.out_dir = run / "explain";
  const nlohmann::json ex = explain_checkpoint(er);
  EXPECT_EQ(ex["kind"], "features");
  EXPECT_EQ(ex["method"], "integrated_gradients");
  EXPECT_EQ(ex["importance"].size(), 8u);
  EXPECT_EQ(data::read_npy(run / "explain" / "attributions.npy").sizes(), (std::vector<std::int64_t>{6, 8}));
  for (const auto& it : ex["items"]) EXPECT_LT(std::abs(it["convergence_delta"].get<double>()), 1e-2) << it.dump();
  er.method = "gradcam";
  expect_error([&] { explain_checkpoint(er); }, ErrorCode::kInvalidArgument, "needs image inputs");

  // Predictions for unlabeled samples, equal to the evaluation's probabilities.
  PredictRequest p;
  p.model.checkpoint = ck;
  p.input = moved / "test_x.npy";
  p.out = run / "predictions.csv";
  const PredictOutcome o = run_predict(p);
  EXPECT_EQ(o.samples, 90);
  const std::string csv = read_file(p.out);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "index,predicted,predicted_name,p_0,p_1,p_2");
}

TEST(PortableCheckpoint, ACsvRunKeepsItsClassAndFeatureNamesAndPredictsUnlabeledRows) {
  const fs::path dir = testing::temp_dir("csv_data");
  torch::manual_seed(5);
  const std::vector<std::string> kinds = {"cat", "dog", "emu"};
  const auto table = [&](std::int64_t n, bool labeled, bool swapped) {
    std::string text = swapped ? "weight,height" : "height,weight";
    text += labeled ? ",animal\n" : "\n";
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t y = i % 3;
      const double h = static_cast<double>(y) * 2.0 + torch::randn({1}).item<double>() * 0.3;
      const double w = static_cast<double>(2 - y) + torch::randn({1}).item<double>() * 0.3;
      text += swapped ? fmt::format("{},{}", w, h) : fmt::format("{},{}", h, w);
      text += labeled ? "," + kinds[static_cast<std::size_t>(y)] + "\n" : "\n";
    }
    return text;
  };
  write_file_atomic(dir / "train.csv", table(240, true, false));
  write_file_atomic(dir / "test.csv", table(60, true, false));
  write_file_atomic(dir / "new.csv", table(9, false, true));  // unlabeled, columns in another order
  TrainRequest r;
  r.overrides = {"data.format=\"csv\"",
                 "data.root=\"" + dir.string() + "\"",
                 "data.train_csv=\"train.csv\"",
                 "data.test_csv=\"test.csv\"",
                 "data.label_column=\"animal\"",
                 "data.val_size=0.2",
                 "data.loader.batch_size=32",
                 "model.mlp.hidden=[16]",
                 "optim.lr=0.05",
                 "trainer.max_epochs=12"};
  r.run_dir = testing::temp_dir("csv_runs") / "r";
  r.quiet = true;
  r.diagnostics = false;
  r.handle_interrupts = false;
  const nlohmann::json s = run_training(r, std::cout);
  EXPECT_EQ(s["class_names"], nlohmann::json(kinds));
  const fs::path ck = r.run_dir / "checkpoints" / "last.ckpt";
  const nlohmann::json state = nlohmann::json::parse(read_file(ck / "state.json"));
  EXPECT_EQ(state["contract"]["input"]["feature_names"], nlohmann::json({"height", "weight"}));
  EXPECT_EQ(state["contract"]["labels"], nlohmann::json(kinds));

  PredictRequest p;
  p.model.checkpoint = ck;
  p.input = dir / "new.csv";
  const PredictOutcome o = run_predict(p);
  EXPECT_EQ(o.samples, 9);
  const std::string csv = read_file(dir / "predictions.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "index,predicted,predicted_name,p_cat,p_dog,p_emu");
  // The rows were made as cat, dog, emu, ...: read by name, the swapped columns still predict them.
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  int right = 0;
  for (int i = 0; std::getline(in, line); ++i)
    if (line.find("," + kinds[static_cast<std::size_t>(i % 3)] + ",") != std::string::npos) ++right;
  EXPECT_GE(right, 8) << csv;
}

}  // namespace
}  // namespace glassbox::app
