// `glassbox bench serve` end to end, short: the real server as a child process, the FastAPI
// anchor, the JSON's figures and ratios consistent with each other, the server's statistics at
// concurrency 1 consistent (request time >= compute time, batches of one), the table printed from
// the JSON; the soak's series and the server's clean exit after SIGTERM; a bad repository is a
// one-line error. No wall-clock figure is asserted, only counts, structure and arithmetic.
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/serve_bench.h"
#include "glassbox/testing/testing.h"

namespace glassbox::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string gb() { return testing::build_path("glassbox/cli/glassbox").string(); }

// Runs glassbox with `args`; stdout is returned, stderr (the progress lines) goes to a file
// whose content is appended to failure messages.
std::pair<int, std::string> run(const std::string& args, std::string* log) {
  const fs::path err = testing::temp_dir("bench-serve-cli") / "stderr.txt";
  const auto [code, out] = testing::run_command("(" + gb() + " " + args + " 2>'" + err.string() + "')");
  std::ifstream in(err);
  log->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return {code, out};
}

void expect_point(const json& p, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_GT(p["requests"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(p["failed"].get<std::uint64_t>(), 0u);
  EXPECT_GT(p["infer_per_s"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(p["samples_per_s"].get<double>(), p["infer_per_s"].get<double>());  // one sample per request
  EXPECT_LE(p["p50_us"].get<double>(), p["p99_us"].get<double>());
  const std::string from = p["throughput_from"];
  EXPECT_DOUBLE_EQ(p["infer_per_s"].get<double>(),
                   p[from == "count" ? "infer_per_s_counted" : "infer_per_s_little"].get<double>());
  // Little's law: concurrency / mean latency.
  EXPECT_DOUBLE_EQ(p["infer_per_s_little"].get<double>(),
                   p["concurrency"].get<double>() / (p["mean_us"].get<double>() / 1e6));
  EXPECT_GE(p["loadgen_cpu_cores"].get<double>(), 0.0);
}

TEST(BenchServeCli, MlpAgainstItsAnchors) {
  std::string log;
  const auto [code, out] =
      run("bench serve --models mlp --seconds 0.4 --warmup 0.2 --concurrency 1,4 --monitor-blocks 1 --json", &log);
  ASSERT_EQ(code, 0) << out << log;
  const json r = json::parse(out);
  EXPECT_EQ(r["bench"], "serve");
  EXPECT_EQ(r["tensors"], "binary");
  ASSERT_EQ(r["models"].size(), 1u);
  const json& m = r["models"][0];
  EXPECT_EQ(m["name"], "mlp");
  EXPECT_EQ(m["input"], json({1, 28, 28}));

  const json& limit = m["limit"];
  std::vector<std::int64_t> batches;
  for (const auto& p : limit["sweep"]) batches.push_back(p["batch_size"]);
  EXPECT_EQ(batches, (std::vector<std::int64_t>{1, 8, 32, 64}));
  EXPECT_GT(limit["samples_per_s"].get<double>(), 0.0);
  // The ceiling is the mean of the limit at its best batch before and after the served sweep.
  double best_sweep = 0;
  for (const auto& p : limit["sweep"]) best_sweep = std::max(best_sweep, p["samples_per_s"].get<double>());
  EXPECT_DOUBLE_EQ(limit["samples_per_s_before"].get<double>(), best_sweep);
  EXPECT_GT(limit["samples_per_s_after"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(limit["samples_per_s"].get<double>(),
                   0.5 * (limit["samples_per_s_before"].get<double>() + limit["samples_per_s_after"].get<double>()));
  EXPECT_GT(limit["single_forward_us"].get<double>(), 0.0);
  EXPECT_EQ(m["preferred_batch_sizes"], json::array({limit["batch_size"]}));  // the batcher aims at the best batch

  for (const char* mode : {"served", "unbatched", "python", "litserve", "torchserve"}) {
    ASSERT_TRUE(m.contains(mode)) << mode << "\n" << log;
    expect_point(m[mode], mode);
    ASSERT_GE(m[mode]["sweep"].size(), 1u);
    EXPECT_EQ(m[mode]["sweep"][0]["concurrency"], 1);
    for (const auto& p : m[mode]["sweep"]) expect_point(p, std::string(mode) + " sweep");
  }
  // gRPC: the same server's gRPC port, its own sweep.
  for (const char* mode : {"grpc", "grpc_stream"}) {  // ModelInfer calls, and ModelStreamInfer streams
    ASSERT_TRUE(m.contains(mode)) << log;
    for (const auto& p : m[mode]["sweep"]) {
      EXPECT_GT(p["requests"].get<std::uint64_t>(), 0u);
      EXPECT_EQ(p["failed"].get<std::uint64_t>(), 0u) << p.dump();
      EXPECT_LE(p["p50_us"].get<double>(), p["p99_us"].get<double>());
    }
  }
  EXPECT_DOUBLE_EQ(m["grpc_stream_vs_http"].get<double>(),
                   m["grpc_stream"]["samples_per_s"].get<double>() / m["served"]["samples_per_s"].get<double>());
  EXPECT_DOUBLE_EQ(m["grpc_sps"].get<double>(), m["grpc"]["samples_per_s"].get<double>());
  EXPECT_DOUBLE_EQ(m["grpc_vs_http"].get<double>(),
                   m["grpc"]["samples_per_s"].get<double>() / m["served"]["samples_per_s"].get<double>());
  for (const char* k : {"litserve", "torchserve"}) {
    EXPECT_DOUBLE_EQ(m[std::string("vs_") + k].get<double>(),
                     m["served"]["samples_per_s"].get<double>() / m[k]["samples_per_s"].get<double>());
  }
  EXPECT_NE(m["litserve_server"].get<std::string>().find("litserve"), std::string::npos);
  EXPECT_NE(m["torchserve_server"].get<std::string>().find("torchserve"), std::string::npos);
  // The server's own account of concurrency 1: every request in a batch of its own, and its
  // time at least its compute time.
  for (const char* mode : {"served", "unbatched"}) {
    SCOPED_TRACE(mode);
    const json& s = m[mode]["server_c1"];
    EXPECT_GT(s["requests"].get<std::uint64_t>(), 0u);
    EXPECT_DOUBLE_EQ(s["mean_batch"].get<double>(), 1.0);
    EXPECT_GT(s["compute_us"].get<double>(), 0.0);
    EXPECT_GE(s["request_us"].get<double>(), s["compute_us"].get<double>());
    EXPECT_GE(s["queue_us"].get<double>(), 0.0);
  }
  EXPECT_DOUBLE_EQ(m["served_vs_limit"].get<double>(),
                   m["served"]["samples_per_s"].get<double>() / limit["samples_per_s"].get<double>());
  EXPECT_DOUBLE_EQ(m["batching_gain"].get<double>(),
                   m["served"]["samples_per_s"].get<double>() / m["unbatched"]["samples_per_s"].get<double>());
  EXPECT_DOUBLE_EQ(m["vs_python"].get<double>(),
                   m["served"]["samples_per_s"].get<double>() / m["python"]["samples_per_s"].get<double>());
  EXPECT_DOUBLE_EQ(m["overhead_us"].get<double>(), m["served"]["server_c1"]["overhead_us"].get<double>());
  EXPECT_DOUBLE_EQ(m["overhead_client_us"].get<double>(),
                   m["served"]["sweep"][0]["p50_us"].get<double>() - limit["single_forward_us"].get<double>());
  std::vector<std::string> goals;
  for (const auto& g : r["goals"]) goals.push_back(g["figure"]);
  // served_vs_limit's goal is ResNet-18's.
  EXPECT_EQ(goals, (std::vector<std::string>{"vs_python", "overhead_us", "grpc_vs_http", "vs_litserve", "vs_torchserve",
                                             "monitor_vs_plain"}));
  // Monitoring: the monitored model observing every request against the same model paused; the
  // figure is the median block's ratio.
  const auto& mon = m["monitored"];
  std::vector<double> blocks = mon["blocks"].get<std::vector<double>>();
  ASSERT_EQ(blocks.size(), 1u);  // --monitor-blocks 1
  EXPECT_DOUBLE_EQ(m["monitor_vs_plain"].get<double>(), blocks[0]);
  EXPECT_NEAR(blocks[0], mon["samples_per_s"].get<double>() / mon["plain_samples_per_s"].get<double>(), 1e-12);
  EXPECT_GT(mon["observed_requests"].get<double>() + mon["dropped_requests"].get<double>(), 0.0);
  EXPECT_EQ(mon["concurrency"], m["served"]["concurrency"]);
  // vs_python's reach: no server beats the limit, so it is at most limit / python.
  EXPECT_DOUBLE_EQ(r["goals"][0]["ceiling"].get<double>(),
                   limit["samples_per_s"].get<double>() / m["python"]["samples_per_s"].get<double>());
  EXPECT_EQ(r["goals"][0]["reachable"].get<bool>(), r["goals"][0]["ceiling"].get<double>() >= 5);
  EXPECT_NE(m["python_server"].get<std::string>().find("uvicorn"), std::string::npos);

  std::ostringstream table;
  print_serve_bench(r, table);
  EXPECT_NE(table.str().find("served_vs_limit"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("overhead_us"), std::string::npos) << table.str();
  // One progress line per measured point.
  EXPECT_NE(log.find("served      mlp             c=4"), std::string::npos) << log;
}

TEST(BenchServeCli, SoakSamplesRssAndTheServerDrainsOnSigterm) {
  std::string log;
  const auto [code, out] = run("bench serve --soak 3 --soak-interval 1 --soak-concurrency 8 --json", &log);
  ASSERT_EQ(code, 0) << out << log;
  const json r = json::parse(out);
  EXPECT_EQ(r["bench"], "serve-soak");
  EXPECT_EQ(r["failed"], 0) << r.dump(2);
  EXPECT_GT(r["requests"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(r["server_exit"], 0) << log;  // SIGTERM under no load: drained, exit 0
  EXPECT_TRUE(r["server_alive_at_end"].get<bool>());
  ASSERT_GE(r["series"].size(), 4u);  // t=0, ticks at 1 and 2 s (and maybe 3), the end
  for (const auto& p : r["series"]) EXPECT_GT(p["rss_kib"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(r["series"].back()["completed"], r["requests"]);
  EXPECT_EQ(r["rss_end_kib"], r["series"].back()["rss_kib"]);
  const double growth =
      (r["rss_end_kib"].get<double>() - r["rss_warm_kib"].get<double>()) / r["rss_warm_kib"].get<double>() * 100;
  EXPECT_DOUBLE_EQ(r["rss_growth_pct"].get<double>(), growth);
  EXPECT_GE(r["rss_warm_t_s"].get<double>(), 1.5);  // warm-up: at most half of the 3 s run
}

TEST(BenchServeCli, AMissingRepositoryIsAOneLineError) {
  std::string log;
  const auto [code, out] = run("bench serve --repository /nonexistent/repo --model quickstart", &log);
  EXPECT_EQ(code, 2) << out << log;
  EXPECT_NE(log.find("error: "), std::string::npos) << log;
  EXPECT_NE(log.find("/nonexistent/repo"), std::string::npos) << log;
}

}  // namespace
}  // namespace glassbox::bench
