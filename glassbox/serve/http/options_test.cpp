// HttpOptions::validate names the option and the fix; resolved_threads.
#include "glassbox/serve/http/options.h"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "glassbox/base/error.h"

namespace glassbox::serve {
namespace {

TEST(HttpOptions, ValidateNamesTheOption) {
  auto message = [](HttpOptions o) {
    try {
      o.validate();
    } catch (const Error& e) {
      return e.message();
    }
    return std::string();
  };
  HttpOptions o;
  EXPECT_EQ(message(o), "");
  o.http_port = 70000;
  EXPECT_EQ(message(o), "http_port must be 0..65535, got 70000");
  o = {};
  o.metrics_port = 8000;
  EXPECT_EQ(message(o), "http_port and metrics_port are both 8000");
  o = {};
  o.protect_inference = true;
  EXPECT_EQ(message(o), "protect_inference is set but there is no API key");
  o = {};
  o.threads = -1;
  EXPECT_EQ(message(o), "threads must be 0..1024, got -1");
  o = {};
  o.busy_poll = std::chrono::microseconds(-5);
  EXPECT_EQ(message(o), "busy_poll must be 0..1000000 us, got -5");
  o = {};
  EXPECT_GE(o.resolved_threads(), 2);
  o.threads = 3;
  EXPECT_EQ(o.resolved_threads(), 3);
}

}  // namespace
}  // namespace glassbox::serve
