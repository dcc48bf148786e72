// Helpers shared by the libFuzzer harnesses of tests/fuzz (header-only: each target is one .cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace glassbox::fuzz {

// A finding: the message on stderr, then abort() (libFuzzer saves the input as a crash).
[[noreturn]] inline void fail(std::string_view target, const std::string& what) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(target.size()), target.data(), what.c_str());
  std::abort();
}

// Well-formed UTF-8 as JSON parsers (nlohmann's included) accept it: no overlong forms, no
// surrogates, nothing above U+10FFFF.
inline bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace glassbox::fuzz
