#include "glassbox/base/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "glassbox/base/error.h"

namespace glassbox {
namespace {

std::atomic<int> g_fail_countdown{0};
std::atomic<std::uint64_t> g_temp_counter{0};

bool should_inject_failure() {
  int current = g_fail_countdown.load();
  while (current > 0) {
    if (g_fail_countdown.compare_exchange_weak(current, current - 1)) return current == 1;
  }
  return false;
}

}  // namespace

std::string read_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    GB_THROW(NotFound, "no such file: " << path.string(), "check the path");
  }
  if (fs::is_directory(path, ec)) {
    GB_THROW(InvalidArgument, path.string() << " is a directory, expected a file", "pass a file path");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) GB_THROW(NotFound, "cannot open " << path.string() << ": " << std::strerror(errno), "check permissions");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) GB_THROW(DataLoss, "error reading " << path.string(), "check the file");
  return ss.str();
}

std::string read_file_range(const fs::path& path, std::int64_t offset, std::int64_t size, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  GB_CHECK(fd >= 0, NotFound, "cannot open " << path.string() << ": " << std::strerror(errno),
           "check that it exists and that you may read it");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  std::int64_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, bytes.data() + got, static_cast<std::size_t>(size - got), offset + got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      GB_THROW(DataLoss,
               what << " breaks off after " << got << " of " << size << " bytes"
                    << (n < 0 ? std::string(" (") + std::strerror(err) + ")" : std::string()),
               "the file changed or was cut short since it was listed: re-copy it");
    }
    got += n;
  }
  ::close(fd);
  return bytes;
}

fs::path temp_sibling(const fs::path& target) {
  fs::path name = target.filename();
  std::string tmp =
      "." + name.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_temp_counter.fetch_add(1));
  return target.parent_path() / tmp;
}

void write_file_atomic(const fs::path& path, std::string_view data) {
  fs::path parent = path.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      GB_THROW(InvalidArgument, "cannot create directory " << parent.string() << ": " << ec.message(),
               "check the path and permissions");
  }
  const fs::path tmp = temp_sibling(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    GB_THROW(InvalidArgument, "cannot write " << path.string() << ": " << std::strerror(errno),
             "check the path and permissions");
  const bool inject = should_inject_failure();
  std::size_t to_write = inject ? data.size() / 2 : data.size();
  std::size_t done = 0;
  int saved_errno = 0;
  while (done < to_write) {
    const ssize_t n = ::write(fd, data.data() + done, to_write - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      saved_errno = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (inject && saved_errno == 0) saved_errno = ENOSPC;
  if (saved_errno == 0 && ::fsync(fd) != 0) saved_errno = errno;
  ::close(fd);
  if (saved_errno != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    GB_THROW(
        ResourceExhausted,
        "writing " << path.string() << " failed: " << std::strerror(saved_errno) << "; the previous file is intact",
        "free disk space or choose another directory");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::error_code ec;
    fs::remove(tmp, ec);
    GB_THROW(ResourceExhausted, "renaming into " << path.string() << " failed: " << std::strerror(e),
             "check the directory");
  }
}

void replace_dir_atomic(const fs::path& built, const fs::path& target) {
  std::error_code ec;
  if (!fs::exists(target, ec)) {
    fs::rename(built, target, ec);
    if (ec)
      GB_THROW(ResourceExhausted, "cannot move " << built.string() << " to " << target.string() << ": " << ec.message(),
               "check the directory");
    return;
  }
  const fs::path aside = temp_sibling(target);
  fs::rename(target, aside, ec);
  if (ec)
    GB_THROW(ResourceExhausted, "cannot move aside " << target.string() << ": " << ec.message(), "check the directory");
  fs::rename(built, target, ec);
  if (ec) {
    std::error_code ec2;
    fs::rename(aside, target, ec2);  // put the old one back
    GB_THROW(ResourceExhausted, "cannot move " << built.string() << " to " << target.string() << ": " << ec.message(),
             "check the directory");
  }
  fs::remove_all(aside, ec);
}

void inject_write_failure_for_testing(int nth) { g_fail_countdown.store(nth); }

}  // namespace glassbox
