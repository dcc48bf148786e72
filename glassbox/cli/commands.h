// The glassbox command line: one file per subcommand, each registering itself on the CLI11 app.
// Subcommands are thin: parse flags -> options -> a library call.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace glassbox::nn {
struct ModelContract;
}  // namespace glassbox::nn
namespace glassbox::exporter {
struct ExportRequest;
}  // namespace glassbox::exporter
namespace glassbox::train {
struct RunConfig;
struct RunOptions;
struct LoadedModel;
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
void add_export(CLI::App& app);
void add_serve(CLI::App& app);

// The process exit status a command asks for when it returns normally (default 0).
int& exit_code();

// Adds [diagnostics] (TensorBoard, probes, non-finite monitor) to a run's options.
void install_run_diagnostics(train::RunConfig& cfg, train::RunOptions& ro);

// The contract of a checkpoint's model: input shape, the data module's preprocessing (uint8
// scaling, mean/std), output kind and class names (export_cmd.cpp).
nn::ModelContract contract_for_checkpoint(const train::LoadedModel& m);

// `glassbox export` as a call (quickstart uses it): format torchscript | onnx | repository |
// weights | all; out_dir empty: RUN_DIR/export/... Prints a table of artefacts when `print`.
nlohmann::json run_export(const std::filesystem::path& checkpoint, const std::string& format,
                          const std::filesystem::path& out, const exporter::ExportRequest& request, bool print);

// The quickstart configuration embedded in the binary (configs/quickstart.toml at build time).
const char* embedded_quickstart_config();

}  // namespace glassbox::cli
