// A small synthetic run directory with every artefact the report reads, for the report's tests
// (report_test) and the browser check (tests/reference/report_browser.py, through the
// report_sample_run tool). Not part of the library: compiled only into those two targets.
//
//   glassbox::report::write_sample_run(dir);                        // everything
//   glassbox::report::write_sample_run(dir, {.eval = false});       // no eval/ (and no fairness)
//
// Contents: summary.json, config.toml (with characters that need escaping), metrics.jsonl
// (3 epochs of step rows, epoch-end rows with val_*, a test row, one null train_loss, an lr
// spanning four decades), eval/metrics.json (4 classes, one never predicted, fairness over two
// groups with a flag), explain/index.json with PNG overlays and heat maps, doctor.json.
// Deterministic: the same files every time. Thread safety: none needed.
#pragma once

#include <filesystem>

namespace glassbox::report {

struct SampleRunParts {
  bool eval = true;
  bool fairness = true;  // only with eval
  bool explain = true;
  bool doctor = true;
};

void write_sample_run(const std::filesystem::path& dir, const SampleRunParts& parts = {});

}  // namespace glassbox::report
