// Private to serve/engine: moving tensors between the wire (api.h's Tensor: little-endian,
// row-major bytes; BYTES as 4-byte length + bytes per element) and LibTorch.
//
//   c10::ScalarType t = torch_dtype(triton::TYPE_FP32);                       // at::kFloat
//   at::Tensor x = gather_input(items, 0, t, /*batched=*/true, "m", "INPUT__0");  // [sum of batch sizes, ...]
//   std::vector<Tensor> per_item = split_output(y, "OUTPUT__0", DataType::kFp32, sizes, {});
//
// gather_input copies each request's bytes once, into one tensor allocated for the whole batch;
// split_output hands out views of one contiguous CPU tensor (each view's owner keeps it alive).
// Thread safety: free functions, reentrant. Callers include this header from .cpp files only
// (it names LibTorch types; the precompiled header provides them).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>

#include "glassbox/export/model_config.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/engine/backend.h"

namespace glassbox::serve::detail {

// The config's data type as api.h's DataType (TYPE_STRING -> kBytes).
DataType serve_datatype(exporter::triton::DataType type);
// The LibTorch dtype of a config data type; nullopt for TYPE_STRING (List[str]) and TYPE_INVALID.
// UINT16/32/64 map to LibTorch's unsigned types (2.3+: storage, copies and comparisons work;
// most arithmetic kernels do not).
std::optional<c10::ScalarType> torch_dtype(exporter::triton::DataType type);
// "TYPE_FP32 (float)" style text for messages: the config name of a LibTorch dtype, or its name.
std::string dtype_text(c10::ScalarType type);

// Input `index` of every item, concatenated along axis 0 (batched) or the single item's tensor
// (not batched): allocated once, each item's bytes copied in at its offset. InvalidArgument naming
// the model and input when an item's byte size does not match its shape or the non-batch shapes
// differ between items.
at::Tensor gather_input(std::span<const BatchItem> items, std::size_t index, c10::ScalarType dtype, bool batched,
                        const std::string& model, const std::string& input);

// BYTES input `index` of every item as one flat list of strings (items in order, row-major).
// InvalidArgument when an element's length runs past the end, bytes are left over, or the element
// count differs from the shape.
c10::List<std::string> gather_strings(std::span<const BatchItem> items, std::size_t index, const std::string& model,
                                      const std::string& input);
// Parses `count` serialized elements (4-byte little-endian length, then the bytes); `what` names
// the tensor in errors.
std::vector<std::string> parse_strings(std::span<const std::uint8_t> bytes, std::int64_t count,
                                       const std::string& what);
// Serializes elements [begin, end) of `values`.
std::string serialize_strings(const c10::List<std::string>& values, std::size_t begin, std::size_t end);

// Splits `t` (contiguous, on the CPU; [total, ...] when batch_sizes.size() > 1 or batched) into
// one view per batch size, each [batch_size, ...sample_dims]. `sample_dims` empty: the tensor's
// own dims after axis 0. Not batched (`batched` false): one view of the whole tensor, shape
// `sample_dims` or the tensor's.
std::vector<Tensor> split_output(const at::Tensor& t, const std::string& name, DataType type,
                                 std::span<const std::int64_t> batch_sizes, bool batched,
                                 std::span<const std::int64_t> sample_dims);

// `dims` with its single -1 (if any) resolved so that the product is `elements`; nullopt when
// that is impossible (two -1s, or a product that does not divide).
std::optional<std::vector<std::int64_t>> resolve_dims(std::span<const std::int64_t> dims, std::int64_t elements);
// True when `actual` has the rank of `expected` and equal sizes where `expected` is not -1.
bool dims_match(std::span<const std::int64_t> expected, std::span<const std::int64_t> actual);

// The line of an exception that says what went wrong: LibTorch errors without their C++
// backtrace; for TorchScript interpreter errors (a traceback) the last line.
std::string error_summary(const std::exception& e);

}  // namespace glassbox::serve::detail
