// glassbox doctor: flags -> app::run_doctor -> the findings (text or JSON) and the exit status.
#include <iostream>

#include <CLI/CLI.hpp>

#include "glassbox/app/doctor.h"
#include "glassbox/cli/commands.h"

namespace glassbox::cli {

namespace {

struct DoctorArgs {
  std::string config;
  std::vector<std::string> sets;
  bool json = false;
  bool no_run = false;
  std::int64_t steps = 300;
  double seconds = 40;
};

}  // namespace

void add_doctor(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  CLI::App* cmd =
      app.add_subcommand("doctor", "Diagnose a training setup: the data, the setup, then a short instrumented run");
  cmd->add_option("config", a->config, "TOML config file (default: the built-in defaults)");
  cmd->add_option("--set", a->sets, "override a config key, e.g. --set optim.lr=1e-3 (repeatable)");
  cmd->add_flag("--json", a->json, "print {\"findings\": [...]} as JSON (progress goes to stderr)");
  cmd->add_flag("--no-run", a->no_run, "check the data and the setup only (no training steps)");
  cmd->add_option("--steps", a->steps, "steps of the instrumented run (at most)")->check(CLI::PositiveNumber);
  cmd->add_option("--seconds", a->seconds, "seconds of training in the instrumented run (at most)")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "Exit status: 0 when no error-level finding, 1 when there is one, 2 on bad input.\n"
      "Finding ids are documented in docs/doctor.md.\n"
      "Examples:\n"
      "  glassbox doctor configs/quickstart.toml\n"
      "  glassbox doctor lab/label-offset/config.toml --json");
  cmd->callback([a] {
    app::DoctorRequest d;
    d.config_file = a->config;
    d.overrides = a->sets;
    d.options.run = !a->no_run;
    d.options.max_steps = a->steps;
    d.options.max_seconds = a->seconds;
    const inspect::DoctorReport r = app::run_doctor(d, &std::cerr);
    if (a->json) {
      std::cout << r.to_json().dump(2) << "\n";
    } else {
      std::cout << r.to_text();
    }
    exit_code() = r.has_errors() ? 1 : 0;
  });
}

std::vector<std::string>& raw_args() {
  static std::vector<std::string> args;
  return args;
}

int& exit_code() {
  static int code = 0;
  return code;
}

}  // namespace glassbox::cli
