#include "glassbox/base/files.h"

#include <gtest/gtest.h>

#include "glassbox/base/error.h"

namespace glassbox {
namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("gb_files_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Files, AtomicWriteReplaces) {
  const fs::path d = fresh_dir("replace");
  write_file_atomic(d / "a.txt", "one");
  write_file_atomic(d / "a.txt", "two");
  EXPECT_EQ(read_file(d / "a.txt"), "two");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);  // no temp left
}

TEST(Files, FailedWriteKeepsPreviousFile) {
  const fs::path d = fresh_dir("fail");
  write_file_atomic(d / "a.txt", "precious");
  inject_write_failure_for_testing(1);
  EXPECT_THROW(write_file_atomic(d / "a.txt", std::string(1000, 'x')), Error);
  EXPECT_EQ(read_file(d / "a.txt"), "precious");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  write_file_atomic(d / "a.txt", "after");  // the hook fired once only
  EXPECT_EQ(read_file(d / "a.txt"), "after");
}

TEST(Files, ReplaceDirSwapsContents) {
  const fs::path d = fresh_dir("dir");
  fs::create_directories(d / "old");
  write_file_atomic(d / "old" / "x", "old");
  replace_dir_atomic(d / "old", d / "target");
  fs::create_directories(d / "new");
  write_file_atomic(d / "new" / "x", "new");
  replace_dir_atomic(d / "new", d / "target");
  EXPECT_EQ(read_file(d / "target" / "x"), "new");
  EXPECT_FALSE(fs::exists(d / "new"));
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
}

TEST(Files, MissingFileNamesPath) {
  try {
    read_file("/nonexistent/zzz.bin");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(e.message().find("/nonexistent/zzz.bin"), std::string::npos);
  }
}

}  // namespace
}  // namespace glassbox
