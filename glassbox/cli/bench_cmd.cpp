// glassbox bench train
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/train_bench.h"
#include "glassbox/cli/commands.h"

namespace glassbox::cli {

void add_bench(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("bench", "Benchmarks against their anchors, measured in the same run");
  cmd->require_subcommand(1);
  auto o = std::make_shared<bench::TrainBenchOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* train = cmd->add_subcommand("train", "Trainer samples/s vs a raw LibTorch loop, Python PyTorch and Lightning");
  train->add_option("--steps", o->steps, "measured optimiser steps per repeat")->check(CLI::PositiveNumber);
  train->add_option("--batch-size", o->batch_size, "batch size")->check(CLI::PositiveNumber);
  train->add_option("--threads", o->threads, "intra-op threads for every measurement")->check(CLI::PositiveNumber);
  train->add_option("--repeats", o->repeats, "best of N")->check(CLI::PositiveNumber);
  train->add_option("--probe-pairs", o->probe_pairs, "plain/probed pairs behind probes_vs_plain (median ratio)")->check(CLI::PositiveNumber);
  train->add_flag("--skip-python", o->skip_python, "measure the C++ loops only");
  train->add_flag("--json", *json, "print one JSON object");
  train->footer("Example:\n  glassbox bench train --json");
  train->callback([o, json] {
    const nlohmann::json r = bench::run_train_bench(*o);
    if (*json) {
      std::cout << r.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("trainer {:.0f} samples/s, raw LibTorch {:.0f} (ratio {:.3f})\n", r["trainer_sps"].get<double>(),
                             r["raw_sps"].get<double>(), r["trainer_vs_raw"].get<double>());
    std::cout << fmt::format("with diagnostics (probes every 50 steps) {:.0f} samples/s: probes_vs_plain {:.3f} (median of {} pairs)\n", r["probes_sps"].get<double>(),
                             r["probes_vs_plain"].get<double>(), r["probe_pairs"].get<std::int64_t>());
    if (r.contains("python_sps")) {
      std::cout << fmt::format("python {:.0f} samples/s (trainer x{:.2f}), lightning {:.0f} (trainer x{:.2f})\n", r["python_sps"].get<double>(),
                               r["trainer_vs_python"].get<double>(), r["lightning_sps"].get<double>(), r["trainer_vs_lightning"].get<double>());
    }
  });
}

}  // namespace glassbox::cli
