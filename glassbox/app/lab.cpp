// Tested by app_test (LabWorkflow, workflows_test.cpp) and cli_test (Lab.*) and the readme_tour test.
#include "glassbox/app/lab.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "glassbox/app/lab_dir.h"
#include "glassbox/app/run.h"
#include "glassbox/base/config.h"
#include "glassbox/base/error.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

LabScenario read_scenario(const fs::path& dir) {
  LabScenario s;
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

void make_data(const fs::path& lab, const LabScenario& s) {
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

// A broken setup may fail to train: that is part of what the lab shows.
void train_briefly(train::RunConfig cfg, const fs::path& run_dir, std::ostream& out) {
  TrainRequest r;
  r.config = std::move(cfg);
  r.run_dir = run_dir;
  r.overwrite = true;
  try {
    run_training(r, out);
  } catch (const glassbox::Error& e) {
    out << "training fails: " << e.one_line() << "\n";
  } catch (const std::exception& e) {
    out << "training fails: " << e.what() << "\n";
  }
}

}  // namespace

fs::path find_lab_dir(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("GLASSBOX_LAB_DIR")) return env;
  if (fs::exists("lab") && fs::is_directory("lab")) return "lab";
  return default_lab_dir();
}

std::vector<LabScenario> lab_scenarios(const fs::path& lab) {
  GB_CHECK(fs::is_directory(lab), NotFound, "no lab directory at " << lab.string(),
           "run from the repository root or pass --lab-dir");
  std::vector<LabScenario> out;
  for (const auto& e : fs::directory_iterator(lab))
    if (e.is_directory() && fs::exists(e.path() / "lab.toml")) out.push_back(read_scenario(e.path()));
  std::sort(out.begin(), out.end(), [](const LabScenario& a, const LabScenario& b) { return a.name < b.name; });
  return out;
}

LabRun run_lab_scenario(const LabRunRequest& r, std::ostream& out) {
  const fs::path lab = r.lab_dir.empty() ? find_lab_dir("") : r.lab_dir;
  const fs::path dir = lab / r.name;
  if (!fs::exists(dir / "lab.toml")) {
    std::vector<std::string> names;
    for (const auto& s : lab_scenarios(lab)) names.push_back(s.name);
    const std::string near = closest_match(r.name, names);
    GB_THROW(
        NotFound, "no lab scenario \"" << r.name << "\" in " << lab.string(),
        near.empty() ? std::string("see glassbox lab list") : "did you mean \"" + near + "\"? (glassbox lab list)");
  }
  const fs::path runs = r.run_dir.empty() ? fs::path("runs") / "lab" : r.run_dir;
  LabRun result;
  result.scenario = read_scenario(dir);
  const LabScenario& s = result.scenario;
  out << fmt::format("== lab: {} — {}\nsymptom to look for: {}\n", s.name, s.title, s.symptom);
  make_data(lab, s);
  out << fmt::format("\n1. training the broken setup ({})\n", (dir / "config.toml").string()) << std::flush;
  train_briefly(load_lab_config(lab, dir / "config.toml", r.overrides), runs / s.name, out);
  out << "\n2. the doctor\n" << std::flush;
  result.doctor =
      inspect::run_doctor(load_lab_config(lab, dir / "config.toml", r.overrides), inspect::DoctorOptions{}, &std::cerr);
  for (std::size_t i = 0; i < result.doctor.findings.size(); ++i)
    if (result.doctor.findings[i].id == s.expect && result.rank == 0) result.rank = i + 1;
  out << result.doctor.to_text();
  out << fmt::format(
      "\nplanted cause: {} — {}\n", s.expect,
      result.rank == 0 ? std::string("not found by the doctor") : fmt::format("ranked #{} by the doctor", result.rank));
  if (!s.cause.empty()) out << "what was planted: " << s.cause << "\n";
  if (r.fixed) {
    out << fmt::format("\n3. the repaired setup ({})\n", (dir / "fixed.toml").string()) << std::flush;
    train_briefly(load_lab_config(lab, dir / "fixed.toml", r.overrides), runs / (s.name + "-fixed"), out);
  }
  return result;
}

}  // namespace glassbox::app
