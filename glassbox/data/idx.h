// IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed.
//
//   at::Tensor images = read_idx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
//   // images: [60000, 28, 28] uint8
//   write_idx(dir / "labels-idx1-ubyte.gz", labels, /*gzip=*/true);
//
// Format: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
// 0x0E float64), the number of dimensions (1..4), one big-endian uint32 per dimension, then the
// data in row-major order, multi-byte values big-endian. A file whose data is shorter or longer
// than the product of its dimensions is rejected (DataLoss), as are corrupt gzip streams; every
// error names the file and what is wrong.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace glassbox::data {

// Reads an IDX file; gzip is detected by its magic bytes (1f 8b), not by the file name.
// Returns a CPU tensor of the file's dtype and shape.
at::Tensor read_idx(const std::filesystem::path& path);

// Decodes IDX bytes (already decompressed); `source` names the data in error messages.
at::Tensor decode_idx(std::string_view bytes, const std::string& source);

// Encodes a tensor (uint8, int8, int16, int32, float32, float64; 1..4 dims) as IDX bytes.
std::string encode_idx(const at::Tensor& tensor);

// Writes `tensor` as an IDX file atomically, gzip-compressed when `gzip` is true.
void write_idx(const std::filesystem::path& path, const at::Tensor& tensor, bool gzip = false);

// The whole file, decompressed when it starts with the gzip magic (1f 8b). DataLoss on a corrupt
// or truncated gzip stream, NotFound when the file is missing.
std::string read_file_maybe_gzip(const std::filesystem::path& path);

// gzip compression (for fixtures and exports); `level` as zlib's (1..9, -1 default).
std::string gzip_compress(std::string_view data, int level = -1);

}  // namespace glassbox::data
