// The glass-box report: one self-contained HTML page about a run directory.
//
//   std::string html = glassbox::report::build_report("runs/quickstart");
//   fs::path out = glassbox::report::write_report("runs/quickstart");   // runs/quickstart/report.html
//
// Sections (stable ids): #summary (summary.json), #config (config.toml), #training
// (metrics.jsonl: charts "loss", "accuracy", "lr", "grad_norm"), #evaluation (eval/metrics.json:
// baseline, per-class table, averages, top-k, ECE, charts "confusion", "reliability", "pr",
// balanced class weights), #gradcam (explain/index.json: chart "gradcam", the overlays as data:
// URIs), #doctor (doctor.json findings), #fairness (eval/metrics.json "fairness"). Each chart is
// an element with data-chart="NAME" holding inline SVG (or, for the gallery, images).
//
// Every artefact is optional: an absent one becomes a note saying how to produce it. A present
// but malformed one (bad JSON, a value of the wrong type) throws glassbox::Error (DataLoss) whose
// one-line message names the file and the problem; nothing is written then, so an earlier
// report.html stays as it was. The page loads nothing from the network and runs no script.
// Thread safety: reentrant; reads the run directory, writes only `out`.
#pragma once

#include <filesystem>
#include <string>

namespace glassbox::report {

namespace fs = std::filesystem;

// The HTML of the report of `run_dir`. Throws NotFound when `run_dir` is not a directory or has
// none of summary.json, metrics.jsonl and config.toml.
std::string build_report(const fs::path& run_dir);

// build_report written atomically to `out` (empty: run_dir/report.html). Returns the path written.
fs::path write_report(const fs::path& run_dir, const fs::path& out = {});

}  // namespace glassbox::report
