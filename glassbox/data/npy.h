// NumPy .npy files: read arrays written by np.save, write arrays np.load reads.
//
//   at::Tensor x = read_npy("train_x.npy");        // e.g. [N, 784] float32
//   write_npy(run_dir / "predictions.npy", probs);  // atomic: temp file + rename
//
// Reads format versions 1.0, 2.0 and 3.0; dtypes b1 i1 u1 i2 i4 i8 f2 f4 f8 in little-endian or
// '|' byte order (u2 and u4 are widened to int32 / int64, u8 to int64 when every value fits).
// fortran_order True is read and returned in C order (same shape, same values). Big-endian
// arrays, structured, string, object and complex dtypes are refused with a hint. The data must
// be exactly as long as the header's shape says (DataLoss otherwise, naming the file).
// Writes version 1.0 (2.0 when the header needs it), C order, little-endian.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace glassbox::data {

// Reads a .npy file into a CPU tensor.
at::Tensor read_npy(const std::filesystem::path& path);

// Decodes .npy bytes; `source` names the data in error messages.
at::Tensor decode_npy(std::string_view bytes, const std::string& source);

// Encodes a tensor (bool, uint8, int8, int16, int32, int64, float16, float32, float64,
// uint16/32/64) as .npy bytes.
std::string encode_npy(const at::Tensor& tensor);

// Writes `tensor` to `path` atomically.
void write_npy(const std::filesystem::path& path, const at::Tensor& tensor);

}  // namespace glassbox::data
