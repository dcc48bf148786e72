// `glassbox quickstart` as a call: train the built-in configuration (an MLP on Fashion-MNIST),
// then close the loop on the tested checkpoint — evaluate it, explain some right and wrong
// predictions, export it (TorchScript, ONNX, a model repository), check the data with the doctor
// and write the report.
//
//   QuickstartRequest q; q.overrides = {"trainer.max_epochs=1"};
//   nlohmann::json summary = run_quickstart(q, std::cout);   // runs/quickstart/...
//
// The default run directory (runs/quickstart) is quickstart's own and replaced on each run; a
// run directory given by the caller is protected unless overwrite. summary["steps"] holds what
// each closing step wrote. An interrupted training skips the closing steps.
// Thread safety: one run per process at a time.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::app {

struct QuickstartRequest {
  std::filesystem::path run_dir;       // empty: runs/quickstart
  std::vector<std::string> overrides;  // keys of the built-in config
  bool overwrite = false;
  bool quiet = false;
  // How to call glassbox in the commands it suggests ("glassbox" when empty).
  std::string binary;
};

nlohmann::json run_quickstart(const QuickstartRequest& request, std::ostream& out);

// The quickstart configuration embedded in the binary (configs/quickstart.toml at build time).
const char* embedded_quickstart_config();

}  // namespace glassbox::app
