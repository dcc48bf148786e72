// glassbox lab list | run NAME [--fixed]
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <toml++/toml.h>

#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/cli/commands.h"
#include "glassbox/cli/lab_dir.h"
#include "glassbox/inspect/doctor.h"
#include "glassbox/train/run.h"

namespace glassbox::cli {

namespace fs = std::filesystem;

namespace {

struct Scenario {
  std::string name, title, symptom, cause, expect, data;
  fs::path dir;
};

fs::path find_lab_dir(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("GLASSBOX_LAB_DIR")) return env;
  if (fs::exists("lab") && fs::is_directory("lab")) return "lab";
  return default_lab_dir();
}

Scenario read_scenario(const fs::path& dir) {
  Scenario s;
  s.name = dir.filename().string();
  s.dir = dir;
  const fs::path meta = dir / "lab.toml";
  try {
    toml::table t = toml::parse_file(meta.string());
    s.title = t["title"].value_or(std::string());
    s.symptom = t["symptom"].value_or(std::string());
    s.cause = t["cause"].value_or(std::string());
    s.expect = t["expect"].value_or(std::string());
    s.data = t["data"].value_or(std::string());
  } catch (const toml::parse_error& e) {
    GB_THROW(DataLoss, meta.string() << ": " << e.description(), "fix the TOML syntax of the scenario's lab.toml");
  }
  return s;
}

std::vector<Scenario> scenarios(const fs::path& lab) {
  GB_CHECK(fs::is_directory(lab), NotFound, "no lab directory at " << lab.string(),
           "run from the repository root or pass --lab-dir");
  std::vector<Scenario> out;
  for (const auto& e : fs::directory_iterator(lab))
    if (e.is_directory() && fs::exists(e.path() / "lab.toml")) out.push_back(read_scenario(e.path()));
  std::sort(out.begin(), out.end(), [](const Scenario& a, const Scenario& b) { return a.name < b.name; });
  return out;
}

void make_data(const fs::path& lab, const Scenario& s) {
  if (s.data.empty()) return;
  const fs::path venv = fs::absolute(lab).parent_path() / ".venv" / "bin" / "python";
  const std::string python = fs::exists(venv) ? venv.string() : "python3";
  const std::string cmd = fmt::format("\"{}\" \"{}\" \"{}\"", python, (lab / "make_data.py").string(), s.data);
  const int rc = std::system(cmd.c_str());
  GB_CHECK(rc == 0, FailedPrecondition, "generating the data of lab scenario " << s.name << " failed (" << cmd << ")",
           "run it by hand to see why; it needs numpy and Fashion-MNIST in /usr/share/datasets/fashion-mnist");
}

// Data paths in lab configs are relative to the repository root (lab's parent).
train::RunConfig load_lab_config(const fs::path& lab, const fs::path& file, const std::vector<std::string>& sets) {
  train::RunConfig cfg = train::load_run_config(file, sets);
  fs::path root = cfg.data.source.root;
  if (root.is_relative() && !fs::exists(root)) {
    const fs::path alt = fs::absolute(lab).parent_path() / root;
    if (fs::exists(alt)) cfg.data.source.root = alt.string();
  }
  return cfg;
}

void train_briefly(train::RunConfig cfg, const fs::path& run_dir, std::ostream& out) {
  train::RunOptions ro;
  ro.run_dir = run_dir;
  ro.overwrite = true;
  try {
    install_run_diagnostics(cfg, ro);
    train::run_training(std::move(cfg), ro, out);
  } catch (const glassbox::Error& e) {
    out << "training fails: " << e.one_line() << "\n";
  } catch (const std::exception& e) {
    out << "training fails: " << e.what() << "\n";
  }
}

}  // namespace

void add_lab(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("lab", "Reproducible broken training setups, each diagnosed by the doctor (lab/)");
  cmd->require_subcommand(1);
  auto lab_dir = std::make_shared<std::string>();
  cmd->add_option("--lab-dir", *lab_dir, "the lab directory (default: ./lab, $GLASSBOX_LAB_DIR, or the source tree's)");

  CLI::App* list = cmd->add_subcommand("list", "List the scenarios");
  auto json = std::make_shared<bool>(false);
  list->add_flag("--json", *json, "print them as JSON");
  list->callback([lab_dir, json] {
    const fs::path lab = find_lab_dir(*lab_dir);
    const auto all = scenarios(lab);
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
  run->callback([lab_dir, name, fixed, sets] {
    const fs::path lab = find_lab_dir(*lab_dir);
    const fs::path dir = lab / *name;
    if (!fs::exists(dir / "lab.toml")) {
      std::vector<std::string> names;
      for (const auto& s : scenarios(lab)) names.push_back(s.name);
      const std::string near = closest_match(*name, names);
      GB_THROW(
          NotFound, "no lab scenario \"" << *name << "\" in " << lab.string(),
          near.empty() ? std::string("see glassbox lab list") : "did you mean \"" + near + "\"? (glassbox lab list)");
    }
    const Scenario s = read_scenario(dir);
    std::cout << fmt::format("== lab: {} — {}\nsymptom to look for: {}\n", s.name, s.title, s.symptom);
    make_data(lab, s);
    std::cout << fmt::format("\n1. training the broken setup ({})\n", (dir / "config.toml").string()) << std::flush;
    train_briefly(load_lab_config(lab, dir / "config.toml", *sets), fs::path("runs") / "lab" / s.name, std::cout);
    std::cout << "\n2. the doctor\n" << std::flush;
    const inspect::DoctorReport r =
        inspect::run_doctor(load_lab_config(lab, dir / "config.toml", *sets), inspect::DoctorOptions{}, &std::cerr);
    std::cout << r.to_text();
    std::size_t rank = 0;
    for (std::size_t i = 0; i < r.findings.size(); ++i)
      if (r.findings[i].id == s.expect && rank == 0) rank = i + 1;
    std::cout << fmt::format(
        "\nplanted cause: {} — {}\n", s.expect,
        rank == 0 ? std::string("not found by the doctor") : fmt::format("ranked #{} by the doctor", rank));
    if (!s.cause.empty()) std::cout << "what was planted: " << s.cause << "\n";
    if (*fixed) {
      std::cout << fmt::format("\n3. the repaired setup ({})\n", (dir / "fixed.toml").string()) << std::flush;
      train_briefly(load_lab_config(lab, dir / "fixed.toml", *sets), fs::path("runs") / "lab" / (s.name + "-fixed"),
                    std::cout);
    }
  });
}

}  // namespace glassbox::cli
