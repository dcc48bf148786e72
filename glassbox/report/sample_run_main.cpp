// report_sample_run DIR [--no-eval] [--no-fairness] [--no-explain] [--no-doctor]
// Writes the synthetic run directory of sample_run.h (for tests/reference/report_browser.py).
#include <cstring>
#include <iostream>

#include "glassbox/base/error.h"
#include "glassbox/report/sample_run.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: report_sample_run DIR [--no-eval] [--no-fairness] [--no-explain] [--no-doctor]\n";
    return 2;
  }
  glassbox::report::SampleRunParts parts;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-eval") == 0)
      parts.eval = false;
    else if (std::strcmp(argv[i], "--no-fairness") == 0)
      parts.fairness = false;
    else if (std::strcmp(argv[i], "--no-explain") == 0)
      parts.explain = false;
    else if (std::strcmp(argv[i], "--no-doctor") == 0)
      parts.doctor = false;
    else {
      std::cerr << "report_sample_run: unknown option " << argv[i] << "\n";
      return 2;
    }
  }
  try {
    glassbox::report::write_sample_run(argv[1], parts);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
