#include "glassbox/report/report.h"

#include <system_error>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/version.h"
#include "glassbox/report/html.h"
#include "glassbox/report/report_internal.h"

namespace glassbox::report {

namespace detail {

Artefact read_artefact(const fs::path& run_dir, const std::string& relative, const std::string& hint) {
  Artefact a;
  const fs::path path = run_dir / relative;
  a.source = {path.string(), hint};
  std::error_code ec;
  if (!fs::exists(path, ec)) return a;
  const std::string text = read_file(path);
  try {
    a.json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    if (const auto p = what.find("] "); what.rfind("[json.exception", 0) == 0 && p != std::string::npos)
      what.erase(0, p + 2);
    throw Error(ErrorCode::kDataLoss, a.source.file + ": bad JSON: " + what, hint);
  }
  if (!a.json->is_object()) a.view().fail("must be a JSON object");
  return a;
}

std::string ClassNames::operator()(std::int64_t k) const {
  if (k >= 0 && static_cast<std::size_t>(k) < names.size() && !names[static_cast<std::size_t>(k)].empty()) {
    return names[static_cast<std::size_t>(k)];
  }
  return "class " + std::to_string(k);
}

std::string section(std::string_view id, std::string_view title, std::string_view body) {
  return "<section id=\"" + std::string(id) + "\">\n<h2>" + escape(title) + "</h2>\n" + std::string(body) +
         "</section>\n";
}

std::string figure(std::string_view chart, std::string_view content, std::string_view caption_html) {
  std::string out = "<figure class=\"chart\" data-chart=\"" + escape(chart) + "\">\n" + std::string(content);
  if (!caption_html.empty()) out += "\n<figcaption>" + std::string(caption_html) + "</figcaption>";
  return out + "\n</figure>\n";
}

std::string num_cell(const std::optional<double>& v, int significant) {
  return "<td class=\"num\">" + (v ? format_number(*v, significant) : std::string(kDash)) + "</td>";
}

}  // namespace detail

namespace {

using namespace detail;

std::string row(std::string_view key, const std::string& value_html) {
  return "<tr><th>" + escape(key) + "</th><td>" + value_html + "</td></tr>\n";
}

std::string summary_section(const Artefact& summary, const fs::path& run_dir, const std::string& name) {
  if (!summary.json) {
    return section("summary", "Run " + name,
                   note("No summary.json in " + run_dir.string() +
                        ": the run has not finished (or was interrupted). The sections below show what it wrote."));
  }
  const JsonView s = summary.view();
  std::string rows = row("run", escape(name) + " <span class=\"foot\">(" + escape(run_dir.string()) + ")</span>");
  auto text_row = [&](std::string_view label, const char* key) {
    if (auto v = s[key].text()) rows += row(label, escape(*v));
  };
  text_row("model", "model");
  if (auto p = s["parameters"].integer()) {
    std::string v = format_count(*p);
    if (auto t = s["trainable_parameters"].integer(); t && *t != *p) v += " (" + format_count(*t) + " trainable)";
    rows += row("parameters", v);
  }
  text_row("device", "device");
  text_row("precision", "precision");
  if (auto t = s["threads"].integer()) rows += row("CPU threads", std::to_string(*t));
  std::string versions;
  if (auto v = s["glassbox_version"].text()) versions = "glassbox " + escape(*v);
  if (auto v = s["torch_version"].text())
    versions += (versions.empty() ? "" : ", ") + std::string("LibTorch ") + escape(*v);
  if (!versions.empty()) rows += row("versions", versions);
  if (auto f = s["fit_seconds"].number()) {
    std::string v = format_duration(*f) + " (fit)";
    if (auto w = s["wall_seconds"].number()) v += ", " + format_duration(*w) + " in all";
    rows += row("wall time", v);
  }
  if (auto t = s["train_samples_per_second"].number())
    rows += row("throughput", format_count(std::llround(*t)) + " samples/s (training)");
  if (auto e = s["epochs"].integer()) {
    std::string v = std::to_string(*e) + " epochs";
    if (auto g = s["global_step"].integer()) v += ", " + format_count(*g) + " steps";
    if (auto k = s["skipped_steps"].integer(); k && *k > 0) v += ", " + format_count(*k) + " skipped (non-finite)";
    rows += row("length", v);
  }
  text_row("stop reason", "stop_reason");
  if (auto k = s["skipped_files"]["count"].integer(); k && *k > 0) {
    std::string v = format_count(*k) + " image file(s) that do not decode were left out (data.on_bad_image = skip)";
    const JsonView first = s["skipped_files"]["first"];
    if (first.is_array() && first.size() > 0)
      if (auto f = first[std::size_t{0}].text()) v += "; first: <code>" + escape(*f) + "</code>";
    rows += row("skipped files", v);
  }
  if (auto b = s["best_checkpoint"].text()) {
    std::string v = "<code>" + escape(*b) + "</code>";
    if (auto sc = s["best_score"].number()) v += " (score " + format_number(*sc) + ")";
    rows += row("best checkpoint", v);
  }
  if (auto l = s["last_checkpoint"].text()) rows += row("last checkpoint", "<code>" + escape(*l) + "</code>");
  const JsonView test = s["test"];
  if (auto acc = test["accuracy"].number()) {
    std::string v = format_percent(*acc);
    if (auto loss = test["loss"].number()) v += ", loss " + format_number(*loss);
    if (auto n = test["samples"].integer()) v += " on " + format_count(*n) + " samples";
    if (auto w = s["tested_with"].text()) v += " <span class=\"foot\">(" + escape(*w) + ")</span>";
    rows += row("test", v);
  }
  return section("summary", "Run " + name, "<table class=\"tbl kv\">\n" + rows + "</table>\n");
}

std::string config_section(const fs::path& run_dir) {
  const fs::path path = run_dir / "config.toml";
  std::error_code ec;
  if (!fs::exists(path, ec)) return section("config", "Configuration", note("No config.toml in the run directory."));
  return section("config", "Configuration",
                 "<p class=\"foot\">The effective configuration (" + escape(path.string()) +
                     ", after --set overrides).</p>\n<pre class=\"config\">" + escape(read_file(path)) + "</pre>\n");
}

// Runs on image files: what the training pipeline does to a few of them (augmentation.png).
std::string augmentation_section(const fs::path& run_dir) {
  const fs::path path = run_dir / "augmentation.png";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return {};
  const std::string bytes = read_file(path);
  if (bytes.rfind("\x89PNG\r\n\x1a\n", 0) != 0)
    return section("augmentation", "Augmentation", note("augmentation.png is not a PNG."));
  return section("augmentation", "Augmentation",
                 "<p class=\"foot\">Each row is one training image: first as the eval pipeline shows it, then draws "
                 "of the training pipeline (those of epochs 0, 1, ..., a final Normalize left out).</p>\n<img src=\"" +
                     data_uri("image/png", bytes) + "\" alt=\"augmentation preview\" style=\"max-width:100%\">\n");
}

std::string run_name(const fs::path& run_dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(run_dir, ec), ec);
  if (ec || p.empty()) p = run_dir;
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace

std::string build_report(const fs::path& run_dir) {
  std::error_code ec;
  GB_CHECK(fs::is_directory(run_dir, ec), NotFound, "no run directory at " << run_dir.string(),
           "pass the directory that glassbox train wrote, e.g. runs/quickstart");
  GB_CHECK(fs::exists(run_dir / "summary.json", ec) || fs::exists(run_dir / "metrics.jsonl", ec) ||
               fs::exists(run_dir / "config.toml", ec),
           NotFound,
           run_dir.string() << " is not a run directory: it has no summary.json, metrics.jsonl or config.toml",
           "pass the directory that glassbox train wrote, e.g. runs/quickstart");
  const std::string name = run_name(run_dir);
  const Artefact summary =
      read_artefact(run_dir, "summary.json", "it is written by glassbox train; rerun the run or delete the file");
  const Artefact eval =
      read_artefact(run_dir, "eval/metrics.json",
                    "rewrite it with glassbox eval --checkpoint " + (run_dir / "checkpoints/last.ckpt").string());
  const Artefact explain = read_artefact(run_dir, "explain/index.json", "rewrite it with glassbox explain");
  const Artefact doctor =
      read_artefact(run_dir, "doctor.json", "rewrite it with glassbox doctor CONFIG --json > doctor.json");

  ClassNames names;
  for (const JsonView& list : {eval.view()["class_names"], summary.view()["class_names"]}) {
    if (!names.names.empty()) break;
    for (std::size_t i = 0; i < list.size(); ++i) names.names.push_back(list[i].text().value_or(""));
  }

  std::string main;
  main += summary_section(summary, run_dir, name);
  main += config_section(run_dir);
  const std::string augmentation = augmentation_section(run_dir);
  main += augmentation;
  main += training_section(run_dir);
  main += evaluation_section(eval, names, run_dir);
  main += gradcam_section(explain, run_dir);
  main += doctor_section(doctor);
  main += fairness_section(eval, names);
  main += "<footer>Generated by glassbox " + std::string(kGlassboxVersion) + " from " + escape(run_dir.string()) +
          ". Self-contained: no scripts, no network.</footer>\n";

  std::string sub;
  const JsonView s = summary.view();
  if (auto m = s["model"].text()) sub += "model " + escape(*m);
  if (auto p = s["parameters"].integer()) sub += (sub.empty() ? "" : " · ") + format_count(*p) + " parameters";
  if (auto d = s["device"].text()) sub += (sub.empty() ? "" : " · ") + escape(*d);
  if (auto a = s["test"]["accuracy"].number())
    sub += (sub.empty() ? "" : " · ") + std::string("test accuracy ") + format_percent(*a);
  std::string top = "<header class=\"top\"><h1>glass-box report · " + escape(name) + "</h1>";
  if (!sub.empty()) top += "<p>" + sub + "</p>";
  top += "</header>\n<nav>";
  for (const auto& [id, label] :
       std::initializer_list<std::pair<const char*, const char*>>{{"summary", "Summary"},
                                                                  {"config", "Config"},
                                                                  {"augmentation", "Augmentation"},
                                                                  {"training", "Training"},
                                                                  {"evaluation", "Evaluation"},
                                                                  {"gradcam", "Grad-CAM"},
                                                                  {"doctor", "Doctor"},
                                                                  {"fairness", "Fairness"}}) {
    if (std::string_view(id) == "augmentation" && augmentation.empty()) continue;
    top += "<a href=\"#" + std::string(id) + "\">" + label + "</a>";
  }
  top += "</nav>";
  return page("glassbox report: " + name, top, main);
}

fs::path write_report(const fs::path& run_dir, const fs::path& out) {
  fs::path target = out.empty() ? run_dir / "report.html" : out;
  const std::string html = build_report(run_dir);  // everything is read and checked before the write
  write_file_atomic(target, html);
  return target;
}

}  // namespace glassbox::report
