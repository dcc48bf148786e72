// End-to-end tests of the glassbox binary: exit codes, one-line errors, files left untouched.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/files.h"
#include "glassbox/testing/testing.h"

namespace glassbox {
namespace {

namespace fs = std::filesystem;

std::string gb() { return testing::build_path("glassbox/cli/glassbox").string(); }

// Small, fast settings on the real Fashion-MNIST files.
const std::string kSmall =
    " --set data.limit_train=3000 --set data.val_size=500 --set trainer.max_epochs=1 --set "
    "trainer.enable_progress_bar=false"
    " --set trainer.enable_model_summary=false";

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(Cli, HelpListsCommands) {
  auto [rc, out] = testing::run_command(gb() + " --help");
  EXPECT_EQ(rc, 0);
  for (const char* c : {"quickstart", "train", "bench"}) EXPECT_NE(out.find(c), std::string::npos) << out;
  auto [rc2, out2] = testing::run_command(gb() + " train --help");
  EXPECT_EQ(rc2, 0);
  EXPECT_NE(out2.find("--resume"), std::string::npos);
  EXPECT_NE(out2.find("Examples"), std::string::npos);
}

// The command line's basics, one row each: what is typed, the exit status, a part of the output.
TEST(Cli, BasicsTable) {
  struct Row {
    std::string args;
    int rc;
    std::string expect;
  };
  const std::vector<Row> rows = {
      {"--version", 0, "glassbox 0."},
      {"--version", 0, "LibTorch 2."},
      {"", 0, "Run 'glassbox COMMAND --help'"},
      {"tran", 2, "error: unknown command 'tran' for 'glassbox' (did you mean 'train'?)"},
      {"lab rn label-offset", 2, "error: unknown command 'rn' for 'glassbox lab' (did you mean 'run'?)"},
      {"train --max-epochs 3", 2, "error: unknown option '--max-epochs' for 'glassbox train'"},
      {"eval --chekpoint x", 2, "(did you mean '--checkpoint'?)"},
      {"train --set trainer.lr=0.1", 2, "did you mean \"optim.lr\"?"},
      {"train --set optim.name=adamw2", 2, "adamw"},
      {"explain --checkpoint x --method gradcam3", 2, "gradcam++"},
      {"train --set trainer.device=cuda:7 --set trainer.max_epochs=1", 2, "cuda:7"},
      {"eval --checkpoint /nonexistent/last.ckpt", 2, "no checkpoint at /nonexistent/last.ckpt"},
      {"predict", 2, "input is required"},
  };
  for (const Row& r : rows) {
    auto [rc, out] = testing::run_command(gb() + " " + r.args);
    EXPECT_EQ(rc, r.rc) << r.args << "\n" << out;
    EXPECT_NE(out.find(r.expect), std::string::npos) << r.args << "\n" << out;
    EXPECT_EQ(out.find("glassbox::"), std::string::npos) << r.args << ": internal names in\n" << out;
  }
}

TEST(Cli, UnknownConfigKeyIsOneLineWithSuggestion) {
  auto [rc, out] = testing::run_command(gb() + " train --set trainer.max_epoch=3");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("error: --set trainer.max_epoch: unknown key \"trainer.max_epoch\" in [trainer] (hint: did you "
                     "mean \"trainer.max_epochs\"?)"),
            std::string::npos)
      << out;
}

TEST(Cli, ConfigErrorsExitTwo) {
  const fs::path dir = testing::temp_dir("cli_cfg");
  write_file_atomic(dir / "bad.toml", "[trainer]\nmax_epochs = \"ten\"\n");
  auto [rc, out] = testing::run_command(gb() + " train " + (dir / "bad.toml").string());
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("trainer.max_epochs must be an integer, got a string ('ten')"), std::string::npos) << out;
  EXPECT_EQ(count_lines(out.substr(out.find("error:"))), 1) << out;
  auto [rc2, out2] = testing::run_command(gb() + " train --set optim.lr=-1");
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("optim.lr must be a finite number >= 0, got -1"), std::string::npos) << out2;
  auto [rc3, out3] = testing::run_command(gb() + " train --set model.name=resnet19");
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("did you mean \"resnet18\"?"), std::string::npos) << out3;
  auto [rc4, out4] = testing::run_command(gb() + " train " + (dir / "missing.toml").string());
  EXPECT_EQ(rc4, 2) << out4;
}

TEST(Cli, MissingDataNamesThePath) {
  const fs::path dir = testing::temp_dir("cli_nodata");
  auto [rc, out] = testing::run_command(gb() + " train --set data.root=" + (dir / "nowhere").string() + " --run-dir " +
                                        (dir / "run").string());
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find((dir / "nowhere").string()), std::string::npos) << out;
}

TEST(Cli, CorruptDataFileIsDataLoss) {
  const fs::path dir = testing::temp_dir("cli_corrupt");
  const fs::path src = "/usr/share/datasets/fashion-mnist";
  for (const char* f : {"train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    fs::copy_file(src / f, dir / f);
  const std::string images = read_file(src / "train-images-idx3-ubyte.gz");
  write_file_atomic(dir / "train-images-idx3-ubyte.gz", images.substr(0, images.size() / 2));
  auto [rc, out] =
      testing::run_command(gb() + " train --set data.root=" + dir.string() + " --run-dir " + (dir / "run").string());
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("train-images-idx3-ubyte.gz"), std::string::npos) << out;
  EXPECT_EQ(read_file(dir / "train-images-idx3-ubyte.gz").size(), images.size() / 2);  // untouched
}

TEST(Cli, TrainWritesRunDirectoryAndRefusesToOverwrite) {
  const fs::path dir = testing::temp_dir("cli_run");
  const fs::path run = dir / "run";
  auto [rc, out] = testing::run_command(gb() + " train --run-dir " + run.string() + kSmall);
  ASSERT_EQ(rc, 0) << out;
  for (const char* f :
       {"config.toml", "metrics.jsonl", "metrics.csv", "summary.json", "checkpoints/last.ckpt/model.safetensors"})
    EXPECT_TRUE(fs::exists(run / f)) << f;
  const auto summary = nlohmann::json::parse(read_file(run / "summary.json"));
  for (const char* k : {"best_checkpoint", "wall_seconds", "train_samples_per_second"})
    EXPECT_TRUE(summary.contains(k)) << k;
  EXPECT_GT(summary["test"]["accuracy"].get<double>(), 0.6);
  EXPECT_EQ(summary["test"]["samples"].get<int>(), 10000);
  // The effective config has the overrides.
  EXPECT_NE(read_file(run / "config.toml").find("limit_train = 3000"), std::string::npos);

  const std::string summary_before = read_file(run / "summary.json");
  auto [rc2, out2] = testing::run_command(gb() + " train --run-dir " + run.string() + kSmall);
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("already exists (hint: pass --overwrite"), std::string::npos) << out2;
  EXPECT_EQ(read_file(run / "summary.json"), summary_before);

  // Resuming with another architecture is refused naming the key, and changes nothing.
  const std::string ckpt = (run / "checkpoints" / "last.ckpt").string();
  const std::string weights_before = read_file(run / "checkpoints" / "last.ckpt" / "model.safetensors");
  const std::string config_before = read_file(run / "config.toml");
  auto [rc3, out3] = testing::run_command(gb() + " train --resume " + ckpt + kSmall + " --set model.mlp.hidden=[64]");
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("would not continue the same run: model.mlp.hidden: [256,128] -> [64]"), std::string::npos)
      << out3;
  EXPECT_NE(out3.find("--init-from"), std::string::npos) << out3;
  EXPECT_EQ(read_file(run / "checkpoints" / "last.ckpt" / "model.safetensors"), weights_before);
  EXPECT_EQ(read_file(run / "config.toml"), config_before);

  // A good resume continues the run: one more epoch, metrics.csv keeps the first run's rows.
  const std::string csv_before = read_file(run / "metrics.csv");
  auto [rc5, out5] = testing::run_command(gb() + " train --resume " + ckpt + kSmall + " --set trainer.max_epochs=2");
  ASSERT_EQ(rc5, 0) << out5;
  const std::string csv_after = read_file(run / "metrics.csv");
  EXPECT_GT(csv_after.size(), csv_before.size());
  EXPECT_EQ(nlohmann::json::parse(read_file(run / "summary.json"))["epochs"].get<int>(), 2);
  const std::string first_row = csv_before.substr(csv_before.find('\n') + 1, 20);
  EXPECT_NE(csv_after.find(first_row), std::string::npos);

  // A truncated checkpoint is reported as such.
  const fs::path broken = dir / "broken.ckpt";
  fs::copy(run / "checkpoints" / "last.ckpt", broken, fs::copy_options::recursive);
  write_file_atomic(broken / "model.safetensors", weights_before.substr(0, weights_before.size() - 100));
  auto [rc4, out4] = testing::run_command(gb() + " train --resume " + broken.string() + " --run-dir " +
                                          (dir / "r4").string() + kSmall);
  EXPECT_EQ(rc4, 2) << out4;
  EXPECT_NE(out4.find("lies past the end"), std::string::npos) << out4;
}

// A real Ctrl-C: the step finishes, last.ckpt and summary.json are written, the resume command is
// printed, the exit status is 130; the resume then completes the run.
TEST(Cli, SigintSavesAndPrintsTheResumeCommand) {
  const fs::path dir = testing::temp_dir("cli_sigint");
  const fs::path run = dir / "run";
  const std::string train = gb() + " train --run-dir " + run.string() +
                            " --set data.limit_train=12000 --set data.val_size=1000 --set trainer.max_epochs=3"
                            " --set data.loader.batch_size=16 --set trainer.log_every_n_steps=5"
                            " --set trainer.enable_progress_bar=false --set trainer.enable_model_summary=false";
  // Interrupt once the first rows are logged (the run is then inside its first epoch).
  auto [rc, out] =
      testing::run_command("( " + train + " & pid=$!; while [ ! -s " + (run / "metrics.jsonl").string() +
                           " ]; do sleep 0.05; done; sleep 0.5; kill -INT $pid; wait $pid; echo \"rc=$?\" )");
  EXPECT_NE(out.find("rc=130"), std::string::npos) << out;
  EXPECT_NE(out.find("resume with: glassbox train --resume " + (run / "checkpoints" / "last.ckpt").string()),
            std::string::npos)
      << out;
  const auto summary = nlohmann::json::parse(read_file(run / "summary.json"));
  EXPECT_EQ(summary["stop"], "interrupted");
  const auto state = nlohmann::json::parse(read_file(run / "checkpoints" / "last.ckpt" / "state.json"));
  EXPECT_EQ(state["global_step"], summary["global_step"]);
  auto [rc2, out2] = testing::run_command(gb() + " train --resume " + (run / "checkpoints" / "last.ckpt").string() +
                                          " --set trainer.max_epochs=1");
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_NE(out2.find("resuming " + run.string()), std::string::npos) << out2;
  EXPECT_NE(out2.find("changed trainer.max_epochs: 3 -> 1"), std::string::npos) << out2;
}

TEST(Cli, FastDevRunWritesNothing) {
  const fs::path dir = testing::temp_dir("cli_fdr");
  auto [rc, out] = testing::run_command(gb() + " train --run-dir " + (dir / "run").string() +
                                        " --set trainer.fast_dev_run=2" + kSmall);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_FALSE(fs::exists(dir / "run" / "checkpoints"));
}

// The benchmark's JSON shape (figures themselves belong in docs/benchmarks.md, not in tests).
TEST(Cli, BenchTrainReportsProbesVsPlainFromPairs) {
  auto [rc, out] = testing::run_command(
      gb() +
      " bench train --skip-python --models mlp --steps 60 --repeats 1 --probe-pairs 2 --threads 1 --json 2>/dev/null");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  for (const char* k : {"trainer_sps", "raw_sps", "trainer_vs_raw", "probes_sps", "probes_vs_plain"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_GT(j[k].get<double>(), 0.0) << k;
  }
  ASSERT_EQ(j["probes_vs_plain_pairs"].size(), 2u);
  const double a = j["probes_vs_plain_pairs"][0].get<double>(), b = j["probes_vs_plain_pairs"][1].get<double>();
  EXPECT_DOUBLE_EQ(j["probes_vs_plain"].get<double>(), 0.5 * (a + b));
  EXPECT_FALSE(j.contains("python_sps"));
}

// The per-model sections against the fused anchors (tiny steps; shape only, throughput > 0), with
// the Python anchors, torch.compile included (null with compiled_error where it cannot run here).
TEST(Cli, BenchTrainReportsEveryModelAgainstItsFusedAnchors) {
  auto [rc, out] = testing::run_command(gb() +
                                        " bench train --steps 4 --warmup 2 --compute-steps 2 --compute-warmup 1"
                                        " --mobilenet-input 3x32x32 --repeats 1 --probe-pairs 1 --threads 1"
                                        " --json 2>/dev/null");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  for (const char* k : {"trainer_sps", "raw_sps", "python_sps", "lightning_sps", "trainer_vs_raw", "trainer_vs_python",
                        "trainer_vs_lightning", "probes_vs_plain"}) {
    ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_GT(j[k].get<double>(), 0.0) << k;
  }
  for (const char* model : {"mlp", "mobilenet_v3_small"}) {
    ASSERT_TRUE(j.contains(model)) << model;
    const auto& m = j[model];
    for (const char* k : {"trainer_sps", "raw_fused_sps", "python_fused_sps", "lightning_sps", "trainer_vs_raw_fused",
                          "trainer_vs_python_fused", "trainer_vs_lightning"}) {
      ASSERT_TRUE(m.contains(k) && m[k].is_number()) << model << "." << k;
      EXPECT_GT(m[k].get<double>(), 0.0) << model << "." << k;
    }
    EXPECT_EQ(m["params"], m["python_params"]) << model;
    ASSERT_TRUE(m.contains("compiled_sps") && m.contains("trainer_vs_compiled")) << model;
    if (m["compiled_sps"].is_null()) {
      EXPECT_TRUE(m["trainer_vs_compiled"].is_null()) << model;
      EXPECT_FALSE(m.value("compiled_error", "").empty()) << model;
    } else {
      EXPECT_GT(m["compiled_sps"].get<double>(), 0.0) << model;
      EXPECT_GT(m["trainer_vs_compiled"].get<double>(), 0.0) << model;
    }
  }
  const auto& mb = j["mobilenet_v3_small"];
  for (const char* k : {"trainer_channels_last_sps", "checkpointing_sps", "checkpointing_time_ratio",
                        "peak_rss_growth_mb", "checkpointing_peak_rss_growth_mb", "checkpointing_memory_ratio"}) {
    ASSERT_TRUE(mb.contains(k) && mb[k].is_number()) << k;
    EXPECT_GT(mb[k].get<double>(), 0.0) << k;
  }
}

// --skip-python: the Python anchors of every section are null, the C++ ones measured.
TEST(Cli, BenchTrainSkipPythonLeavesThePythonAnchorsNull) {
  auto [rc, out] = testing::run_command(gb() +
                                        " bench train --skip-python --models mobilenet_v3_small --steps 4 --warmup 2"
                                        " --compute-steps 2 --mobilenet-input 3x32x32 --repeats 1 --probe-pairs 1"
                                        " --threads 1 --json 2>/dev/null");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_FALSE(j.contains("mlp"));
  const auto& m = j["mobilenet_v3_small"];
  EXPECT_GT(m["trainer_vs_raw_fused"].get<double>(), 0.0);
  EXPECT_GT(m["checkpointing_memory_ratio"].get<double>(), 0.0);
  for (const char* k : {"python_fused_sps", "compiled_sps", "lightning_sps", "trainer_vs_python_fused",
                        "trainer_vs_compiled", "trainer_vs_lightning"}) {
    ASSERT_TRUE(m.contains(k)) << k;
    EXPECT_TRUE(m[k].is_null()) << k;
  }
}

// glassbox tune lr: the plot, the JSON and TensorBoard events in --out, a tuned copy of the config
// that trains; an existing --apply file and a bad range are refused (exit 2) and change nothing.
TEST(Tune, LrWritesItsFilesAndATunedCopyOfTheConfig) {
  const fs::path dir = testing::temp_dir("cli_tune");
  const std::string config = (testing::source_dir() / "configs" / "quickstart.toml").string();
  const std::string small = " --set data.limit_train=3000 --set data.val_size=500";
  auto [rc, out] =
      testing::run_command(gb() + " tune lr " + config + small + " --num-training 60 --out " + (dir / "lr").string() +
                           " --apply " + (dir / "tuned.toml").string() + " --valley");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("valley (fastai)"), std::string::npos) << out;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir / "lr" / "lr_find.json"));
  EXPECT_EQ(j["num_training"], 60);
  ASSERT_FALSE(j["valley"].is_null());
  EXPECT_LE(j["lrs"].size(), 60u);
  EXPECT_EQ(j["applied"]["key"], "scheduler.max_lr");  // the quickstart's scheduler is onecycle
  const double lr = j["valley"]["lr"].get<double>();
  EXPECT_EQ(j["applied"]["lr"].get<double>(), lr);
  EXPECT_TRUE(fs::exists(dir / "lr" / "lr_find.png"));
  bool events = false;
  for (const auto& e : fs::directory_iterator(dir / "lr"))
    events = events || e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_TRUE(events);
  const std::string tuned = read_file(dir / "tuned.toml");
  EXPECT_NE(tuned.find("max_lr = ["), std::string::npos);
  // The copy is a config glassbox reads.
  auto [rc_ok, out_ok] = testing::run_command(gb() + " train " + (dir / "tuned.toml").string() + small +
                                              " --set trainer.fast_dev_run=2 --set trainer.enable_progress_bar=false");
  EXPECT_EQ(rc_ok, 0) << out_ok;

  auto [rc2, out2] =
      testing::run_command(gb() + " tune lr " + config + small + " --apply " + (dir / "tuned.toml").string());
  EXPECT_EQ(rc2, 2) << out2;
  EXPECT_NE(out2.find("exists"), std::string::npos) << out2;
  EXPECT_EQ(read_file(dir / "tuned.toml"), tuned);
  auto [rc3, out3] = testing::run_command(gb() + " tune lr " + config + " --min-lr 1 --max-lr 0.1");
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("min_lr < max_lr"), std::string::npos) << out3;
}

// glassbox tune batch-size: sizes double while they fit; the training set, the trial count and a
// memory limit stop the search; --apply writes the size found.
TEST(Tune, BatchSizeDoublesWhileItFits) {
  const fs::path dir = testing::temp_dir("cli_tune_batch");
  const std::string config = (testing::source_dir() / "configs" / "quickstart.toml").string();
  const std::string small = " --set data.limit_train=1500 --set data.val_size=500";  // 1000 training samples
  auto [rc, out] = testing::run_command(gb() + " tune batch-size " + config + small + " --json --apply " +
                                        (dir / "bs.toml").string());
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["batch_size"], 512);
  ASSERT_EQ(j["trials"].size(), 9u);  // 2 .. 512; 1024 exceeds the training set
  EXPECT_EQ(j["trials"][0]["batch_size"], 2);
  EXPECT_NE(j["stop_reason"].get<std::string>().find("exceed the training set"), std::string::npos);
  EXPECT_NE(read_file(dir / "bs.toml").find("batch_size = 512"), std::string::npos);
  auto [rc2, out2] = testing::run_command(gb() + " tune batch-size " + config + small + " --max-trials 3 --json");
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_EQ(nlohmann::json::parse(out2)["batch_size"], 8);
  // No process fits in 1 MB: nothing fits, and --apply has nothing to write.
  auto [rc3, out3] = testing::run_command(gb() + " tune batch-size " + config + small +
                                          " --memory-limit-mb 1 --apply " + (dir / "none.toml").string());
  EXPECT_EQ(rc3, 2) << out3;
  EXPECT_NE(out3.find("no batch size fitted"), std::string::npos) << out3;
  EXPECT_FALSE(fs::exists(dir / "none.toml"));
}

}  // namespace
}  // namespace glassbox
