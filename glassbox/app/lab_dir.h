// The lab/ directory of the source tree glassbox was built from: `glassbox lab`'s last resort
// when neither --lab-dir, GLASSBOX_LAB_DIR nor ./lab names one.
//
//   std::filesystem::path lab = glassbox::app::default_lab_dir();
#pragma once

#include <string>

namespace glassbox::app {

std::string default_lab_dir();

}  // namespace glassbox::app
