// libFuzzer target: parse_json with its depth limit, and the JSON writers append_json_string and
// append_json_number (glassbox/serve/http/codec.h), which every JSON body of glassbox serve goes
// through.
//
// The input is the text, parsed with the server's default depth limit (100). A glassbox::Error is
// the expected answer to malformed or too deeply nested text. When it parses into a value of
// nesting depth d (a scalar 0, [] 1, [[]] 2):
//   - d <= 100; the text parses with the limit d too and, for d >= 2, fails with the limit d - 1
//     (the limit is the deepest nesting accepted, and at least 1 in HttpOptions);
//   - the value's dump() parses back to an equal value;
//   - each string in it, written with append_json_string, reads back as the same string; each
//     floating-point number, written with append_json_number, reads back as the same double,
//     and as a float (FP32 outputs) as the same float.
// The input itself, when it is UTF-8, written with append_json_string reads back as itself; written
// with append_json_text it is always a valid JSON string (the same as append_json_string for UTF-8).
// Anything else that escapes, a failed check, a sanitizer report, a leak or a hang is a finding.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/serve/http/codec.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using glassbox::Error;
using json = nlohmann::json;

constexpr int kMaxDepth = 100;  // HttpOptions::max_json_depth's default
constexpr std::string_view kWhat = "the fuzz input";

[[noreturn]] void fail(const std::string& what) { glassbox::fuzz::fail("fuzz_json", what); }

int nesting(const json& v) {
  if (!v.is_structured()) return 0;
  int deepest = 0;
  for (const json& child : v) deepest = std::max(deepest, nesting(child));
  return deepest + 1;
}

bool parses(std::string_view text, int max_depth) {
  try {
    glassbox::serve::parse_json(text, max_depth, kWhat);
    return true;
  } catch (const Error& e) {
    if (e.message().find("nesting deeper than") == std::string::npos) {
      fail("text that parsed with one limit fails with another for another reason: " + e.one_line());
    }
    return false;
  }
}

void check_string(std::string_view s) {
  std::string out;
  glassbox::serve::append_json_string(out, s);
  json back;
  try {
    back = json::parse(out);
  } catch (const json::parse_error& e) {
    fail(std::string("append_json_string wrote invalid JSON: ") + e.what());
  }
  if (!back.is_string() || back.get_ref<const std::string&>() != s) fail("append_json_string does not read back");
}

void check_number(double d) {
  if (!std::isfinite(d)) return;  // out-of-range literals (1e999) parse as infinities; written as null
  std::string out;
  glassbox::serve::append_json_number(out, d);
  if (json::parse(out).get<double>() != d) fail("append_json_number(double) does not read back: " + out);
  const auto f = static_cast<float>(d);
  if (!std::isfinite(f)) return;
  out.clear();
  glassbox::serve::append_json_number(out, f);
  if (static_cast<float>(json::parse(out).get<double>()) != f)
    fail("append_json_number(float) does not read back: " + out);
}

// append_json_text (error messages quoting untrusted bytes): always a valid JSON string literal;
// the same as append_json_string for UTF-8.
void check_text(std::string_view s, bool utf8) {
  std::string out;
  glassbox::serve::append_json_text(out, s);
  try {
    (void)json::parse(out);
  } catch (const json::parse_error& e) {
    fail(std::string("append_json_text wrote invalid JSON: ") + e.what());
  }
  if (utf8) {
    std::string plain;
    glassbox::serve::append_json_string(plain, s);
    if (plain != out) fail("append_json_text differs from append_json_string on UTF-8");
  }
}

bool has_infinity(const json& v) {
  if (v.is_number_float()) return !std::isfinite(v.get<double>());
  if (!v.is_structured()) return false;
  for (const json& child : v) {
    if (has_infinity(child)) return true;
  }
  return false;
}

void check_writers(const json& v) {
  if (v.is_string()) {
    check_string(v.get_ref<const std::string&>());
  } else if (v.is_number_float()) {
    check_number(v.get<double>());
  } else if (v.is_object()) {
    for (const auto& [key, child] : v.items()) {
      check_string(key);
      check_writers(child);
    }
  } else if (v.is_array()) {
    for (const json& child : v) check_writers(child);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // Raw bytes through the string writer: when they are UTF-8, they read back as themselves (the
  // writer passes other bytes through unchanged, which no JSON parser accepts).
  const bool utf8 = glassbox::fuzz::valid_utf8(text);
  if (utf8) check_string(text);
  check_text(text, utf8);

  json v;
  try {
    v = glassbox::serve::parse_json(text, kMaxDepth, kWhat);
  } catch (const Error&) {
    return 0;  // a 400: malformed or too deep
  }
  const int d = nesting(v);
  if (d > kMaxDepth) fail("parse_json accepted nesting " + std::to_string(d) + " over the limit");
  if (d >= 1 && !parses(text, d)) fail("nesting " + std::to_string(d) + " refused with the limit " + std::to_string(d));
  if (d >= 2 && parses(text, d - 1)) {
    fail("nesting " + std::to_string(d) + " accepted with the limit " + std::to_string(d - 1));
  }

  json back;
  try {
    if (has_infinity(v)) return 0;  // dump() writes them as null
    back = json::parse(v.dump());
  } catch (const json::parse_error& e) {
    fail(std::string("dump() of a parsed value does not parse: ") + e.what());
  }
  if (back != v) fail("dump() of a parsed value reads back as another value");
  check_writers(v);
  return 0;
}
