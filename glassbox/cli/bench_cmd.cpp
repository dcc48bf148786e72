// glassbox bench train | serve | data | ddp
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/data_bench.h"
#include "bench/ddp_bench.h"
#include "bench/serve_bench.h"
#include "bench/train_bench.h"
#include "glassbox/app/quickstart.h"
#include "glassbox/base/error.h"
#include "glassbox/cli/commands.h"

namespace glassbox::cli {

namespace {

// "3x224x224" -> {3, 224, 224}; flag names the option in the error.
std::vector<std::int64_t> parse_dims(const std::string& text, const std::string& flag = "--resnet-input") {
  std::vector<std::int64_t> dims;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t x = text.find('x', start);
    const std::string part = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    GB_CHECK(!part.empty() && part.find_first_not_of("0123456789") == std::string::npos, InvalidArgument,
             flag << " '" << text << "' is not CxHxW", "e.g. " + flag + " 3x64x64");
    dims.push_back(std::stoll(part));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return dims;
}

void add_bench_ddp(CLI::App& bench) {
  auto o = std::make_shared<bench::DdpBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto worker = std::make_shared<bool>(false);
  auto input = std::make_shared<std::string>("3x64x64");
  CLI::App* ddp = bench.add_subcommand(
      "ddp",
      "Data-parallel training (Gloo): N ranks vs one process (scaling_efficiency) and vs PyTorch's DDP under "
      "torchrun (vs_python_ddp), on mobilenet_v3_small or a VGG-style CNN");
  ddp->add_option("--model", o->model, "cnn (dense 3x3 convolutions) or mobilenet_v3_small (depthwise)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cnn", "mobilenet_v3_small"}));
  ddp->add_option("--nproc", o->nproc, "ranks (one intra-op thread each)")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  ddp->add_option("--batch-size", o->batch_size, "samples per rank per step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  ddp->add_option("--steps", o->steps, "measured steps per run")->capture_default_str()->check(CLI::PositiveNumber);
  ddp->add_option("--warmup", o->warmup, "steps before the measured ones")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  ddp->add_option("--repeats", o->repeats, "rounds of interleaved runs (the median round is reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  ddp->add_option("--input", *input, "image shape CxHxW")->capture_default_str();
  ddp->add_option("--samples", o->samples, "synthetic data set size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  ddp->add_flag("--skip-python", o->skip_python, "no PyTorch DDP anchor (python_ddp_sps null)");
  ddp->add_flag("--json", *json, "print one JSON object (progress goes to stderr)");
  // One rank of a measurement (started by the benchmark itself).
  ddp->add_flag("--worker", *worker)->group("");
  ddp->add_flag("--gloo", o->gloo)->group("");
  ddp->footer(
      "Examples:\n"
      "  glassbox bench ddp --json            # about 4 minutes on 2 cores\n"
      "  glassbox bench ddp --model cnn --input 3x32x32 --json\n"
      "  glassbox bench ddp --skip-python --steps 10 --repeats 1");
  ddp->callback([o, json, worker, input] {
    o->input = parse_dims(*input, "--input");
    if (*worker) {
      const nlohmann::json r = bench::run_ddp_bench_worker(*o);
      if (std::getenv("RANK") == nullptr || std::string(std::getenv("RANK")) == "0") std::cout << r.dump() << "\n";
      return;
    }
    const nlohmann::json r = bench::run_ddp_bench(*o);
    if (*json) {
      std::cout << r.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("{}: {} ranks x 1 thread {:.1f} samples/s, 1 process x 1 thread {:.1f}\n",
                             r["model"].get<std::string>(), r["nproc"].get<std::int64_t>(), r["ddp_sps"].get<double>(),
                             r["single_sps"].get<double>());
    std::cout << fmt::format("scaling_efficiency {:.3f}\n", r["scaling_efficiency"].get<double>());
    if (r["python_ddp_sps"].is_number())
      std::cout << fmt::format("PyTorch DDP (torchrun, gloo) {:.1f} samples/s: vs_python_ddp {:.3f}\n",
                               r["python_ddp_sps"].get<double>(), r["vs_python_ddp"].get<double>());
  });
}

void add_bench_serve(CLI::App& bench) {
  auto o = std::make_shared<bench::ServeBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto resnet_input = std::make_shared<std::string>("3x224x224");
  CLI::App* serve = bench.add_subcommand(
      "serve",
      "glassbox serve (HTTP, gRPC calls and streams) vs raw LibTorch, itself without batching, and the Python "
      "servers (FastAPI, LitServe, TorchServe)");
  serve->add_option("--models", o->models, "zoo models to bench: mlp (the quickstart model), resnet18")
      ->delimiter(',')
      ->capture_default_str();
  serve->add_option("--repository", o->repository, "bench a model of this exported repository instead (with --model)");
  serve->add_option("--model", o->model, "the model name in --repository");
  serve->add_option("--resnet-input", *resnet_input, "ResNet-18 input CxHxW (3x64x64 shortens the run)")
      ->capture_default_str();
  serve->add_option("--seconds", o->seconds, "measured window per point (slow models: 6 full batches, up to 15 s)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--warmup", o->warmup_seconds, "warm-up per point")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--concurrency", o->concurrency, "concurrency sweep; stops once throughput stops rising")
      ->delimiter(',')
      ->capture_default_str();
  serve
      ->add_option("--threads", o->threads, "intra-op threads of the limit and both servers (0: cores - 1, at least 1)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--http-threads", o->http_threads, "glassbox serve --threads (0: its default)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--loadgen-threads", o->loadgen_threads, "load generator threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 4));
  serve->add_option("--request-batch", o->request_batch, "samples per request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve
      ->add_option("--max-batch-size", o->max_batch_size,
                   "served config's max_batch_size (and the limit's largest batch)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve
      ->add_option("--preferred", o->preferred_batch_sizes,
                   "served config's preferred_batch_size list (default: the limit's best batch size)")
      ->delimiter(',')
      ->capture_default_str();
  serve->add_option("--max-queue-delay-us", o->max_queue_delay_us, "served config's max_queue_delay_microseconds")
      ->capture_default_str();
  serve->add_flag("--skip-python", o->skip_python, "skip every Python anchor");
  serve
      ->add_option("--anchors", o->anchors,
                   "the Python servers measured beside glassbox serve: fastapi, litserve, torchserve")
      ->delimiter(',')
      ->capture_default_str();
  serve->add_flag("--skip-grpc", o->skip_grpc, "skip the gRPC sweep");
  serve
      ->add_option("--soak", o->soak_seconds, "instead: the MLP at saturation for SECONDS; RSS series, failed requests")
      ->check(CLI::PositiveNumber);
  serve->add_option("--soak-interval", o->soak_interval, "seconds between RSS samples")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--soak-warmup", o->soak_warmup, "RSS growth is measured from here (at most half the run)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve
      ->add_option("--monitor-blocks", o->monitor_blocks,
                   "ABBA blocks (plain, monitored, monitored, plain) behind monitor_vs_plain")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--soak-concurrency", o->soak_concurrency, "soak concurrency")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_flag("--json", *json, "print one JSON object (progress goes to stderr)");
  serve->footer(
      "Examples:\n"
      "  glassbox bench serve                       # mlp and resnet18 (3x224x224), about 10 minutes\n"
      "  glassbox bench serve --models mlp --seconds 2 --skip-python\n"
      "  glassbox bench serve --repository runs/quickstart/export/repository --model quickstart --json\n"
      "  glassbox bench serve --soak 600            # the soak: RSS and failures over 10 minutes");
  serve->callback([o, json, resnet_input] {
    o->resnet_input = parse_dims(*resnet_input);
    o->quickstart_toml = app::embedded_quickstart_config();
    o->log = &std::cerr;
    const nlohmann::json r = bench::run_serve_bench(*o);
    if (*json) {
      std::cout << r.dump(2) << "\n";
    } else {
      bench::print_serve_bench(r, std::cout);
    }
  });
}

void add_bench_data(CLI::App& bench) {
  auto o = std::make_shared<bench::DataBenchOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* data = bench.add_subcommand(
      "data", "Image pipeline images/s vs albumentations, torchvision and torch.utils.data.DataLoader");
  data->add_option("--window", o->window, "seconds per measured window")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  data->add_option("--repeats", o->repeats, "best of N windows")->capture_default_str()->check(CLI::PositiveNumber);
  data->add_option("--images", o->images, "JPEG files the loaders read (at least 64)")
      ->capture_default_str()
      ->check(CLI::Range(64, 100000));
  data->add_option("--workers", o->workers, "loader worker counts")->delimiter(',')->capture_default_str();
  data->add_option("--transforms", o->transforms, "transforms to bench (default: all)")->delimiter(',');
  data->add_flag("--skip-transforms", o->skip_transforms, "measure the loaders only");
  data->add_flag("--skip-loaders", o->skip_loaders, "measure the transforms only");
  data->add_flag("--skip-python", o->skip_python, "measure glassbox only");
  data->add_flag("--json", *json, "print one JSON object (progress goes to stderr)");
  data->footer(
      "Examples:\n"
      "  glassbox bench data --json                 # every transform and both loaders, about 6 minutes\n"
      "  glassbox bench data --transforms HorizontalFlip,Rotate --skip-loaders --window 0.3");
  data->callback([o, json] {
    o->log = &std::cerr;
    const nlohmann::json r = bench::run_data_bench(*o);
    if (*json) {
      std::cout << r.dump(2) << "\n";
    } else {
      bench::print_data_bench(r, std::cout);
    }
  });
}

}  // namespace

void add_bench(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("bench", "Benchmarks against their anchors, measured in the same run");
  cmd->require_subcommand(1);
  auto o = std::make_shared<bench::TrainBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto mobilenet_input = std::make_shared<std::string>("3x64x64");
  CLI::App* train = cmd->add_subcommand(
      "train",
      "Trainer samples/s vs raw LibTorch (fused AdamW), Python (fused, torch.compile) and Lightning, on the MLP "
      "and MobileNetV3-small");
  train->add_option("--steps", o->steps, "measured optimiser steps per repeat (the MLP)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--warmup", o->warmup, "warm-up steps before each measurement (the MLP)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--batch-size", o->batch_size, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  train->add_option("--threads", o->threads, "intra-op threads for every measurement")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_option("--repeats", o->repeats, "best of N")->capture_default_str()->check(CLI::PositiveNumber);
  train->add_option("--probe-pairs", o->probe_pairs, "plain/probed pairs behind probes_vs_plain (median ratio)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train
      ->add_option("--models", o->models,
                   "per-model sections against the fused anchors: mlp, mobilenet_v3_small (the top-level MLP "
                   "figures always run)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember({"mlp", "mobilenet_v3_small"}));
  train->add_option("--mobilenet-input", *mobilenet_input, "mobilenet_v3_small's input CxHxW")->capture_default_str();
  train
      ->add_option("--compute-steps", o->compute_steps,
                   "mobilenet_v3_small's measured steps (default: --steps / 6, at least 2)")
      ->check(CLI::PositiveNumber);
  train
      ->add_option("--compute-warmup", o->compute_warmup,
                   "mobilenet_v3_small's warm-up steps (default: --warmup / 20, at least 1)")
      ->check(CLI::PositiveNumber);
  train->add_flag("--skip-python", o->skip_python, "measure the C++ loops only (Python anchors null)");
  train->add_flag("--skip-compile", o->skip_compile, "no torch.compile anchor (compiled_sps null)");
  train->add_flag("--json", *json, "print one JSON object (progress goes to stderr)");
  train->footer(
      "Anchors: raw (LibTorch, torch::optim::AdamW), python, lightning on the MLP at the top level; per model\n"
      "(JSON objects \"mlp\", \"mobilenet_v3_small\"): raw_fused (forward, loss, backward, glassbox's fused\n"
      "AdamW step), python_fused (AdamW(fused=True)), compiled (torch.compile, compilation excluded; null with\n"
      "compiled_error when it cannot run), lightning (fused); on mobilenet_v3_small also the Trainer with\n"
      "trainer.channels_last and gradient checkpointing (checkpointing_time_ratio, checkpointing_memory_ratio:\n"
      "peak RSS growth with / without).\n"
      "\n"
      "Examples:\n"
      "  glassbox bench train --json                # everything, about 10 minutes on 2 cores\n"
      "  glassbox bench train --models mlp --skip-compile\n"
      "  glassbox bench train --skip-python --steps 40 --repeats 1 --probe-pairs 1");
  train->callback([o, json, mobilenet_input] {
    o->mobilenet_input = parse_dims(*mobilenet_input, "--mobilenet-input");
    const nlohmann::json r = bench::run_train_bench(*o);
    if (*json) {
      std::cout << r.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("trainer {:.0f} samples/s, raw LibTorch {:.0f} (ratio {:.3f})\n",
                             r["trainer_sps"].get<double>(), r["raw_sps"].get<double>(),
                             r["trainer_vs_raw"].get<double>());
    std::cout << fmt::format(
        "with diagnostics (probes every 50 steps) {:.0f} samples/s: probes_vs_plain {:.3f} (median of {} pairs)\n",
        r["probes_sps"].get<double>(), r["probes_vs_plain"].get<double>(), r["probe_pairs"].get<std::int64_t>());
    if (r.contains("python_sps")) {
      std::cout << fmt::format("python {:.0f} samples/s (trainer x{:.2f}), lightning {:.0f} (trainer x{:.2f})\n",
                               r["python_sps"].get<double>(), r["trainer_vs_python"].get<double>(),
                               r["lightning_sps"].get<double>(), r["trainer_vs_lightning"].get<double>());
    }
    // "-" for an anchor that did not run.
    const auto num = [](const nlohmann::json& v, const char* format) {
      return v.is_number() ? fmt::format(fmt::runtime(format), v.get<double>()) : std::string("-");
    };
    for (const auto& key : r["models"]) {
      const nlohmann::json& m = r[key.get<std::string>()];
      std::cout << fmt::format("{} ({} parameters):\n", m["model"].get<std::string>(), m["params"].get<std::int64_t>());
      std::cout << fmt::format("  trainer {} samples/s\n", num(m["trainer_sps"], "{:.1f}"));
      for (const char* a : {"raw_fused", "python_fused", "compiled", "lightning"}) {
        std::cout << fmt::format("  {:<13} {:>9} samples/s, trainer_vs_{} {}\n", a,
                                 num(m[std::string(a) + "_sps"], "{:.1f}"), a,
                                 num(m["trainer_vs_" + std::string(a)], "{:.3f}"));
      }
      if (m.contains("compiled_error")) std::cout << "  compiled: " << m["compiled_error"].get<std::string>() << "\n";
      if (m.contains("trainer_channels_last_sps")) {
        std::cout << fmt::format("  trainer, channels_last {} samples/s, trainer_channels_last_vs_compiled {}\n",
                                 num(m["trainer_channels_last_sps"], "{:.1f}"),
                                 num(m["trainer_channels_last_vs_compiled"], "{:.3f}"));
      }
      if (m.contains("checkpointing_sps")) {
        std::cout << fmt::format(
            "  gradient checkpointing {} samples/s: time x{}, peak RSS growth {} MB -> {} MB (x{})\n",
            num(m["checkpointing_sps"], "{:.1f}"), num(m["checkpointing_time_ratio"], "{:.2f}"),
            num(m["peak_rss_growth_mb"], "{:.1f}"), num(m["checkpointing_peak_rss_growth_mb"], "{:.1f}"),
            num(m["checkpointing_memory_ratio"], "{:.2f}"));
      }
    }
  });
  add_bench_serve(*cmd);
  add_bench_data(*cmd);
  add_bench_ddp(*cmd);
}

}  // namespace glassbox::cli
