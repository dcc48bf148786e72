// Escaping, base64, number formatting and the page skeleton.
#include "glassbox/report/html.h"

#include <cmath>

#include <gtest/gtest.h>

namespace glassbox::report {
namespace {

TEST(Html, EscapesMarkupAndQuotes) {
  EXPECT_EQ(escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(escape("plain text 1.5"), "plain text 1.5");
  EXPECT_EQ(escape("&amp;"), "&amp;amp;");  // escaping is not idempotent: text is escaped once
}

TEST(Html, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(escape("caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x90\x88"), "caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x90\x88");
  EXPECT_EQ(escape("a\xFFz"), "a\xEF\xBF\xBDz");                              // a stray byte
  EXPECT_EQ(escape("a\xC3"), "a\xEF\xBF\xBD");                                // a sequence cut short
  EXPECT_EQ(escape("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // an overlong '/'
  EXPECT_EQ(escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a UTF-16 surrogate
}

TEST(Html, Base64MatchesRfc4648Vectors) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\x00\xFF\xFE", 3)), "AP/+");
  EXPECT_EQ(data_uri("image/png", "foo"), "data:image/png;base64,Zm9v");
}

TEST(Html, FormatsNumbersReadably) {
  EXPECT_EQ(format_number(0.90381), "0.9038");
  EXPECT_EQ(format_number(0.5), "0.5");
  EXPECT_EQ(format_number(100), "100");
  EXPECT_EQ(format_number(-2.25), "-2.25");
  EXPECT_EQ(format_number(12345.678), "12346");
  EXPECT_EQ(format_number(1.5e-5), "1.5e-5");
  EXPECT_EQ(format_number(1234567), "1.235e6");
  EXPECT_EQ(format_number(0), "0");
  EXPECT_EQ(format_number(NAN), "NaN");
  EXPECT_EQ(format_number(-INFINITY), "-Inf");
  EXPECT_EQ(format_fixed(0.90381, 3), "0.904");
  EXPECT_EQ(format_fixed(-0.0001, 2), "0.00");
  EXPECT_EQ(format_count(537354), "537,354");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(-1234), "-1,234");
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_percent(0.9038), "90.38 %");
  EXPECT_EQ(format_duration(49.17), "49.2 s");
  EXPECT_EQ(format_duration(754), "12 min 34 s");
  EXPECT_EQ(format_duration(7300), "2 h 1 min");
}

TEST(Html, PageIsSelfContained) {
  const std::string p = page("a <title>", "<nav></nav>", "<p>body</p>");
  EXPECT_EQ(p.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(p.find("<title>a &lt;title&gt;</title>"), std::string::npos);
  EXPECT_NE(p.find("<meta charset=\"utf-8\">"), std::string::npos);
  EXPECT_NE(p.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(p.find("<style>"), std::string::npos);
  EXPECT_NE(p.find("<p>body</p>"), std::string::npos);
  EXPECT_EQ(p.find("<script"), std::string::npos);
  EXPECT_EQ(p.find("http:"), std::string::npos);
  EXPECT_EQ(p.find("https:"), std::string::npos);
  EXPECT_EQ(p.find("url("), std::string::npos);
}

}  // namespace
}  // namespace glassbox::report
