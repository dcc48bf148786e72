// The #fairness section: the "fairness" object of eval/metrics.json.
#include <cmath>
#include <set>

#include "glassbox/report/html.h"
#include "glassbox/report/report_internal.h"

namespace glassbox::report::detail {
namespace {

// A two-column table of an object's numeric members; flagged metrics in red.
std::string metric_table(const JsonView& obj, const std::set<std::string>& flagged, std::string_view title) {
  if (!obj.present()) return "";
  std::string rows;
  for (const auto& [key, v] : obj.items()) {
    const bool flag = flagged.count(key) > 0;
    rows += "<tr><th>" + escape(key) + "</th>" + num_cell(v.number()) + "<td>" +
            (flag ? "<span class=\"flag\">flagged</span>" : "") + "</td></tr>\n";
  }
  return "<h3>" + escape(title) +
         "</h3>\n<table class=\"tbl\">\n<tr><th>metric</th><th class=\"num\">value</th><th></th></tr>\n" + rows +
         "</table>\n";
}

}  // namespace

std::string fairness_section(const Artefact& eval, const ClassNames& names) {
  const JsonView f = eval.view()["fairness"];
  if (!f.present()) {
    return section(
        "fairness", "Fairness",
        note(eval.json ? "eval/metrics.json has no fairness analysis (it needs a sensitive attribute per sample)."
                       : "No evaluation yet, so no fairness analysis."));
  }
  if (!f.is_object()) f.fail("must be an object");
  std::string body, facts;
  if (auto a = f["attribute"].text()) facts += "attribute <b>" + escape(*a) + "</b>";
  if (auto c = f["positive_class"].integer())
    facts += (facts.empty() ? "" : " · ") + std::string("positive class ") + escape(names(*c));
  if (auto p = f["privileged"].text())
    facts += (facts.empty() ? "" : " · ") + std::string("privileged group ") + escape(*p);
  if (auto t = f["threshold"].number())
    facts += (facts.empty() ? "" : " · ") + std::string("flag threshold ") + format_number(*t);
  if (!facts.empty()) body += "<p>" + facts + "</p>\n";

  std::set<std::string> flagged;
  const JsonView flags = f["flags"];
  std::string flag_list;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const JsonView fl = flags[i];
    const std::string metric = fl["metric"].text().value_or("?");
    flagged.insert(metric);
    std::string line = "<li><span class=\"flag\">" + escape(metric) + "</span>";
    if (auto v = fl["value"].number()) line += " = " + format_number(*v);
    if (auto t = fl["threshold"].number()) line += " (threshold " + format_number(*t) + ")";
    if (auto msg = fl["message"].text()) line += ": " + escape(*msg);
    flag_list += line + "</li>\n";
  }
  body += flag_list.empty() ? note("No fairness metric crosses its threshold.")
                            : "<div class=\"warn\"><b>Flags</b><ul>\n" + flag_list + "</ul></div>\n";

  const JsonView groups = f["groups"];
  if (groups.size() > 0) {
    std::string rows;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const JsonView g = groups[i];
      const auto support = g["support"].integer();
      rows += "<tr><td>" + escape(g["group"].text().value_or("?")) + "</td><td class=\"num\">" +
              (support ? format_count(*support) : kDash) + "</td>" + num_cell(g["selection_rate"].number()) +
              num_cell(g["tpr"].number()) + num_cell(g["fpr"].number()) + num_cell(g["accuracy"].number()) + "</tr>\n";
    }
    body +=
        "<h3>Per group</h3>\n<table class=\"tbl\">\n<tr><th>group</th><th class=\"num\">support</th><th "
        "class=\"num\">selection rate</th><th class=\"num\">TPR</th><th class=\"num\">FPR</th><th "
        "class=\"num\">accuracy</th></tr>\n" +
        rows + "</table>\n";
  }
  body += metric_table(f["differences"], flagged, "Differences between groups");
  body += metric_table(f["ratios"], flagged, "Ratios between groups");
  body += metric_table(f["aif360"], flagged, "AIF360 conventions (unprivileged against privileged)");
  return section("fairness", "Fairness", body);
}

}  // namespace glassbox::report::detail
