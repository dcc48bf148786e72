// Files that matter are written atomically: to a temporary name in the same folder, flushed,
// then renamed into place. An interrupted or failed write never corrupts or loses the previous
// file. Directories (checkpoints) are built under a temporary name and swapped in the same way.
//
//   glassbox::write_file_atomic("runs/a/summary.json", text);
//   glassbox::replace_dir_atomic(tmp_dir, "runs/a/checkpoints/last.ckpt");
//
// Thread safety: functions are reentrant; concurrent writers of one path race (last wins).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace glassbox {

namespace fs = std::filesystem;

// Reads a whole file; NotFound / DataLoss errors name the path.
std::string read_file(const fs::path& path);

// Reads bytes [offset, offset + size) of a file with positioned reads (safe from many threads at
// once); `what` names them in errors ("train-000003.tar: 0042.jpg"). DataLoss when the file ends
// before offset + size.
std::string read_file_range(const fs::path& path, std::int64_t offset, std::int64_t size, const std::string& what);

// Writes `data` to `path` atomically (temp file + fsync + rename).
void write_file_atomic(const fs::path& path, std::string_view data);

// A unique sibling path for building `target` before it is swapped in: "<target>.tmp-<pid>-<n>".
fs::path temp_sibling(const fs::path& target);

// Moves the finished directory `built` to `target`. If `target` exists, it is renamed aside
// first and removed only after the new one is in place.
void replace_dir_atomic(const fs::path& built, const fs::path& target);

// Test hook: the n-th following atomic write (1 = the next) fails with ResourceExhausted after
// writing part of its temporary file, as a full disk would. 0 disables.
void inject_write_failure_for_testing(int nth);

}  // namespace glassbox
