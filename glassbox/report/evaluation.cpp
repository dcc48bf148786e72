// The #evaluation section: eval/metrics.json as tables and charts.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "glassbox/report/html.h"
#include "glassbox/report/report_internal.h"
#include "glassbox/report/svg.h"

namespace glassbox::report::detail {
namespace {

std::string kv(std::string_view key, const std::string& value_html) {
  return "<tr><th>" + escape(key) + "</th><td>" + value_html + "</td></tr>\n";
}

std::string warn(const std::string& html) { return "<div class=\"warn\">" + html + "</div>\n"; }

std::string overview(const JsonView& m, const ClassNames& names) {
  std::string rows, warnings;
  if (auto s = m["split"].text()) rows += kv("split", escape(*s));
  if (auto c = m["checkpoint"].text()) rows += kv("checkpoint", "<code>" + escape(*c) + "</code>");
  if (auto n = m["num_samples"].integer()) rows += kv("samples", format_count(*n));
  if (auto k = m["num_classes"].integer()) rows += kv("classes", format_count(*k));
  const auto acc = m["accuracy"].number();
  if (acc) rows += kv("accuracy", "<b>" + format_percent(*acc) + "</b>");
  if (auto b = m["balanced_accuracy"].number()) rows += kv("balanced accuracy (mean recall)", format_percent(*b));
  const JsonView base = m["majority_baseline"];
  if (auto b = base["accuracy"].number()) {
    std::string v = format_percent(*b);
    const auto cls = base["class"].integer();
    const std::string name = base["name"].text().value_or(cls ? names(*cls) : "");
    if (!name.empty()) v += " (always predicting " + escape(name) + ")";
    rows += kv("majority-class baseline", v);
    if (acc) {
      rows += kv("accuracy − baseline", format_fixed((*acc - *b) * 100, 2) + " percentage points");
      if (*acc <= *b + 0.01) {
        warnings += warn(
            "The accuracy is not above the majority-class baseline: the model has learned little beyond "
            "the class frequencies.");
      }
    }
  }
  const JsonView topk = m["top_k_accuracy"];
  if (topk.present()) {
    std::vector<std::pair<long, std::string>> ks;
    for (const auto& [k, v] : topk.items()) {
      const auto val = v.number();
      ks.emplace_back(std::strtol(k.c_str(), nullptr, 10),
                      "top-" + escape(k) + " " + (val ? format_percent(*val) : kDash));
    }
    std::sort(ks.begin(), ks.end());
    std::string v;
    for (const auto& [k, s] : ks) v += (v.empty() ? "" : " · ") + s;
    rows += kv("top-k accuracy", v);
  }
  if (auto e = m["calibration"]["ece"].number()) {
    std::string v = format_number(*e);
    if (auto b = m["calibration"]["bins"].integer()) v += " (" + std::to_string(*b) + " equal-width confidence bins)";
    rows += kv("expected calibration error", v);
  }
  if (auto e = m["calibration"]["mce"].number()) rows += kv("maximum calibration error", format_number(*e));
  if (m["average_precision_macro"].present() || m["roc_auc_ovr_macro"].present()) {
    const auto ap = m["average_precision_macro"].number();
    const auto auc = m["roc_auc_ovr_macro"].number();
    rows += kv("average precision (macro)", ap ? format_number(*ap) : kDash);
    rows += kv("ROC AUC (one-vs-rest, macro)", auc ? format_number(*auc) : std::string(kDash) + " (undefined)");
  }
  const JsonView imb = m["imbalance"];
  if (auto r = imb["max_to_min_ratio"].number())
    rows += kv("class imbalance (largest / smallest)", format_number(*r, 3));
  if (auto w = imb["warning"].string()) warnings += warn("<b>Class imbalance:</b> " + escape(*w));
  const JsonView notes = m["notes"];
  for (std::size_t i = 0; i < notes.size(); ++i) {
    if (auto n = notes[i].text()) warnings += note(*n);
  }
  return warnings + "<table class=\"tbl kv\">\n" + rows + "</table>\n";
}

std::string per_class_table(const JsonView& m, const ClassNames& names) {
  const JsonView pc = m["per_class"];
  if (pc.size() == 0) return "";
  // Which (metric, class) pairs the file declares undefined.
  std::map<std::string, std::set<std::int64_t>> undefined;
  for (const auto& [metric, list] : m["undefined"].items()) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (auto k = list[i].integer()) undefined[metric].insert(*k);
    }
  }
  bool any_dash = false;
  auto cell = [&](const JsonView& row, const char* key, std::int64_t cls, const char* undefined_key) {
    const auto v = row[key].number();
    if (!v || !std::isfinite(*v) || undefined[undefined_key].count(cls)) {
      any_dash = true;
      return std::string("<td class=\"num\" title=\"undefined\">") + kDash + "<sup>*</sup></td>";
    }
    return num_cell(v);
  };
  std::string rows;
  for (std::size_t i = 0; i < pc.size(); ++i) {
    const JsonView r = pc[i];
    const std::int64_t cls = r["class"].integer().value_or(static_cast<std::int64_t>(i));
    const std::string name = r["name"].text().value_or(names(cls));
    rows += "<tr><td class=\"num\">" + std::to_string(cls) + "</td><td>" + escape(name) + "</td>";
    rows += cell(r, "precision", cls, "precision") + cell(r, "recall", cls, "recall") + cell(r, "f1", cls, "f1");
    const auto support = r["support"].integer(), predicted = r["predicted"].integer();
    rows += "<td class=\"num\">" + (support ? format_count(*support) : kDash) + "</td>";
    rows += "<td class=\"num\">" + (predicted ? format_count(*predicted) : kDash) + "</td>";
    rows += cell(r, "average_precision", cls, "average_precision") + cell(r, "roc_auc", cls, "roc_auc") + "</tr>\n";
  }
  std::string out =
      "<h3>Per class</h3>\n<table class=\"tbl\">\n<tr><th class=\"num\">class</th><th>name</th><th "
      "class=\"num\">precision</th>"
      "<th class=\"num\">recall</th><th class=\"num\">F1</th><th class=\"num\">support</th><th "
      "class=\"num\">predicted</th>"
      "<th class=\"num\">AP</th><th class=\"num\">ROC AUC</th></tr>\n" +
      rows + "</table>\n";
  if (any_dash) {
    std::string listed;
    for (const auto& [metric, classes] : undefined) {
      if (classes.empty()) continue;
      std::string ks;
      for (std::int64_t k : classes) ks += (ks.empty() ? "" : ", ") + escape(names(k));
      listed += " " + escape(metric) + ": " + ks + ".";
    }
    out +=
        "<p class=\"foot\"><sup>*</sup> " + std::string(kDash) +
        " undefined: precision of a class that is never predicted, recall of a class without samples, ROC AUC and AP "
        "of a class without positives (or without negatives) in this split." +
        listed + "</p>\n";
  }
  return out;
}

std::string averages_table(const JsonView& m) {
  const JsonView av = m["averages"];
  if (!av.present()) return "";
  // micro, macro, weighted first (the file's object keys come sorted), then any others.
  auto items = av.items();
  auto rank = [](const std::string& k) { return k == "micro" ? 0 : k == "macro" ? 1 : k == "weighted" ? 2 : 3; };
  std::stable_sort(items.begin(), items.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  std::string rows;
  for (const auto& [kind, a] : items) {
    rows += "<tr><th>" + escape(kind) + "</th>" + num_cell(a["precision"].number()) + num_cell(a["recall"].number()) +
            num_cell(a["f1"].number()) + "</tr>\n";
  }
  return "<h3>Averages</h3>\n<table class=\"tbl\">\n<tr><th>average</th><th class=\"num\">precision</th><th "
         "class=\"num\">recall</th><th class=\"num\">F1</th></tr>\n" +
         rows + "</table>\n";
}

std::string confusion(const JsonView& m, const ClassNames& names) {
  const JsonView cm = m["confusion_matrix"];
  const std::size_t k = cm.size();
  if (k == 0) return "";
  HeatMap h;
  h.title = "confusion matrix";
  h.x_label = "predicted";
  h.y_label = "true";
  h.shade_low = "0 %";
  h.shade_high = "100 % of row";
  for (std::size_t r = 0; r < k; ++r) {
    const JsonView row = cm[r];
    if (row.size() != k)
      row.fail("must have " + std::to_string(k) + " entries (a square matrix), got " + std::to_string(row.size()));
    std::vector<double> values;
    double sum = 0;
    for (std::size_t c = 0; c < k; ++c) {
      const double v = row[c].number().value_or(0.0);
      values.push_back(v);
      sum += v;
    }
    std::vector<double> shade;
    shade.reserve(values.size());
    for (double v : values) shade.push_back(sum > 0 ? v / sum : 0.0);
    h.values.push_back(std::move(values));
    h.shade.push_back(std::move(shade));
    h.row_labels.push_back(names(static_cast<std::int64_t>(r)));
  }
  h.col_labels = h.row_labels;
  return "<h3>Confusion matrix</h3>\n" +
         figure(
             "confusion", heat_map(h),
             "Rows are the true classes, columns the predictions; each cell holds a count, its colour the share of its "
             "row (the diagonal is each class's recall).");
}

std::string reliability(const JsonView& m) {
  const JsonView bins = m["calibration"]["reliability"];
  if (bins.size() == 0) return "";
  BinChart ch;
  ch.title = "reliability diagram";
  ch.x_label = "confidence (top-1 probability)";
  ch.y_label = "accuracy";
  ch.value_name = "accuracy";
  ch.reference_name = "gap to mean confidence";
  for (std::size_t i = 0; i < bins.size(); ++i) {
    const JsonView b = bins[i];
    BinChart::Bin bin;
    const auto lower = b["lower"].number(), upper = b["upper"].number();
    if (!lower || !upper) b.fail("must have numbers \"lower\" and \"upper\"");
    bin.lower = *lower;
    bin.upper = *upper;
    bin.count = b["count"].integer().value_or(0);
    bin.value = b["accuracy"].number();
    bin.reference = b["confidence"].number();
    ch.bins.push_back(bin);
  }
  std::string caption =
      "Each bar is the accuracy of the predictions whose confidence falls in the bin; the red band is "
      "its gap to the bin's mean confidence (below the diagonal: over-confident); n = predictions per bin.";
  if (auto e = m["calibration"]["ece"].number()) caption = "ECE " + format_number(*e) + ". " + caption;
  return "<h3>Calibration</h3>\n" + figure("reliability", bin_chart(ch), escape(caption));
}

std::string pr_curves(const JsonView& m, const ClassNames& names) {
  const JsonView curves = m["pr_curves"];
  if (curves.size() == 0) return "";
  std::map<std::int64_t, double> ap;
  const JsonView pc = m["per_class"];
  for (std::size_t i = 0; i < pc.size(); ++i) {
    const auto v = pc[i]["average_precision"].number();
    if (v) ap[pc[i]["class"].integer().value_or(static_cast<std::int64_t>(i))] = *v;
  }
  LineChart ch;
  ch.title = "precision-recall, one vs rest";
  ch.x_label = "recall";
  ch.y_label = "precision";
  ch.x_min = 0, ch.x_max = 1, ch.y_min = 0, ch.y_max = 1;
  ch.width = 760;
  ch.height = 400;
  for (std::size_t i = 0; i < curves.size(); ++i) {
    const JsonView c = curves[i];
    const std::int64_t cls = c["class"].integer().value_or(static_cast<std::int64_t>(i));
    const JsonView p = c["precision"], r = c["recall"];
    if (p.size() != r.size()) {
      c.fail("has " + std::to_string(p.size()) + " precision and " + std::to_string(r.size()) +
             " recall values (must be equal)");
    }
    Series s;
    s.name = names(cls);
    if (auto it = ap.find(cls); it != ap.end()) s.name += " (AP " + format_fixed(it->second, 3) + ")";
    for (std::size_t j = 0; j < p.size(); ++j) {
      s.x.push_back(r[j].number().value_or(NAN));
      s.y.push_back(p[j].number().value_or(NAN));
    }
    ch.series.push_back(std::move(s));
  }
  return "<h3>Precision-recall curves</h3>\n" +
         figure(
             "pr", line_chart(ch),
             "One curve per class (that class against all others); the legend gives each class's average precision.");
}

std::string class_weights(const JsonView& m, const ClassNames& names) {
  const JsonView cw = m["class_weights_balanced"];
  const JsonView w = cw["weights"];
  if (w.size() == 0) return "";
  const std::string split = cw["split"].text().value_or("training");
  std::string out = "<h3>Balanced class weights</h3>\n<p class=\"foot\">Inverse-frequency weights from the " +
                    escape(split) +
                    " split (1 for every class when the classes are balanced); a weighted loss with them counters "
                    "imbalance.</p>\n";
  if (w.size() > 12) {  // many classes: a wrapping list rather than a table wider than the page
    std::string list;
    for (std::size_t i = 0; i < w.size(); ++i) {
      const auto v = w[i].number();
      list += (i ? " · " : "") + escape(names(static_cast<std::int64_t>(i))) + " " + (v ? format_number(*v, 3) : kDash);
    }
    return out + "<p>" + list + "</p>\n";
  }
  std::string head = "<tr><th>class</th>", row = "<tr><th>weight</th>";
  for (std::size_t i = 0; i < w.size(); ++i) {
    head += "<th class=\"num\">" + escape(names(static_cast<std::int64_t>(i))) + "</th>";
    row += num_cell(w[i].number(), 3);
  }
  return out + "<table class=\"tbl\">\n" + head + "</tr>\n" + row + "</tr>\n</table>\n";
}

// A regression or multi-label evaluation: the averages, then one row per target / label.
std::string values_body(const JsonView& m) {
  std::string rows;
  const bool regression = m["task"].text().value_or("") == "regression";
  if (auto t = m["task"].text()) rows += kv("task", escape(*t));
  if (auto s = m["split"].text()) rows += kv("split", escape(*s));
  if (auto c = m["checkpoint"].text()) rows += kv("checkpoint", "<code>" + escape(*c) + "</code>");
  if (auto n = m["num_samples"].integer()) rows += kv("samples", format_count(*n));
  const auto put = [&](const char* label, const JsonView& v) {
    if (auto x = v.number()) rows += kv(label, format_number(*x));
  };
  std::string table;
  if (regression) {
    put("MAE", m["mae"]);
    put("RMSE", m["rmse"]);
    put("R² (uniform average)", m["r2"]);
    put("explained variance", m["explained_variance"]);
    put("median absolute error", m["median_absolute_error"]);
    put("max error", m["max_error"]);
    table =
        "<table class=\"tbl\">\n<tr><th>target</th><th class=\"num\">MAE</th><th class=\"num\">RMSE</th>"
        "<th class=\"num\">R²</th><th class=\"num\">median AE</th></tr>\n";
    const JsonView per = m["per_output"];
    for (std::size_t i = 0; i < per.size(); ++i) {
      const JsonView r = per[i];
      table += "<tr><td>" + escape(r["name"].text().value_or(std::to_string(i))) + "</td>" +
               num_cell(r["mae"].number(), 4) + num_cell(r["rmse"].number(), 4) + num_cell(r["r2"].number(), 4) +
               num_cell(r["median_absolute_error"].number(), 4) + "</tr>\n";
    }
  } else {
    put("subset accuracy (every label right)", m["subset_accuracy"]);
    put("Hamming loss", m["hamming_loss"]);
    put("micro F1", m["micro"]["f1"]);
    put("macro F1", m["macro"]["f1"]);
    put("samples F1", m["samples"]["f1"]);
    put("macro average precision", m["average_precision"]["macro"]);
    put("macro ROC AUC", m["roc_auc"]["macro"]);
    table =
        "<table class=\"tbl\">\n<tr><th>label</th><th class=\"num\">precision</th><th class=\"num\">recall</th>"
        "<th class=\"num\">F1</th><th class=\"num\">support</th><th class=\"num\">AP</th>"
        "<th class=\"num\">ROC AUC</th></tr>\n";
    const JsonView per = m["per_label"];
    for (std::size_t i = 0; i < per.size(); ++i) {
      const JsonView r = per[i];
      table += "<tr><td>" + escape(r["label"].text().value_or(std::to_string(i))) + "</td>" +
               num_cell(r["precision"].number(), 4) + num_cell(r["recall"].number(), 4) +
               num_cell(r["f1"].number(), 4) + "<td class=\"num\">" + format_count(r["support"].integer().value_or(0)) +
               "</td>" + num_cell(r["average_precision"].number(), 4) + num_cell(r["roc_auc"].number(), 4) + "</tr>\n";
    }
  }
  return "<table class=\"tbl kv\">\n" + rows + "</table>\n" + table + "</table>\n";
}

}  // namespace

std::string evaluation_section(const Artefact& eval, const ClassNames& names, const fs::path& run_dir) {
  if (!eval.json) {
    return section(
        "evaluation", "Evaluation",
        note_html("No evaluation yet (no eval/metrics.json). Run <code>glassbox eval --checkpoint " +
                  escape((run_dir / "checkpoints/last.ckpt").string()) + "</code> and then this report again."));
  }
  const JsonView m = eval.view();
  std::string body = "<p class=\"foot\">From " + escape(eval.source.file) + ".</p>\n";
  if (m["task"].present()) return section("evaluation", "Evaluation", body + values_body(m));
  body += overview(m, names);
  body += per_class_table(m, names);
  body += averages_table(m);
  body += confusion(m, names);
  body += reliability(m);
  body += pr_curves(m, names);
  body += class_weights(m, names);
  return section("evaluation", "Evaluation", body);
}

}  // namespace glassbox::report::detail
