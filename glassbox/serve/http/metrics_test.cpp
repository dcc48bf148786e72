// Prometheus rendering: both naming schemes, histograms, escaping, the process figures, and
// `promtool check metrics` (the reference linter) on the output.
#include "glassbox/serve/http/metrics.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "glassbox/serve/engine/fake_engine_test.h"
#include "glassbox/testing/testing.h"

namespace glassbox::serve {
namespace {

std::vector<ModelStats> sample_stats() {
  ModelStats a;
  a.name = "mlp";
  a.version = "1";
  a.inference_count = 40;
  a.execution_count = 12;
  a.success = {30, 4'500'000'000};  // 4.5 s
  a.fail = {3, 1000};
  a.queue = {33, 250'000};
  a.compute_input = {12, 1'000'000};
  a.compute_infer = {12, 2'000'000'000};
  a.compute_output = {12, 3'000};
  a.failures = {{"REJECTED", 2}, {"BACKEND", 1}};
  a.pending = 5;
  a.request_seconds = {{0.001, 0.01, 0.1}, {4, 20, 29}, 30, 4.5};
  a.queue_seconds = {{0.001, 0.01}, {33, 33}, 33, 0.00025};
  a.compute_seconds = {{0.1, 1}, {2, 12}, 12, 2.001};
  ModelStats b;
  b.name = "we\"ird\\na\nme";
  b.version = "2";
  return {a, b};
}

ProcessFigures sample_process() { return {123456789, 12.5, 1700000000.25, 17}; }

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Metrics, PrometheusNames) {
  const std::string t = render_metrics(sample_stats(), sample_process(), MetricNames::kPrometheus);
  EXPECT_TRUE(has_line(t, "# TYPE nv_inference_request_success_total counter")) << t;
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_success_total{model="mlp",version="1"} 30)")) << t;
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_failure_total{model="mlp",version="1",reason="REJECTED"} 2)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_failure_total{model="mlp",version="1",reason="CANCELED"} 0)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_failure_total{model="mlp",version="1",reason="BACKEND"} 1)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_count_total{model="mlp",version="1"} 40)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_exec_total{model="mlp",version="1"} 12)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_duration_seconds_total{model="mlp",version="1"} 4.5)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_queue_duration_seconds_total{model="mlp",version="1"} 0.00025)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_compute_infer_duration_seconds_total{model="mlp",version="1"} 2)"));
  EXPECT_TRUE(has_line(t, "# TYPE nv_inference_pending_requests gauge"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_pending_requests{model="mlp",version="1"} 5)"));
  EXPECT_TRUE(has_line(t, "process_resident_memory_bytes 123456789"));
  EXPECT_TRUE(has_line(t, "process_cpu_seconds_total 12.5"));
  EXPECT_TRUE(has_line(t, "process_start_time_seconds 1700000000.25"));
  EXPECT_TRUE(has_line(t, "process_open_fds 17"));
  EXPECT_EQ(t.find("_us"), std::string::npos);
  // Every family has HELP and TYPE.
  std::size_t helps = 0, types = 0;
  for (std::size_t p = t.find("# HELP "); p != std::string::npos; p = t.find("# HELP ", p + 1)) ++helps;
  for (std::size_t p = t.find("# TYPE "); p != std::string::npos; p = t.find("# TYPE ", p + 1)) ++types;
  EXPECT_EQ(helps, types);
  EXPECT_EQ(helps, 1u + 8u + 1u + 3u + 4u);
}

TEST(Metrics, HistogramsAreCumulativeWithInfEqualToCount) {
  const std::string t = render_metrics(sample_stats(), sample_process(), MetricNames::kPrometheus);
  EXPECT_TRUE(has_line(t, "# TYPE nv_inference_request_seconds histogram"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_seconds_bucket{model="mlp",version="1",le="0.001"} 4)")) << t;
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_seconds_bucket{model="mlp",version="1",le="0.01"} 20)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_seconds_bucket{model="mlp",version="1",le="0.1"} 29)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_seconds_bucket{model="mlp",version="1",le="+Inf"} 30)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_seconds_sum{model="mlp",version="1"} 4.5)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_seconds_count{model="mlp",version="1"} 30)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_compute_seconds_bucket{model="mlp",version="1",le="1"} 12)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_queue_seconds_count{model="mlp",version="1"} 33)"));
}

TEST(Metrics, LabelValuesAreEscaped) {
  const std::string t = render_metrics(sample_stats(), sample_process(), MetricNames::kPrometheus);
  EXPECT_TRUE(has_line(t, R"(nv_inference_count_total{model="we\"ird\\na\nme",version="2"} 0)")) << t;
}

TEST(Metrics, TritonNamesAndMicroseconds) {
  const std::string t = render_metrics(sample_stats(), sample_process(), MetricNames::kTriton);
  EXPECT_TRUE(has_line(t, "# TYPE nv_inference_request_success counter"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_success{model="mlp",version="1"} 30)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_failure{model="mlp",version="1",reason="REJECTED"} 2)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_count{model="mlp",version="1"} 40)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_exec_count{model="mlp",version="1"} 12)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_request_duration_us{model="mlp",version="1"} 4500000)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_queue_duration_us{model="mlp",version="1"} 250)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_compute_input_duration_us{model="mlp",version="1"} 1000)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_compute_infer_duration_us{model="mlp",version="1"} 2000000)"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_compute_output_duration_us{model="mlp",version="1"} 3)"));
  EXPECT_TRUE(has_line(t, "# TYPE nv_inference_pending_request_count gauge"));
  EXPECT_TRUE(has_line(t, R"(nv_inference_pending_request_count{model="mlp",version="1"} 5)"));
  EXPECT_EQ(t.find("_total{model"), std::string::npos);
}

// promtool reads the exposition from stdin; nothing on its output means no lint finding.
std::pair<int, std::string> promtool(const std::string& text, const std::string& name) {
  const auto path = glassbox::testing::temp_dir("metrics_" + name) / "metrics.txt";
  std::ofstream(path) << text;
  return glassbox::testing::run_command("promtool check metrics < " + path.string());
}

TEST(Metrics, PromtoolFindsNothingInThePrometheusNaming) {
  if (!std::filesystem::exists("/usr/bin/promtool")) GTEST_SKIP() << "promtool is not installed";
  const auto [status, output] =
      promtool(render_metrics(sample_stats(), process_figures(), MetricNames::kPrometheus), "prom");
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "");
  const auto [empty_status, empty_output] =
      promtool(render_metrics({}, process_figures(), MetricNames::kPrometheus), "empty");
  EXPECT_EQ(empty_status, 0) << empty_output;
  EXPECT_EQ(empty_output, "");
  // Triton's own names are what promtool objects to (that is why kPrometheus exists).
  const auto [triton_status, triton_output] =
      promtool(render_metrics(sample_stats(), process_figures(), MetricNames::kTriton), "triton");
  EXPECT_NE(triton_output.find("nv_inference_request_success"), std::string::npos) << triton_output;
}

TEST(Metrics, ProcessFiguresOfThisProcess) {
  const ProcessFigures p = process_figures();
  EXPECT_GT(p.resident_memory_bytes, 1 << 20);
  EXPECT_GE(p.cpu_seconds, 0);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(p.start_time_seconds, now + 2);
  EXPECT_GT(p.start_time_seconds, now - 24 * 3600);
  EXPECT_GT(p.open_fds, 2);
}

TEST(Metrics, Endpoint) {
  testing::FakeEngine engine;
  HttpRequest req;
  req.target = "/metrics";
  HttpResponse r = metrics_response(req, engine, MetricNames::kPrometheus);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(has_line(r.body, R"(nv_inference_count_total{model="mlp",version="1"} 7)")) << r.body;
  req.target = "/metrics?x=1";
  EXPECT_EQ(metrics_response(req, engine, MetricNames::kPrometheus).status, 200);
  req.method = Method::kPost;
  r = metrics_response(req, engine, MetricNames::kPrometheus);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.allow, "GET");
  req.method = Method::kGet;
  req.target = "/v2/health/live";
  r = metrics_response(req, engine, MetricNames::kPrometheus);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, R"({"error":"Not Found"})");
}

}  // namespace
}  // namespace glassbox::serve
