// The #fairness section: the "fairness" object of eval/metrics.json.
#include <set>
#include <utility>

#include "glassbox/report/html.h"
#include "glassbox/report/report_internal.h"

namespace glassbox::report::detail {
namespace {

// A table of an object's numeric members, flagged metrics marked; string members (such as
// "convention") become the line under the title.
std::string metric_table(const JsonView& obj, const std::set<std::string>& flagged, std::string_view title) {
  if (!obj.present()) return "";
  std::string rows, remarks;
  for (const auto& [key, v] : obj.items()) {
    if (v.raw()->is_string()) {
      remarks += (remarks.empty() ? "" : "; ") + escape(key) + ": " + escape(v.raw()->get<std::string>());
      continue;
    }
    const bool flag = flagged.count(key) > 0;
    rows += "<tr><th>" + escape(key) + "</th>" + num_cell(v.number()) + "<td>" +
            (flag ? "<span class=\"flag\">flagged</span>" : "") + "</td></tr>\n";
  }
  return "<h3>" + escape(title) + "</h3>\n" + (remarks.empty() ? "" : "<p class=\"foot\">" + remarks + "</p>\n") +
         "<table class=\"tbl\">\n<tr><th>metric</th><th class=\"num\">value</th><th></th></tr>\n" + rows + "</table>\n";
}

std::string count_cell(const JsonView& v) {
  const auto n = v.integer();
  return "<td class=\"num\">" + (n ? format_count(*n) : std::string(kDash)) + "</td>";
}

std::string groups_table(const JsonView& groups) {
  if (groups.size() == 0) return "";
  bool counts = false;  // positives / negatives per group, when the file has them
  for (std::size_t i = 0; i < groups.size(); ++i) counts = counts || groups[i]["positives"].present();
  std::string rows;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const JsonView g = groups[i];
    rows += "<tr><td>" + escape(g["group"].text().value_or("?")) + "</td>" + count_cell(g["support"]);
    if (counts) rows += count_cell(g["positives"]) + count_cell(g["negatives"]);
    rows += num_cell(g["selection_rate"].number()) + num_cell(g["tpr"].number()) + num_cell(g["fpr"].number()) +
            num_cell(g["accuracy"].number()) + "</tr>\n";
  }
  return "<h3>Per group</h3>\n<table class=\"tbl\">\n<tr><th>group</th><th class=\"num\">support</th>" +
         std::string(counts ? "<th class=\"num\">positives</th><th class=\"num\">negatives</th>" : "") +
         "<th class=\"num\">selection rate</th><th class=\"num\">TPR</th><th class=\"num\">FPR</th><th "
         "class=\"num\">accuracy</th></tr>\n" +
         rows + "</table>\n";
}

std::string class_name(const JsonView& audit, const ClassNames& names) {
  if (auto n = audit["positive_class_name"].text()) return *n;
  if (auto c = audit["positive_class"].integer()) return names(*c);
  return "";
}

// One row per positive class of a one-vs-rest audit over many classes.
std::string per_class_table(const JsonView& list, const ClassNames& names) {
  if (list.size() == 0) return "";
  const std::pair<const char*, const char*> cols[] = {
      {"differences", "demographic_parity"},  {"differences", "equal_opportunity"},
      {"differences", "equalized_odds"},      {"differences", "fpr"},
      {"ratios", "demographic_parity_ratio"}, {"ratios", "disparate_impact"}};
  std::string head = "<tr><th>positive class</th>", rows;
  for (const auto& [obj, key] : cols) head += "<th class=\"num\">" + escape(key) + "</th>";
  for (std::size_t i = 0; i < list.size(); ++i) {
    const JsonView a = list[i];
    rows += "<tr><td>" + escape(class_name(a, names)) + "</td>";
    for (const auto& [obj, key] : cols) rows += num_cell(a[obj][key].number());
    rows += "</tr>\n";
  }
  return "<h3>Every class against the rest</h3>\n<table class=\"tbl\">\n" + head + "</tr>\n" + rows + "</table>\n";
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
  auto fact = [&facts](const std::string& html) { facts += (facts.empty() ? "" : " · ") + html; };
  if (auto a = f["attribute"].text()) fact("attribute <b>" + escape(*a) + "</b>");
  if (const std::string c = class_name(f, names); !c.empty()) fact("positive class " + escape(c));
  if (auto p = f["privileged"].text()) fact("privileged group " + escape(*p));
  if (auto t = f["threshold"].number()) fact("flag threshold " + format_number(*t));
  if (!facts.empty()) body += "<p>" + facts + "</p>\n";

  std::set<std::string> flagged;
  const JsonView flags = f["flags"];
  std::string flag_list;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const JsonView fl = flags[i];
    const std::string metric = fl["metric"].text().value_or("?");
    flagged.insert(metric);
    std::string line = "<li><span class=\"flag\">" + escape(metric) + "</span>";
    if (const std::string c = class_name(fl, names); !c.empty()) line += " (class " + escape(c) + ")";
    if (auto v = fl["value"].number()) line += " = " + format_number(*v);
    if (auto t = fl["threshold"].number()) line += " (threshold " + format_number(*t) + ")";
    if (auto msg = fl["message"].text()) line += ": " + escape(*msg);
    flag_list += line + "</li>\n";
  }
  body += flag_list.empty() ? note("No fairness metric crosses its threshold.")
                            : "<div class=\"warn\"><b>Flags</b><ul>\n" + flag_list + "</ul></div>\n";
  const JsonView notes = f["notes"];
  for (std::size_t i = 0; i < notes.size(); ++i) {
    if (auto n = notes[i].text()) body += note(*n);
  }

  body += groups_table(f["groups"]);
  body += metric_table(f["differences"], flagged, "Differences between groups");
  body += metric_table(f["ratios"], flagged, "Ratios between groups");
  body += metric_table(f["aif360"], flagged, "AIF360 conventions (unprivileged against privileged)");
  body += per_class_table(f["per_class"], names);
  return section("fairness", "Fairness", body);
}

}  // namespace glassbox::report::detail
