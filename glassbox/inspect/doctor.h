// The doctor: examines a training setup and names what is wrong, where, and what to change.
//
//   RunConfig cfg = load_run_config("lab/label-offset/config.toml", {});
//   DoctorReport r = run_doctor(cfg, DoctorOptions{}, &std::cerr);
//   std::cout << r.to_json().dump(2);   // {"findings": [{"id": "label-offset", "severity": "error", ...}]}
//
// First the data — label range and distribution against the model's output width, input
// statistics as the model sees them, non-finite values, duplicates within and across splits,
// whether labels depend on the inputs at all (nearest-neighbour agreement) — and the setup
// (BatchNorm against batch sizes, what the head outputs); then a short instrumented run (probes,
// non-finite localisation, loss/accuracy/gradient/update histories, validation checks, data
// wait) of at most max_steps steps or max_seconds. Each finding comes from one rule, a small
// function over the gathered facts. Findings carry stable ids (docs/doctor.md), numeric
// evidence, the place and the fix. A cause found with the symptoms it explains (the cause graph
// in docs/doctor.md: a learning rate too high explains exploding gradients and dead units, ...)
// ranks above them, and they name it in `because_of`; no two findings give contradicting fixes.
// Otherwise they are ordered by severity, then confidence. The verdicts rest on measured
// evidence only, never on file or scenario names.
// Thread safety: one doctor per process at a time (it trains, which uses the global RNG).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/base/config.h"
#include "glassbox/train/datamodule.h"
#include "glassbox/train/run_config.h"
#include "glassbox/train/task.h"

namespace glassbox::inspect {

enum class Severity { kError, kWarning, kInfo };
constexpr NameTable<Severity, 3> enum_names(Severity) {
  return {{{Severity::kError, "error"}, {Severity::kWarning, "warning"}, {Severity::kInfo, "info"}}};
}
static_assert(is_complete_table(enum_names(Severity{})));

// One change a fix asks for, in a form two fixes can be compared by: the setting (or aspect of
// the setup) and the direction, e.g. {"optim.lr", "lower"}. Two actions contradict when they
// name the same setting with opposite directions (lower/raise, true/false, ...).
struct FixAction {
  std::string setting;    // "optim.lr", "optim.weight_decay", "model.capacity", "data.loader.shuffle", ...
  std::string direction;  // "lower" | "raise" | "true" | "false" | "remove" | ...
  bool operator==(const FixAction&) const = default;
};

struct Finding {
  std::string id;  // stable, e.g. "label-offset" (docs/doctor.md)
  Severity severity = Severity::kInfo;
  double confidence = 0.5;                          // 0..1: how sure the evidence makes the doctor
  nlohmann::json where = nlohmann::json::object();  // {"split", "samples", "layer", "step", "parameter", ...}
  std::string evidence;                             // numbers
  std::string fix;                                  // what to change
  std::vector<FixAction> actions;                   // what `fix` changes, for the consistency check
  std::vector<std::string> because_of;              // causes in the same report that explain this finding
  nlohmann::json to_json() const;
};

struct DoctorOptions {
  std::int64_t max_steps = 300;     // of the instrumented run
  double max_seconds = 40;          // of training time in the run
  std::int64_t probe_every = 10;    // steps between probes
  std::int64_t val_every = 50;      // steps between validation checks
  std::int64_t val_batches = 8;     // batches per validation check
  std::int64_t knn_queries = 1000;  // nearest-neighbour label check: queries against 2x as many references
  bool run = true;                  // false: data and setup checks only
};

struct DoctorReport {
  std::vector<Finding> findings;                      // most important first
  nlohmann::json context = nlohmann::json::object();  // what was examined: data sizes, steps run, seconds
  void sort();
  const Finding* find(const std::string& id) const;
  bool has_errors() const;
  nlohmann::json to_json() const;
  std::string to_text() const;  // for a terminal
};

// What `glassbox doctor CONFIG` does: builds data, model and task from the config (reading the
// data with label checks relaxed, so that bad labels are reported rather than fatal).
DoctorReport run_doctor(train::RunConfig config, const DoctorOptions& options, std::ostream* log = nullptr);

// For a setup built in C++ (any TaskModule and DataModule). `config` supplies the trainer,
// optimiser and scheduler options of the instrumented run.
DoctorReport run_doctor(train::TaskModule& task, train::DataModule& data, const train::RunConfig& config,
                        const DoctorOptions& options, std::ostream* log = nullptr);

}  // namespace glassbox::inspect
