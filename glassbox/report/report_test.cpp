// The report over synthetic run directories: sections, values, notes, errors, the atomic write.
#include "glassbox/report/report.h"

#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/report/sample_run.h"
#include "glassbox/testing/testing.h"

namespace glassbox::report {
namespace {

using nlohmann::json;

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

#define EXPECT_HAS(html, text) EXPECT_NE((html).find(text), std::string::npos) << "missing: " << (text)

fs::path sample(const std::string& name, const SampleRunParts& parts = {}) {
  const fs::path dir = testing::temp_dir(name) / "run";
  write_sample_run(dir, parts);
  return dir;
}

json load(const fs::path& p) { return json::parse(read_file(p)); }
void save(const fs::path& p, const json& j) { write_file_atomic(p, j.dump()); }

TEST(Report, HasEverySectionAndChart) {
  const std::string html = build_report(sample("report_all"));
  for (const char* id : {"summary", "config", "training", "evaluation", "gradcam", "doctor", "fairness"}) {
    EXPECT_EQ(count(html, std::string("<section id=\"") + id + "\">"), 1u) << id;
    EXPECT_HAS(html, std::string("<a href=\"#") + id + "\">");
  }
  for (const char* chart : {"loss", "accuracy", "lr", "grad_norm", "confusion", "reliability", "pr", "gradcam"}) {
    EXPECT_EQ(count(html, std::string("data-chart=\"") + chart + "\""), 1u) << chart;
  }
  EXPECT_EQ(count(html, "<svg "), 8u);  // lr twice (log and linear), the gallery has images instead
}

TEST(Report, ShowsTheValuesOfTheArtefacts) {
  const fs::path dir = sample("report_values");
  const std::string html = build_report(dir);
  // summary.json
  for (const char* s : {"glass-box report · run", "cnn", "12,345", "bf16-mixed", "glassbox 0.1.0", "LibTorch 2.9.1",
                        "1 min 24 s (fit)", "4,322 samples/s", "early stopping: val_loss did not improve for 3 epochs",
                        "runs/sample/checkpoints/epoch=2-step=60.ckpt", "score 0.7731", "test accuracy 76.00 %"}) {
    EXPECT_HAS(html, s);
  }
  // config.toml, escaped
  EXPECT_HAS(html, "name = &quot;&lt;sample&gt; &amp; &#39;quotes&#39;&quot;");
  // metrics.jsonl
  EXPECT_HAS(html, ">train_loss (step)</text>");
  EXPECT_HAS(html, ">val_acc</text>");
  EXPECT_HAS(html, ">test_loss</text>");
  EXPECT_HAS(html, "1 non-finite value(s)");
  EXPECT_HAS(html, "id=\"log-lr\" checked");                        // lr spans four decades
  EXPECT_EQ(html.find("id=\"log-grad_norm\""), std::string::npos);  // grad_norm does not
  EXPECT_HAS(html, "Also logged (not charted): lr-group0, samples_per_second.");
  // eval/metrics.json
  for (const char* s :
       {"<b>76.00 %</b>", "40.00 % (always predicting cat &amp; &lt;dog&gt;)", "36.00 percentage points",
        "top-1 76.00 % · top-3 94.40 %", "0.0734 (10 equal-width confidence bins)",
        "class &#39;fish&#39; has 5 samples", ">0.833<", "0.8163", ">fish</td>", "AP 0.871)",
        ">gap to mean confidence</text>", ">6.25<", "from the train split",
        "balanced accuracy (mean recall)</th><td>59.58 %", "maximum calibration error</th><td>0.1412",
        "<p class=\"note\">fish is never predicted: its precision is undefined</p>",
        "features.3 is the last convolutional block"}) {
    EXPECT_HAS(html, s);
  }
  // fish is never predicted: its precision is undefined, shown as a dash with the footnote.
  EXPECT_EQ(count(html, "title=\"undefined\""), 1u);
  EXPECT_HAS(html, "undefined: precision of a class that is never predicted");
  EXPECT_HAS(html, " precision: fish.");
  EXPECT_HAS(html, "<title>true fish, predicted cat &amp; &lt;dog&gt;: 3</title>");
  // explain/index.json: five samples, two images each, in two groups.
  EXPECT_EQ(count(html, "src=\"data:image/png;base64,iVBORw0KGgo"), 10u);
  EXPECT_HAS(html, "Correct predictions (3)");
  EXPECT_HAS(html, "Wrong predictions (2)");
  EXPECT_HAS(html, "at layer <code>features.3</code>");
  EXPECT_HAS(html, "(p 0.640)");
  // doctor.json
  EXPECT_HAS(html, "<span class=\"badge error\">error</span></td><td><code>lr-too-high</code>");
  EXPECT_HAS(html, "<span class=\"badge warning\">warning</span>");
  EXPECT_HAS(html, "parameter: <code>features.0.weight</code>");
  EXPECT_HAS(html, "2 errors, 1 info, 1 warning");
  EXPECT_HAS(html, "<code>dead-relu</code><br><small>because of <code>lr-too-high</code></small>");
  // fairness
  EXPECT_HAS(html, "attribute <b>group</b> · positive class bird · privileged group a");
  EXPECT_HAS(html, "<span class=\"flag\">demographic_parity</span> = 0.18 (threshold 0.1)");
  EXPECT_HAS(html, "<tr><th>demographic_parity</th><td class=\"num\">0.18</td><td><span class=\"flag\">flagged</span>");
  EXPECT_HAS(html, "<tr><th>disparate_impact</th><td class=\"num\">0.561</td><td></td>");
  EXPECT_HAS(html, "statistical_parity_difference");
  EXPECT_HAS(html, "<p class=\"foot\">convention: max - min between groups</p>");
  EXPECT_HAS(html, "<th class=\"num\">positives</th>");
  EXPECT_HAS(html, "<td>b</td><td class=\"num\">55</td><td class=\"num\">12</td><td class=\"num\">43</td>");
  EXPECT_HAS(html, "<p class=\"note\">group b has 12 positives</p>");
  EXPECT_HAS(html, "<h3>Every class against the rest</h3>");
  EXPECT_HAS(html, "<tr><td>cat &amp; &lt;dog&gt;</td><td class=\"num\">0.04</td>");
}

TEST(Report, LoadsNothingFromElsewhere) {
  const std::string html = build_report(sample("report_self"));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link rel=\"stylesheet\""), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  // A URL only as the SVG namespace name.
  EXPECT_EQ(count(html, "https:"), 0u);
  EXPECT_EQ(count(html, "http:"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_EQ(count(html, "src=\""), count(html, "src=\"data:"));
}

TEST(Report, FeatureAttributionsAreDrawnAsBars) {
  const fs::path dir = sample("report_features", {.explain = false});
  fs::create_directories(dir / "explain");
  save(dir / "explain" / "index.json", json{{"kind", "features"},
                                            {"method", "integrated_gradients"},
                                            {"features", {"age", "income & <tax>"}},
                                            {"importance",
                                             {{{"name", "income & <tax>"}, {"index", 1}, {"value", 0.5}},
                                              {{"name", "age"}, {"index", 0}, {"value", 0.25}}}},
                                            {"items",
                                             {{{"index", 3},
                                               {"label_name", "yes"},
                                               {"predicted_name", "no"},
                                               {"top_features", {{{"feature", "age"}, {"attribution", -0.75}}}}}}}});
  const std::string html = build_report(dir);
  EXPECT_HAS(html, "Feature attributions");
  EXPECT_HAS(html, "data-chart=\"feature-importance\"");
  EXPECT_HAS(html, "<td>income &amp; &lt;tax&gt;</td>");
  EXPECT_HAS(html, "width:100.0%");  // the largest bar spans the column
  EXPECT_HAS(html, "width:50.0%");
  EXPECT_HAS(html, "<td>3</td><td>yes</td><td>no</td><td>age -0.750</td>");
}

TEST(Report, AbsentOptionalFilesBecomeNotes) {
  const fs::path dir = sample("report_bare", {.eval = false, .explain = false, .doctor = false});
  const std::string html = build_report(dir);
  EXPECT_HAS(html, "Run <code>glassbox eval --checkpoint " + (dir / "checkpoints/last.ckpt").string() + "</code>");
  EXPECT_HAS(html, "No explanations yet");
  EXPECT_HAS(html, "No findings (no doctor.json)");
  EXPECT_HAS(html, "No evaluation yet, so no fairness analysis.");
  for (const char* id : {"evaluation", "gradcam", "doctor", "fairness"})
    EXPECT_HAS(html, std::string("<section id=\"") + id);
  for (const char* chart : {"confusion", "reliability", "pr", "gradcam"}) {
    EXPECT_EQ(html.find(std::string("data-chart=\"") + chart + "\""), std::string::npos) << chart;
  }
  // eval without fairness, an empty doctor report, summary and config gone.
  const fs::path d2 = sample("report_partial", {.fairness = false});
  save(d2 / "doctor.json", json{{"findings", json::array()}});
  fs::remove(d2 / "summary.json");
  fs::remove(d2 / "config.toml");
  const std::string h2 = build_report(d2);
  EXPECT_HAS(h2, "eval/metrics.json has no fairness analysis");
  EXPECT_HAS(h2, "No findings: the doctor found nothing to report.");
  EXPECT_HAS(h2, "No summary.json in");
  EXPECT_HAS(h2, "No config.toml in the run directory.");
  EXPECT_HAS(h2, "data-chart=\"loss\"");
}

TEST(Report, MissingRunDirectoryIsNotFound) {
  const fs::path dir = testing::temp_dir("report_none");
  try {
    build_report(dir / "nowhere");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(e.message().find("no run directory at"), std::string::npos) << e.what();
  }
  fs::create_directories(dir / "empty");
  try {
    build_report(dir / "empty");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(e.message().find("is not a run directory"), std::string::npos) << e.what();
  }
}

struct Malformed {
  std::string name;
  std::function<void(const fs::path&)> damage;
  std::string expected;  // in the one-line message, after the run directory
};

class ReportMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(ReportMalformed, IsOneLineNamingFileAndProblem) {
  const Malformed& m = GetParam();
  const fs::path dir = sample("report_bad_" + m.name);
  m.damage(dir);
  try {
    build_report(dir);
    FAIL() << "no error for " << m.name;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss) << e.what();
    EXPECT_TRUE(is_user_error(e.code()));
    const std::string what = e.what();
    EXPECT_NE(what.find(dir.string() + "/" + m.expected), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("(hint: "), std::string::npos) << what;
  }
}

void edit(const fs::path& file, const std::function<void(json&)>& f) {
  json j = load(file);
  f(j);
  save(file, j);
}

INSTANTIATE_TEST_SUITE_P(
    Files, ReportMalformed,
    ::testing::Values(
        Malformed{"eval_json",
                  [](const fs::path& d) { write_file_atomic(d / "eval/metrics.json", "{\"accuracy\": 0.5,"); },
                  "eval/metrics.json: bad JSON: parse error"},
        Malformed{"eval_array", [](const fs::path& d) { write_file_atomic(d / "eval/metrics.json", "[1, 2]"); },
                  "eval/metrics.json: the document must be a JSON object"},
        Malformed{"accuracy",
                  [](const fs::path& d) { edit(d / "eval/metrics.json", [](json& j) { j["accuracy"] = "high"; }); },
                  "eval/metrics.json: accuracy must be a number, got a string"},
        Malformed{"recall",
                  [](const fs::path& d) {
                    edit(d / "eval/metrics.json", [](json& j) { j["per_class"][1]["recall"] = json::array(); });
                  },
                  "eval/metrics.json: per_class[1].recall must be a number, got an array"},
        Malformed{"confusion",
                  [](const fs::path& d) {
                    edit(d / "eval/metrics.json", [](json& j) { j["confusion_matrix"][1].erase(0); });
                  },
                  "eval/metrics.json: confusion_matrix[1] must have 4 entries (a square matrix), got 3"},
        Malformed{"pr",
                  [](const fs::path& d) {
                    edit(d / "eval/metrics.json", [](json& j) { j["pr_curves"][2]["recall"].erase(0); });
                  },
                  "eval/metrics.json: pr_curves[2] has 21 precision and 20 recall values"},
        Malformed{
            "fairness",
            [](const fs::path& d) { edit(d / "eval/metrics.json", [](json& j) { j["fairness"]["groups"] = 3; }); },
            "eval/metrics.json: fairness.groups must be an array, got a number"},
        Malformed{
            "items",
            [](const fs::path& d) { edit(d / "explain/index.json", [](json& j) { j["items"] = json::object(); }); },
            "explain/index.json: items must be an array, got an object"},
        Malformed{"escape",
                  [](const fs::path& d) {
                    edit(d / "explain/index.json", [](json& j) { j["items"][0]["overlay"] = "../../summary.json"; });
                  },
                  "explain/index.json: items[0].overlay must stay inside explain/"},
        Malformed{"doctor_json", [](const fs::path& d) { write_file_atomic(d / "doctor.json", "findings"); },
                  "doctor.json: bad JSON"},
        Malformed{"evidence",
                  [](const fs::path& d) {
                    edit(d / "doctor.json", [](json& j) { j["findings"][1]["evidence"] = json::object(); });
                  },
                  "doctor.json: findings[1].evidence must be a string or a number, got an object"},
        Malformed{"summary",
                  [](const fs::path& d) { edit(d / "summary.json", [](json& j) { j["parameters"] = "many"; }); },
                  "summary.json: parameters must be a whole number, got a string"},
        Malformed{"jsonl_json",
                  [](const fs::path& d) {
                    std::string t = read_file(d / "metrics.jsonl");
                    write_file_atomic(d / "metrics.jsonl", "{\"step\": 1}\n\n{\"step\": 2,,}\n" + t);
                  },
                  "metrics.jsonl:3: bad JSON"},
        Malformed{
            "jsonl_step",
            [](const fs::path& d) { write_file_atomic(d / "metrics.jsonl", "{\"step\": 1}\n{\"step\": \"two\"}\n"); },
            "metrics.jsonl:2: step must be a number, got a string"},
        Malformed{"jsonl_row", [](const fs::path& d) { write_file_atomic(d / "metrics.jsonl", "[1]\n"); },
                  "metrics.jsonl:1: the document must be a JSON object"},
        Malformed{"jsonl_value",
                  [](const fs::path& d) {
                    write_file_atomic(d / "metrics.jsonl", "{\"step\": 1, \"train_loss\": \"nan\"}\n");
                  },
                  "metrics.jsonl:1: train_loss must be a number, got a string"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return info.param.name; });

TEST(Report, ToleratesAnInterruptedLastLine) {
  const fs::path dir = sample("report_tail");
  write_file_atomic(dir / "metrics.jsonl", read_file(dir / "metrics.jsonl") + "{\"step\": 99, \"train_lo");
  const std::string html = build_report(dir);
  EXPECT_HAS(html, "The last line of metrics.jsonl is incomplete");
  EXPECT_HAS(html, "data-chart=\"loss\"");
}

TEST(Report, ManyStepsStayCompact) {
  const fs::path dir = sample("report_long", {.eval = false, .explain = false, .doctor = false});
  std::string rows;
  for (int s = 1; s <= 30000; ++s) {
    rows += json{{"step", s}, {"train_loss", 2.0 / (1 + s * 1e-3)}, {"lr", 1e-3}, {"grad_norm", 1.0 + (s % 7)}}.dump() +
            "\n";
  }
  write_file_atomic(dir / "metrics.jsonl", rows);
  const std::string html = build_report(dir);
  EXPECT_HAS(html, "30,000 rows");
  EXPECT_LT(html.size(), 300u * 1024u);
}

TEST(Report, WriteIsAtomicAndKeepsTheOldReportOnError) {
  const fs::path dir = sample("report_write");
  const fs::path out = write_report(dir);
  EXPECT_EQ(out, dir / "report.html");
  const std::string first = read_file(out);
  EXPECT_EQ(first, build_report(dir));  // deterministic
  write_file_atomic(dir / "eval/metrics.json", "{oops");
  EXPECT_THROW(write_report(dir), Error);
  EXPECT_EQ(read_file(out), first);
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
  // --out elsewhere, parent folders created.
  fs::remove(dir / "eval/metrics.json");
  const fs::path other = write_report(dir, dir.parent_path() / "site" / "r.html");
  EXPECT_TRUE(fs::exists(other));
  EXPECT_NE(read_file(other).find("No evaluation yet"), std::string::npos);
}

}  // namespace
}  // namespace glassbox::report
