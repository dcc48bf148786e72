// The glassbox command line: one file per subcommand, each registering itself on the CLI11 app.
// Subcommands are thin: parse flags -> options -> one app:: call -> print.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

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
void add_predict(CLI::App& app);
void add_data(CLI::App& app);
void add_tune(CLI::App& app);
void add_monitor(CLI::App& app);

// The process exit status a command asks for when it returns normally (default 0).
int& exit_code();
// The command line as given (argv), for commands that start copies of themselves.
std::vector<std::string>& raw_args();

}  // namespace glassbox::cli
