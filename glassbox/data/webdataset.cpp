// Tested by webdataset_test.cpp (against Python's webdataset and braceexpand in
// tests/reference/wds_ref.py).
#include "glassbox/data/webdataset.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <system_error>

#include <fmt/format.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::data {

namespace fs = std::filesystem;

namespace {

// ---- brace expansion (braceexpand's grammar: pattern = literals and {expressions}) ----

using Strings = std::vector<std::string>;

Strings product(const std::vector<Strings>& items) {
  Strings out = {""};
  for (const Strings& alts : items) {
    Strings next;
    next.reserve(out.size() * alts.size());
    for (const std::string& head : out)
      for (const std::string& a : alts) next.push_back(head + a);
    out = std::move(next);
  }
  return out;
}

Strings parse_pattern(const std::string& p, const std::string& whole);

bool all_digits(const std::string& s, std::size_t from) {
  if (from >= s.size()) return false;
  for (std::size_t i = from; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

bool is_int(const std::string& s) { return all_digits(s, !s.empty() && s[0] == '-' ? 1 : 0); }

// {a..b} or {a..b..step}: the range, or false when `expr` is not one.
bool parse_range(const std::string& expr, Strings& out) {
  std::vector<std::string> f;
  std::size_t start = 0;
  for (std::size_t pos; (pos = expr.find("..", start)) != std::string::npos; start = pos + 2)
    f.push_back(expr.substr(start, pos - start));
  f.push_back(expr.substr(start));
  if (f.size() != 2 && f.size() != 3) return false;
  std::int64_t step = 1;
  if (f.size() == 3) {
    if (!is_int(f[2]) || f[2].size() > 18) return false;  // "-N" is accepted and means N
    step = std::llabs(std::stoll(f[2]));
    if (step == 0) step = 1;
  }
  if (is_int(f[0]) && is_int(f[1]) && f[0].size() < 19 && f[1].size() < 19) {
    const auto leading_zero = [](const std::string& s) {
      return s != "0" && s != "-0" && (s.rfind('0', 0) == 0 || s.rfind("-0", 0) == 0);
    };
    const std::size_t pad = leading_zero(f[0]) || leading_zero(f[1]) ? std::max(f[0].size(), f[1].size()) : 0;
    const std::int64_t a = std::stoll(f[0]);
    const std::int64_t b = std::stoll(f[1]);
    GB_CHECK(std::llabs(b - a) / step < 10'000'000, InvalidArgument,
             "the range {" << expr << "} expands to more than 10 million names", "split the shard list");
    const auto put = [&](std::int64_t v) {
      std::string digits = std::to_string(std::llabs(v));
      const std::size_t width = v < 0 ? (pad > 0 ? pad - 1 : 0) : pad;  // '%0Nd' counts the sign
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out.push_back((v < 0 ? "-" : "") + digits);
    };
    if (a < b) {
      for (std::int64_t v = a; v <= b; v += step) put(v);
    } else {
      for (std::int64_t v = a; v >= b; v -= step) put(v);
    }
    return true;
  }
  const auto letter = [](const std::string& s) {
    return s.size() == 1 && std::isalpha(static_cast<unsigned char>(s[0]));
  };
  if (letter(f[0]) && letter(f[1])) {
    static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const auto a = static_cast<std::int64_t>(alphabet.find(f[0][0]));
    const auto b = static_cast<std::int64_t>(alphabet.find(f[1][0]));
    if (a < b) {
      for (std::int64_t i = a; i <= b; i += step) out.emplace_back(1, alphabet[static_cast<std::size_t>(i)]);
    } else {
      for (std::int64_t i = a; i >= b; i -= step) out.emplace_back(1, alphabet[static_cast<std::size_t>(i)]);
    }
    return true;
  }
  return false;
}

// {a,b,...}: the alternatives, or false when `seq` has no top-level comma (or is unbalanced).
bool parse_sequence(const std::string& seq, const std::string& whole, Strings& out) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t pos = 0; pos < seq.size(); ++pos) {
    if (seq[pos] == '\\') {
      ++pos;
      continue;
    }
    if (seq[pos] == '{') ++depth;
    if (seq[pos] == '}') --depth;
    if (seq[pos] == ',' && depth == 0) {
      parts.push_back(seq.substr(start, pos - start));
      start = pos + 1;
    }
  }
  if (depth != 0 || parts.empty()) return false;
  parts.push_back(seq.substr(start));
  for (const std::string& part : parts) {
    Strings e = parse_pattern(part, whole);
    out.insert(out.end(), e.begin(), e.end());
  }
  return true;
}

Strings parse_pattern(const std::string& p, const std::string& whole) {
  std::vector<Strings> items;
  std::size_t start = 0;
  int depth = 0;
  std::size_t pos = 0;
  for (; pos < p.size(); ++pos) {
    if (p[pos] == '\\') {
      ++pos;
      continue;
    }
    if (p[pos] == '{') {
      if (depth == 0 && pos > start) {
        items.push_back({p.substr(start, pos - start)});
        start = pos;
      }
      ++depth;
    } else if (p[pos] == '}') {
      --depth;
      if (depth == 0) {
        const std::string expr = p.substr(start + 1, pos - start - 1);
        Strings alts;
        if (parse_range(expr, alts) || parse_sequence(expr, whole, alts)) {
          items.push_back(std::move(alts));
        } else {
          items.push_back({"{"});
          items.push_back(parse_pattern(expr, whole));
          items.push_back({"}"});
        }
        start = pos + 1;
      }
    }
  }
  GB_CHECK(depth == 0, InvalidArgument, "unbalanced braces in '" << whole << "'",
           "close every { with a } (write \\{ for a literal brace)");
  if (start < std::min(pos, p.size())) items.push_back({p.substr(start)});
  return product(items);
}

std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out += s[i];
  }
  return out;
}

// ---- reading ----

constexpr std::int64_t kSmallMember = 4096;

struct ReadArchive {
  archive* a = archive_read_new();
  ~ReadArchive() { archive_read_free(a); }
};

std::string archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m != nullptr ? m : "unknown libarchive error";
}

}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern) {
  Strings out = parse_pattern(pattern, pattern);
  for (std::string& s : out) s = unescape(s);
  return out;
}

std::pair<std::string, std::string> split_member_name(const std::string& name) {
  // The first match of ^((?:.*/|)[^.]+)[.]([^/]*)$ in a backtracking engine's order: the prefix
  // ending at a '/' (the last one first, then earlier ones, then none), followed by a non-empty
  // run without '.', a '.', and a suffix without '/'.
  std::vector<std::size_t> starts;
  for (std::size_t k = name.size(); k-- > 0;)
    if (name[k] == '/') starts.push_back(k + 1);
  starts.push_back(0);
  for (const std::size_t start : starts) {
    const std::size_t dot = name.find('.', start);
    if (dot == std::string::npos || dot == start) continue;
    if (name.find('/', dot + 1) != std::string::npos) continue;
    std::string suffix = name.substr(dot + 1);
    for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return {name.substr(0, dot), suffix};
  }
  return {"", ""};
}

const ShardMember* ShardSample::find(const std::string& suffix) const {
  for (const auto& [s, m] : parts)
    if (s == suffix) return &m;
  return nullptr;
}

ShardIndex index_shard(const fs::path& shard) {
  const std::string where = shard.string();
  std::error_code ec;
  GB_CHECK(fs::is_regular_file(shard, ec), NotFound, "the shard " << where << " does not exist",
           "check data.root and the shard pattern (e.g. train-{000000..000009}.tar)");
  const auto file_size = static_cast<std::int64_t>(fs::file_size(shard, ec));
  GB_CHECK(file_size > 0, DataLoss, where << " is empty (0 bytes)", "re-copy or re-pack the shard");
  ReadArchive r;
  archive_read_support_format_tar(r.a);
  archive_read_support_format_gnutar(r.a);
  archive_read_support_filter_all(r.a);
  GB_CHECK(archive_read_open_filename(r.a, shard.c_str(), 1 << 16) == ARCHIVE_OK, DataLoss,
           where << " is not a readable tar file: " << archive_message(r.a), "re-copy or re-pack the shard");
  ShardIndex out;
  out.shard = shard;
  std::string last_name = "(the start)";
  while (true) {
    archive_entry* e = nullptr;
    const int rc = archive_read_next_header(r.a, &e);
    if (rc == ARCHIVE_EOF) break;
    GB_CHECK(rc == ARCHIVE_OK || rc == ARCHIVE_WARN, DataLoss,
             where << ": the tar breaks off after " << last_name << " (" << archive_message(r.a) << ")",
             "the shard is cut short or damaged: re-copy or re-pack it");
    out.compressed = archive_filter_count(r.a) > 1;
    const char* utf8 = archive_entry_pathname_utf8(e);
    const char* raw = archive_entry_pathname(e);
    const std::string name = utf8 != nullptr ? utf8 : raw != nullptr ? raw : "";
    last_name = name;
    if (archive_entry_filetype(e) != AE_IFREG || name.empty()) continue;
    // webdataset's meta members: a top-level __name__, and anything under a first component
    // __x__ (its skip_meta pattern ^__[^/]*__($|/)).
    const std::string first = name.substr(0, name.find('/'));
    if (name.find('/') == std::string::npos && name.rfind("__", 0) == 0 && name.size() >= 2 &&
        name.compare(name.size() - 2, 2, "__") == 0)
      continue;
    if (first.size() >= 4 && first.rfind("__", 0) == 0 && first.compare(first.size() - 2, 2, "__") == 0) continue;
    const auto [key, suffix] = split_member_name(name);
    if (key.empty()) continue;
    ShardMember m;
    m.name = name;
    m.size = archive_entry_size(e);
    if (!out.compressed) {
      m.offset = archive_filter_bytes(r.a, 0);
      GB_CHECK(m.offset + m.size <= file_size, DataLoss,
               where << ": the member " << name << " needs bytes up to " << m.offset + m.size
                     << " but the file ends at " << file_size,
               "the shard is cut short: re-copy or re-pack it");
    }
    if (out.compressed || m.size <= kSmallMember) {
      std::string bytes(static_cast<std::size_t>(m.size), '\0');
      std::int64_t got = 0;
      while (got < m.size) {
        const la_ssize_t n = archive_read_data(r.a, bytes.data() + got, static_cast<std::size_t>(m.size - got));
        GB_CHECK(n > 0, DataLoss,
                 where << ": the member " << name << " breaks off after " << got << " of " << m.size << " bytes"
                       << (n < 0 ? " (" + archive_message(r.a) + ")" : std::string()),
                 "the shard is cut short or damaged: re-copy or re-pack it");
        got += n;
      }
      m.bytes = std::make_shared<const std::string>(std::move(bytes));
    }
    if (out.samples.empty() || out.samples.back().key != key) out.samples.push_back({key, {}});
    ShardSample& s = out.samples.back();
    GB_CHECK(s.find(suffix) == nullptr, DataLoss,
             where << ": " << name << " repeats the member ." << suffix << " of the sample " << key,
             "each sample's members must have distinct suffixes (webdataset refuses this shard too)");
    s.parts.emplace_back(suffix, std::move(m));
  }
  return out;
}

std::string read_member(const fs::path& shard, const ShardMember& member) {
  if (member.bytes) return *member.bytes;
  GB_CHECK(member.offset >= 0, Internal, shard.string() << ": member " << member.name << " has no offset", "");
  return read_file_range(shard, member.offset, member.size, shard.string() + ": the member " + member.name);
}

// ---- writing ----

struct ShardWriter::Archive {
  archive* a = nullptr;
  std::string final_name, partial_name;
  ~Archive() {
    if (a != nullptr) archive_write_free(a);
  }
};

namespace {

// Checks that `pattern` has exactly one integer conversion (%d, %5d, %06d) and no other '%'
// except "%%".
void check_pattern(const std::string& pattern) {
  int conversions = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (i + 1 < pattern.size() && pattern[i + 1] == '%') {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    if (j < pattern.size() && pattern[j] == '0') ++j;
    while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j]))) ++j;
    GB_CHECK(j < pattern.size() && pattern[j] == 'd' && j - i <= 4, InvalidArgument,
             "the shard pattern '" << pattern << "' has a '%' that is not an integer conversion like %06d",
             "number the shards with one %06d, e.g. out/train-%06d.tar");
    ++conversions;
    i = j;
  }
  GB_CHECK(conversions == 1, InvalidArgument,
           "the shard pattern '" << pattern << "' needs exactly one %d-style number, it has " << conversions,
           "e.g. out/train-%06d.tar");
}

}  // namespace

ShardWriter::ShardWriter(std::string pattern, std::int64_t maxcount, double maxsize)
    : pattern_(std::move(pattern)), maxcount_(maxcount), maxsize_(maxsize) {
  check_pattern(pattern_);
  GB_CHECK(maxcount_ >= 1, InvalidArgument, "--maxcount must be >= 1, got " << maxcount_, "e.g. --maxcount 10000");
  GB_CHECK(maxsize_ >= 1, InvalidArgument, "--maxsize must be >= 1 byte, got " << maxsize_, "e.g. --maxsize 1e9");
}

ShardWriter::~ShardWriter() {
  if (closed_) return;
  if (archive_) {
    archive_write_free(archive_->a);
    archive_->a = nullptr;
  }
  std::error_code ec;
  for (const std::string& s : shards_) fs::remove(s + ".partial", ec);
}

std::string ShardWriter::shard_name(std::int64_t k) const {
  std::string out;
  for (std::size_t i = 0; i < pattern_.size(); ++i) {
    if (pattern_[i] != '%') {
      out += pattern_[i];
      continue;
    }
    if (pattern_[i + 1] == '%') {
      out += '%';
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    const bool zero = pattern_[j] == '0';
    if (zero) ++j;
    std::size_t width = 0;
    while (std::isdigit(static_cast<unsigned char>(pattern_[j])))
      width = width * 10 + static_cast<std::size_t>(pattern_[j++] - '0');
    std::string digits = std::to_string(k);
    if (digits.size() < width) digits.insert(0, width - digits.size(), zero ? '0' : ' ');
    out += digits;
    i = j;
  }
  return out;
}

void ShardWriter::finish_shard() {
  if (!archive_) return;
  GB_CHECK(archive_write_close(archive_->a) == ARCHIVE_OK, ResourceExhausted,
           "cannot finish " << archive_->partial_name << ": " << archive_message(archive_->a),
           "check the free space of the output folder");
  archive_.reset();
}

void ShardWriter::next_shard() {
  finish_shard();
  const std::string name = shard_name(static_cast<std::int64_t>(shards_.size()));
  std::error_code ec;
  GB_CHECK(!fs::exists(name, ec), AlreadyExists, "the shard " << name << " already exists",
           "write to an empty folder or another pattern (glassbox never overwrites shards)");
  const fs::path parent = fs::path(name).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  auto ar = std::make_unique<Archive>();
  ar->final_name = name;
  ar->partial_name = name + ".partial";
  ar->a = archive_write_new();
  archive_write_set_format_pax_restricted(ar->a);
  archive_write_add_filter_none(ar->a);
  archive_write_set_bytes_in_last_block(ar->a, 1);
  GB_CHECK(archive_write_open_filename(ar->a, ar->partial_name.c_str()) == ARCHIVE_OK, PermissionDenied,
           "cannot write " << ar->partial_name << ": " << archive_message(ar->a),
           "check that the output folder exists and that you may write to it");
  shards_.push_back(name);
  archive_ = std::move(ar);
  count_ = 0;
  size_ = 0;
}

void ShardWriter::write(const std::string& key, std::vector<std::pair<std::string, std::string>> parts) {
  GB_CHECK(!closed_, FailedPrecondition, "ShardWriter::write after close", "");
  const auto [k, s] = split_member_name(key + ".x");
  GB_CHECK(k == key, InvalidArgument, "the sample key '" << key << "' has a dot in its file name part",
           "webdataset splits keys at the first dot of the file name: use keys without dots");
  if (!archive_ || count_ >= maxcount_ || size_ >= maxsize_) next_shard();
  std::sort(parts.begin(), parts.end());
  double total = 0;
  for (const auto& [suffix, bytes] : parts) {
    const std::string name = key + "." + suffix;
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname_utf8(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0444);
    archive_entry_set_mtime(e, 0, 0);
    const int rc = archive_write_header(archive_->a, e);
    archive_entry_free(e);
    GB_CHECK(rc == ARCHIVE_OK, ResourceExhausted,
             "cannot write " << name << " to " << archive_->partial_name << ": " << archive_message(archive_->a),
             "check the free space of the output folder");
    const la_ssize_t n = archive_write_data(archive_->a, bytes.data(), bytes.size());
    GB_CHECK(n == static_cast<la_ssize_t>(bytes.size()), ResourceExhausted,
             "cannot write " << name << " to " << archive_->partial_name << ": " << archive_message(archive_->a),
             "check the free space of the output folder");
    total += static_cast<double>(bytes.size());
  }
  count_ += 1;
  size_ += total;
}

void ShardWriter::close() {
  if (closed_) return;
  finish_shard();
  for (const std::string& s : shards_) {
    std::error_code ec;
    fs::rename(s + ".partial", s, ec);
    GB_CHECK(!ec, PermissionDenied, "cannot rename " << s << ".partial to " << s << ": " << ec.message(),
             "check the output folder's permissions");
  }
  closed_ = true;
}

}  // namespace glassbox::data
