// The only object of gb_app that sees the source tree's absolute path (the default lab
// directory), so that the other objects' ccache keys do not depend on where the clone lives.
#include "glassbox/app/lab_dir.h"

namespace glassbox::app {

std::string default_lab_dir() { return GB_LAB_DIR; }

}  // namespace glassbox::app
