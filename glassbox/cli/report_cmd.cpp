// glassbox report
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "glassbox/cli/commands.h"
#include "glassbox/report/report.h"

namespace glassbox::cli {

namespace {

struct ReportArgs {
  std::string run_dir;
  std::string out;
};

}  // namespace

void add_report(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand("report", "Write the glass-box report of a run: one self-contained HTML file");
  cmd->add_option("run_dir", a->run_dir, "the run directory that glassbox train wrote (e.g. runs/quickstart)")
      ->required();
  cmd->add_option("--out", a->out, "the HTML file to write (default: RUN_DIR/report.html)");
  cmd->footer(
      "The report shows summary.json, config.toml and the curves of metrics.jsonl, and, when present,\n"
      "eval/metrics.json (glassbox eval), explain/index.json (glassbox explain) and doctor.json\n"
      "(glassbox doctor --json). Charts are inline SVG and images are embedded: the file opens\n"
      "offline and can be mailed as it is. A malformed artefact is an error (exit 2) and leaves\n"
      "an earlier report untouched.\n"
      "Examples:\n"
      "  glassbox report runs/quickstart\n"
      "  glassbox report runs/cnn --out /tmp/cnn-report.html");
  cmd->callback([a] {
    const std::filesystem::path out = report::write_report(a->run_dir, a->out);
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(out, ec);
    std::cout << "wrote " << out.string();
    if (!ec) std::cout << " (" << (bytes + 1023) / 1024 << " KiB)";
    std::cout << "\n";
  });
}

}  // namespace glassbox::cli
