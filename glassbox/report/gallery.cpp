// The #gradcam gallery (explain/index.json and its images) and the #doctor findings (doctor.json).
#include <algorithm>
#include <map>
#include <system_error>

#include <nlohmann/json.hpp>

#include "glassbox/base/files.h"
#include "glassbox/report/html.h"
#include "glassbox/report/report_internal.h"

namespace glassbox::report::detail {
namespace {

constexpr std::size_t kMaxPerGroup = 24;  // images per group; the rest are counted

// An <img> of explain/<name> as a data: URI, or a placeholder when the file is missing or is
// neither PNG nor JPEG. A name that leaves explain/ is a malformed index.
std::string image(const JsonView& field, const fs::path& explain_dir, std::string_view what, std::int64_t sample) {
  const auto name = field.string();
  if (!name) return "";
  const fs::path rel(*name);
  if (rel.empty() || rel.is_absolute()) field.fail("must be a file name relative to explain/, got \"" + *name + "\"");
  for (const auto& part : rel) {
    if (part == "..") field.fail("must stay inside explain/, got \"" + *name + "\"");
  }
  const fs::path path = explain_dir / rel;
  std::error_code ec;
  auto placeholder = [&](std::string_view why) {
    return "<div class=\"note\" style=\"width:110px\">" + escape(std::string(why) + ": " + *name) + "</div>";
  };
  if (!fs::is_regular_file(path, ec)) return placeholder("missing");
  const std::string bytes = read_file(path);
  std::string mime;
  if (bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0)
    mime = "image/png";
  else if (bytes.rfind("\xFF\xD8\xFF", 0) == 0)
    mime = "image/jpeg";
  else
    return placeholder("not a PNG");
  const std::string alt = std::string(what) + " of sample " + std::to_string(sample);
  return "<img src=\"" + data_uri(mime, bytes) + "\" alt=\"" + escape(alt) + "\" title=\"" + escape(alt) + "\">";
}

std::string item_html(const JsonView& it, const fs::path& explain_dir, bool correct) {
  const std::int64_t index = it["index"].integer().value_or(-1);
  const auto label = it["label"].integer(), predicted = it["predicted"].integer(),
             target = it["target_class"].integer();
  const std::string label_name = it["label_name"].text().value_or(label ? "class " + std::to_string(*label) : "?");
  const std::string pred_name =
      it["predicted_name"].text().value_or(predicted ? "class " + std::to_string(*predicted) : "?");
  std::string out = "<div class=\"item\"><div class=\"imgs\">" +
                    image(it["overlay"], explain_dir, "Grad-CAM overlay", index) +
                    image(it["heatmap"], explain_dir, "Grad-CAM heat map", index) + "</div>\n";
  out += "<div>sample " + std::to_string(index) + " · " +
         (correct ? "<span class=\"ok\">correct</span>" : "<span class=\"bad\">wrong</span>") + "</div>";
  out += "<div>label: " + escape(label_name) + "</div>";
  out += "<div>predicted: " + escape(pred_name);
  if (auto p = it["probability"].number()) out += " (p " + format_fixed(*p, 3) + ")";
  out += "</div>";
  if (target && predicted && *target != *predicted) out += "<div>map for class " + std::to_string(*target) + "</div>";
  return out + "</div>\n";
}

// Feature attributions of a model on features (explain/index.json with "kind": "features"): the
// mean |attribution| per feature as horizontal bars, then each explained sample's top features.
std::string features_section(const JsonView& doc) {
  const JsonView bars = doc["importance"];
  double top = 0;
  for (std::size_t i = 0; i < bars.size(); ++i) top = std::max(top, bars[i]["value"].number().value_or(0.0));
  std::string intro = "<p class=\"foot\">";
  if (auto m = doc["method"].text()) intro += escape(*m);
  intro += " · " + format_count(static_cast<std::int64_t>(doc["items"].size())) + " samples</p>\n";
  if (auto n = doc["note"].text()) intro += note(*n);
  std::string body = "<table class=\"bars\" data-chart=\"feature-importance\">\n";
  for (std::size_t i = 0; i < bars.size() && i < 30; ++i) {
    const double v = bars[i]["value"].number().value_or(0.0);
    const double w = top > 0 ? 100.0 * v / top : 0.0;
    body += "<tr><td>" + escape(bars[i]["name"].text().value_or("?")) +
            "</td><td style=\"width:60%\"><div style=\"background:#4a7bd0;height:0.9em;width:" + format_fixed(w, 1) +
            "%\"></div></td><td>" + format_fixed(v, 4) + "</td></tr>\n";
  }
  body += "</table>\n";
  if (bars.size() > 30) body += note("Showing the 30 largest of " + std::to_string(bars.size()) + " features.");
  const JsonView items = doc["items"];
  std::string rows;
  for (std::size_t i = 0; i < items.size() && i < kMaxPerGroup; ++i) {
    const JsonView it = items[i];
    std::string feats;
    const JsonView tf = it["top_features"];
    for (std::size_t q = 0; q < tf.size(); ++q)
      feats += (q ? ", " : "") + escape(tf[q]["feature"].text().value_or("?")) + " " +
               format_fixed(tf[q]["attribution"].number().value_or(0.0), 3);
    rows += "<tr><td>" + std::to_string(it["index"].integer().value_or(0)) + "</td><td>" +
            escape(it["label_name"].text().value_or("")) + "</td><td>" +
            escape(it["predicted_name"].text().value_or("")) + "</td><td>" + feats + "</td></tr>\n";
  }
  body +=
      "<h3>Samples</h3>\n<table><tr><th>sample</th><th>label</th><th>predicted</th><th>strongest features "
      "(signed attribution)</th></tr>\n" +
      rows + "</table>\n";
  return section("gradcam", "Feature attributions", intro + body);
}

}  // namespace

std::string gradcam_section(const Artefact& index, const fs::path& run_dir) {
  if (!index.json) {
    return section(
        "gradcam", "Explanations",
        note_html("No explanations yet (no explain/index.json). Run <code>glassbox explain --checkpoint " +
                  escape((run_dir / "checkpoints/last.ckpt").string()) +
                  " --misclassified 8 --correct 8</code> to make them (Grad-CAM for images, attributions per "
                  "feature otherwise)."));
  }
  const JsonView doc = index.view();
  if (doc["kind"].text().value_or("") == "features") return features_section(doc);
  const JsonView items = doc["items"];
  const fs::path explain_dir = run_dir / "explain";
  std::string groups[2];  // 0: correct, 1: wrong
  std::size_t counts[2] = {0, 0};
  for (std::size_t i = 0; i < items.size(); ++i) {
    const JsonView it = items[i];
    if (!it.is_object()) it.fail("must be an object");
    bool correct = false;
    if (auto c = it["correct"].boolean())
      correct = *c;
    else
      correct = it["label"].integer() == it["predicted"].integer() && it["label"].present();
    const int g = correct ? 0 : 1;
    if (++counts[g] <= kMaxPerGroup) groups[g] += item_html(it, explain_dir, correct);
  }
  std::string intro = "<p class=\"foot\">";
  if (auto m = doc["method"].text()) intro += escape(*m);
  if (auto l = doc["layer"].text()) intro += " at layer <code>" + escape(*l) + "</code>";
  intro += " · " + format_count(static_cast<std::int64_t>(items.size())) +
           " samples; each shows the overlay and the heat map (red: the regions that raised the explained class's "
           "score).</p>\n";
  if (auto n = doc["note"].text()) intro += note(*n);
  if (items.size() == 0) return section("gradcam", "Grad-CAM", intro + note("explain/index.json lists no samples."));
  std::string body;
  const char* titles[2] = {"Correct predictions", "Wrong predictions"};
  for (int g = 0; g < 2; ++g) {
    body += "<h3>" + std::string(titles[g]) + " (" + format_count(static_cast<std::int64_t>(counts[g])) + ")</h3>\n";
    if (counts[g] == 0) {
      body += note("None among the explained samples.");
      continue;
    }
    body += "<div class=\"gallery\">\n" + groups[g] + "</div>\n";
    if (counts[g] > kMaxPerGroup) body += note("Showing the first " + std::to_string(kMaxPerGroup) + ".");
  }
  return section("gradcam", "Grad-CAM", intro + "<div data-chart=\"gradcam\">\n" + body + "</div>\n");
}

std::string doctor_section(const Artefact& doctor) {
  if (!doctor.json) {
    return section(
        "doctor", "Doctor",
        note_html(
            "No findings (no doctor.json). Run <code>glassbox doctor CONFIG --json &gt; RUN_DIR/doctor.json</code> "
            "to examine the setup."));
  }
  const JsonView findings = doctor.view()["findings"];
  if (findings.size() == 0)
    return section("doctor", "Doctor", note("No findings: the doctor found nothing to report."));
  std::map<std::string, int> by_severity;
  std::string rows;
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const JsonView f = findings[i];
    if (!f.is_object()) f.fail("must be an object");
    const std::string severity = f["severity"].text().value_or("info");
    ++by_severity[severity];
    const std::string cls = severity == "error" || severity == "warning" || severity == "info" ? severity : "other";
    std::string where;
    for (const auto& [k, v] : f["where"].items()) {
      const auto s = v.raw()->is_string() ? v.raw()->get<std::string>() : v.raw()->dump();
      where += (where.empty() ? "" : "<br>") + escape(k) + ": <code>" + escape(s) + "</code>";
    }
    const auto conf = f["confidence"].number();
    // A symptom names the causes it is ranked under.
    std::string because;
    const JsonView causes = f["because_of"];
    for (std::size_t k = 0; k < causes.size(); ++k)
      because += (because.empty() ? "<br><small>because of " : ", ") + std::string("<code>") +
                 escape(causes[k].text().value_or("?")) + "</code>";
    if (!because.empty()) because += "</small>";
    rows += "<tr><td><span class=\"badge " + cls + "\">" + escape(severity) + "</span></td><td><code>" +
            escape(f["id"].text().value_or("?")) + "</code>" + because + "</td><td>" + where + "</td><td>" +
            escape(f["evidence"].text().value_or("")) + "</td><td>" + escape(f["fix"].text().value_or("")) + "</td>" +
            "<td class=\"num\">" + (conf ? format_percent(*conf, 0) : kDash) + "</td></tr>\n";
  }
  std::string counts;
  for (const auto& [sev, n] : by_severity)
    counts +=
        (counts.empty() ? "" : ", ") + std::to_string(n) + " " + escape(sev) + (n != 1 && sev != "info" ? "s" : "");
  return section(
      "doctor", "Doctor",
      "<p>" + counts + " (from " + escape(doctor.source.file) +
          ", most important first).</p>\n"
          "<table class=\"tbl\">\n<tr><th>severity</th><th>id</th><th>where</th><th>evidence</th><th>fix</th>"
          "<th class=\"num\">confidence</th></tr>\n" +
          rows + "</table>\n");
}

}  // namespace glassbox::report::detail
