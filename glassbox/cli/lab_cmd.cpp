// glassbox lab list | run NAME [--fixed]: flags -> app::lab_scenarios / app::run_lab_scenario.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "glassbox/app/lab.h"
#include "glassbox/cli/commands.h"

namespace glassbox::cli {

namespace fs = std::filesystem;

void add_lab(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("lab", "Reproducible broken training setups, each diagnosed by the doctor (lab/)");
  cmd->require_subcommand(1);
  auto lab_dir = std::make_shared<std::string>();
  cmd->add_option("--lab-dir", *lab_dir, "the lab directory (default: ./lab, $GLASSBOX_LAB_DIR, or the source tree's)");

  CLI::App* list = cmd->add_subcommand("list", "List the scenarios");
  auto json = std::make_shared<bool>(false);
  list->add_flag("--json", *json, "print them as JSON");
  list->callback([lab_dir, json] {
    const fs::path lab = app::find_lab_dir(*lab_dir);
    const auto all = app::lab_scenarios(lab);
    if (*json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& s : all)
        j.push_back({{"name", s.name}, {"title", s.title}, {"symptom", s.symptom}, {"expect", s.expect}});
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::size_t w = 4;
    for (const auto& s : all) w = std::max(w, s.name.size());
    for (const auto& s : all) std::cout << fmt::format("{:<{}}  {}\n", s.name, w, s.title);
    std::cout << fmt::format("\n{} scenarios in {}; run one with: glassbox lab run NAME [--fixed]\n", all.size(),
                             lab.string());
  });

  CLI::App* run =
      cmd->add_subcommand("run", "Train a scenario briefly, show the symptom, then the doctor's diagnosis and fix");
  auto name = std::make_shared<std::string>();
  auto fixed = std::make_shared<bool>(false);
  auto sets = std::make_shared<std::vector<std::string>>();
  run->add_option("name", *name, "scenario name (glassbox lab list)")->required();
  run->add_flag("--fixed", *fixed, "then train the repaired setup (fixed.toml) and show it learning");
  run->add_option("--set", *sets, "override a key of the scenario's configs (repeatable)");
  run->footer("Examples:\n  glassbox lab run label-offset\n  glassbox lab run exploding-gradients --fixed");
  auto run_dir = std::make_shared<std::string>();
  run->add_option("--run-dir", *run_dir,
                  "where the scenario's runs go (default: runs/lab; NAME and NAME-fixed inside)");
  run->callback([lab_dir, name, fixed, sets, run_dir] {
    app::LabRunRequest r;
    r.lab_dir = app::find_lab_dir(*lab_dir);
    r.name = *name;
    r.fixed = *fixed;
    r.overrides = *sets;
    r.run_dir = *run_dir;
    app::run_lab_scenario(r, std::cout);  // the scenario's story, step by step
  });
}

}  // namespace glassbox::cli
