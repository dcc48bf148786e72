// webdataset: tar shards in the WebDataset layout, read through an index and written in shards.
//
//   for (const auto& url : expand_braces("data/train-{000000..000009}.tar")) ...  // 10 shard names
//   ShardIndex ix = index_shard("data/train-000000.tar");
//   const ShardMember* jpg = ix.samples[0].find("jpg");
//   std::string bytes = read_member(ix.shard, *jpg);
//
//   ShardWriter w("out/train-%06d.tar", /*maxcount=*/1000, /*maxsize=*/1e9);
//   w.write("cat/0001", {{"jpg", jpeg_bytes}, {"cls", "3"}});
//   w.close();   // the shards appear under their names only now (written as NAME.partial first)
//
// Grouping follows Python's webdataset 1.0: regular-file members in tar order; a member's key is
// its path up to the first dot of its file name and its suffix the rest, lowercased (the regular
// expression ^((?:.*/|)[^.]+)[.]([^/]*)$; names it does not match are ignored, as are meta
// members __name__); consecutive members with one key form a sample; a suffix seen twice in one
// sample is an error. Grouping restarts at each shard.
// Reading: the tar is read by libarchive (any tar flavour: ustar, pax, GNU long names; gzip, xz,
// zstd and bzip2 compression). An uncompressed shard is indexed by its members' byte offsets
// and read back with positioned reads, so samples are random access at no memory cost; members
// of a compressed shard are held in memory. Small members (4 KiB or less: labels, JSON) are
// always kept in the index. A member running past the end of the file (a shard cut short) or a
// tar error is a DataLoss naming the shard and the member.
// Writing: ShardWriter follows webdataset's ShardWriter: shard k is pattern % k from k = 0; a new
// shard starts before a sample when the current one holds maxcount samples or maxsize bytes of
// member data. Members are written in sorted suffix order, as KEY.SUFFIX (pax headers where a
// name needs them), mode 0444, mtime 0 so equal input gives equal shards.
// Thread safety: free functions are reentrant; a ShardWriter is used by one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace glassbox::data {

// Python braceexpand's expansion: {a,b} alternatives (nested), {0..9} and {000..099} integer
// ranges (zero-padded to the wider bound when a bound has a leading zero), {a..e} letter ranges,
// an optional step ({0..10..2}), backslash escapes. InvalidArgument on unbalanced braces.
std::vector<std::string> expand_braces(const std::string& pattern);

// Key and lowercased suffix of a member name as webdataset splits it; {"", ""} when it does not.
std::pair<std::string, std::string> split_member_name(const std::string& name);

struct ShardMember {
  std::string name;                          // the member's path inside the tar
  std::int64_t offset = -1;                  // its bytes in the shard file (uncompressed shards)
  std::int64_t size = 0;                     // bytes
  std::shared_ptr<const std::string> bytes;  // the bytes themselves when held (small or compressed)
};

struct ShardSample {
  std::string key;
  std::vector<std::pair<std::string, ShardMember>> parts;  // (suffix, member) in tar order
  const ShardMember* find(const std::string& suffix) const;
};

struct ShardIndex {
  std::filesystem::path shard;
  bool compressed = false;
  std::vector<ShardSample> samples;
};

// Reads a shard's headers (and its small members) into an index.
ShardIndex index_shard(const std::filesystem::path& shard);

// A member's bytes: held ones as they are, others read from the shard at their offset.
std::string read_member(const std::filesystem::path& shard, const ShardMember& member);

class ShardWriter {
 public:
  // pattern: one printf integer conversion (%d, %06d, ...) numbering the shards.
  ShardWriter(std::string pattern, std::int64_t maxcount = 100000, double maxsize = 3e9);
  ~ShardWriter();  // an unclosed writer removes what it wrote (a failed pack leaves nothing)
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // One sample: its key (no dot in its file name part) and its members as (suffix, bytes).
  void write(const std::string& key, std::vector<std::pair<std::string, std::string>> parts);
  // Finishes the last shard and gives every shard its final name.
  void close();
  const std::vector<std::string>& shards() const { return shards_; }
  // The name of shard k.
  std::string shard_name(std::int64_t k) const;

 private:
  void next_shard();
  void finish_shard();

  std::string pattern_;
  std::int64_t maxcount_;
  double maxsize_;
  std::int64_t count_ = 0;
  double size_ = 0;
  std::vector<std::string> shards_;
  struct Archive;
  std::unique_ptr<Archive> archive_;
  bool closed_ = false;
};

}  // namespace glassbox::data
