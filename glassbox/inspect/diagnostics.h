// install_diagnostics: what [diagnostics] asks for, added to a Trainer — the TensorBoard writer
// (events.out.tfevents.* in the run directory: every logged metric as a scalar, the config as
// text, hyper-parameters, the first training inputs as images, and the probes' histograms),
// the ProbeCallback (probes.jsonl) and the NonFiniteMonitor (nonfinite.json).
//
//   train::RunOptions ro;
//   ro.configure = [&](train::Trainer& t, train::TaskModule&, const fs::path& dir, std::ostream& out) {
//     Diagnostics d = install_diagnostics(t, cfg.diagnostics, dir, out, cfg.to_toml_text(), hparams);
//   };
//
// With an empty run directory nothing is written (probes and the monitor still run).
// Ownership: the callbacks belong to the Trainer; the returned pointers are valid as long as it.
// Thread safety: training thread only.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "glassbox/train/diagnostics_options.h"

namespace glassbox::train {
class Trainer;
}

namespace glassbox::inspect {

class EventWriter;
class ProbeCallback;
class NonFiniteMonitor;

struct Diagnostics {
  EventWriter* writer = nullptr;  // null without TensorBoard
  ProbeCallback* probes = nullptr;
  NonFiniteMonitor* nonfinite = nullptr;  // null with nonfinite = "off"
};

// hparams: a flat JSON object of hyper-parameters (numbers, strings, bools) for TensorBoard's
// hparams view; config_text: shown as text.
Diagnostics install_diagnostics(train::Trainer& trainer, const train::DiagnosticsOptions& options,
                                const std::filesystem::path& run_dir, std::ostream& out,
                                const std::string& config_text = {},
                                const nlohmann::json& hparams = nlohmann::json::object());

// Flattens a nested config JSON ({"optim": {"lr": 0.1}}) into {"optim.lr": 0.1}, keeping numbers,
// strings and bools (arrays become their JSON text).
nlohmann::json flatten_hparams(const nlohmann::json& config);

}  // namespace glassbox::inspect
