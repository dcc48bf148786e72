// Tested by app_test (DoctorWorkflow, workflows_test.cpp) and cli_test (Lab.*, through `glassbox doctor`).
#include "glassbox/app/doctor.h"

#include "glassbox/train/run_config.h"

namespace glassbox::app {

inspect::DoctorReport run_doctor(const DoctorRequest& request, std::ostream* log) {
  train::RunConfig config = train::load_run_config(request.config_file, request.overrides);
  return inspect::run_doctor(std::move(config), request.options, log);
}

}  // namespace glassbox::app
