// The glassbox command line: one file per subcommand, each registering itself on the CLI11 app.
// Subcommands are thin: parse flags -> options -> a library call.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace glassbox::train {
struct RunConfig;
struct RunOptions;
}  // namespace glassbox::train

namespace glassbox::cli {

// Each add_* registers a subcommand; the callback it installs runs the command and may throw
// glassbox::Error (mapped to exit codes in main).
void add_train(CLI::App& app);
void add_quickstart(CLI::App& app);
void add_bench(CLI::App& app);
void add_doctor(CLI::App& app);
void add_lab(CLI::App& app);
void add_eval(CLI::App& app);
void add_explain(CLI::App& app);
void add_report(CLI::App& app);

// The process exit status a command asks for when it returns normally (default 0).
int& exit_code();

// Adds [diagnostics] (TensorBoard, probes, non-finite monitor) to a run's options.
void install_run_diagnostics(train::RunConfig& cfg, train::RunOptions& ro);

// The quickstart configuration embedded in the binary (configs/quickstart.toml at build time).
const char* embedded_quickstart_config();

}  // namespace glassbox::cli
