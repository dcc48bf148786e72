// `glassbox doctor` as a call: the configuration (a file or the built-in defaults, with
// overrides) examined by the doctor — the data, the setup, then a short instrumented run — with
// progress on `log`.
//
//   DoctorRequest d; d.config_file = "lab/label-offset/config.toml"; d.options.max_steps = 100;
//   inspect::DoctorReport r = run_doctor(d, &std::cerr);   // r.findings, most important first
//
// Errors: the configuration's own (InvalidArgument naming the key). Thread safety: one at a time.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "glassbox/inspect/doctor.h"

namespace glassbox::app {

struct DoctorRequest {
  std::filesystem::path config_file;  // empty: the built-in defaults
  std::vector<std::string> overrides;
  inspect::DoctorOptions options;
};

inspect::DoctorReport run_doctor(const DoctorRequest& request, std::ostream* log);

}  // namespace glassbox::app
