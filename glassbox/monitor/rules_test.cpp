#include "glassbox/monitor/rules.h"

#include <gtest/gtest.h>

#include "glassbox/base/error.h"

namespace glassbox::monitor {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// A monitored model gets an alert per alarm kind and the serving alerts with its own thresholds;
// an unmonitored one only the serving alerts. (promtool checks the YAML in serve_monitor_prometheus.)
TEST(Rules, OneGroupPerModelWithItsThresholds) {
  AlarmOptions fast;
  fast.latency_p99_ms = 80;
  fast.out_of_range_share = 0.02;
  const std::string yaml = prometheus_rules({{"fashion", fast, true}, {"plain", {}, false}}, {});
  EXPECT_EQ(count(yaml, "  - name: 'glassbox-"), 2u);
  for (const std::string& kind : AlarmTracker::kinds())
    EXPECT_NE(yaml.find("model=\"fashion\", kind=\"" + kind + "\""), std::string::npos) << kind;
  EXPECT_EQ(count(yaml, "glassbox_monitor_alarm{model=\"plain\""), 0u);
  EXPECT_NE(yaml.find("rate(nv_inference_request_seconds_bucket{model=\"fashion\"}[5m]))) > 0.08'"), std::string::npos);
  EXPECT_NE(yaml.find("rate(nv_inference_request_seconds_bucket{model=\"plain\"}[5m]))) > 0.12'"), std::string::npos);
  EXPECT_NE(yaml.find("> 0.02'"), std::string::npos);
  EXPECT_NE(yaml.find("nv_inference_request_failure_total{model=\"plain\"}"), std::string::npos);
  const std::string triton = prometheus_rules({{"plain", {}, false}}, {.triton_names = true});
  EXPECT_NE(triton.find("nv_inference_request_failure{model=\"plain\"}"), std::string::npos);
  EXPECT_THROW(prometheus_rules({}, {}), Error);
}

TEST(Rules, DashboardPanelsQueryTheServersSeries) {
  const nlohmann::json d = grafana_dashboard({{"fashion", {}, true}}, {});
  ASSERT_GE(d["panels"].size(), 10u);
  std::string all;
  for (const auto& p : d["panels"])
    for (const auto& t : p["targets"]) all += t["expr"].get<std::string>() + "\n";
  for (const char* series :
       {"nv_inference_request_success_total", "nv_inference_request_seconds_bucket",
        "nv_inference_request_failure_total", "nv_inference_pending_requests", "nv_inference_queue_seconds_bucket",
        "nv_inference_count_total", "nv_inference_exec_total", "glassbox_monitor_input_out_of_range_total",
        "glassbox_monitor_feature_wasserstein_normed", "glassbox_monitor_confidence_mean",
        "glassbox_monitor_class_share", "glassbox_monitor_alarm"})
    EXPECT_NE(all.find(series), std::string::npos) << series;
  EXPECT_EQ(d["templating"]["list"][1]["name"], "model");
}

}  // namespace
}  // namespace glassbox::monitor
