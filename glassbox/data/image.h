// image: decoding image files into 8-bit HWC matrices in RGB order (libjpeg-turbo directly for
// JPEG, see jpeg.h; OpenCV for the rest).
//
//   cv::Mat rgb = read_image("leaves/healthy/001.jpg", 3);   // CV_8UC3, RGB order
//   cv::Mat g = decode_image(bytes, "shard-0/42.png", 1);    // CV_8UC1 (colour converted to gray)
//   at::Tensor t = image_to_tensor(rgb);                     // [3, H, W] uint8
//
// What is read: JPEG, PNG, BMP, TIFF, WebP, PGM/PPM (what `is_image_file` accepts, by extension,
// case-insensitively); 8- or 16-bit samples (16-bit is scaled to 8 bits: round(v / 257)); gray,
// gray + alpha, RGB and RGBA (alpha is dropped). OpenCV's BGR order never leaves this file: every
// 3-channel matrix here is RGB.
// `channels`: 1 converts to gray (ITU-R 601 weights, as PIL's convert("L") and OpenCV), 3 to RGB
// (a gray image is replicated), 0 keeps the file's own (gray stays 1, colour becomes 3).
// Errors (DataLoss, naming the file): an empty file, a file that does not decode, a JPEG cut
// short (no end-of-image marker, which libjpeg would pad with grey), an unsupported sample type or
// channel count.
// Thread safety: free functions; safe to call from several threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <ATen/core/Tensor.h>
#include <opencv2/core/mat.hpp>

namespace glassbox::data {

// True for the extensions read here: .jpg .jpeg .png .bmp .tif .tiff .webp .pgm .ppm (any case).
bool is_image_file(const std::filesystem::path& path);

// Where an image's encoded bytes are: a file of its own, a byte range of a file (a member of an
// uncompressed tar shard), or bytes held in memory (a member of a compressed shard).
struct ImageRef {
  ImageRef() = default;
  ImageRef(std::filesystem::path f) : file(std::move(f)) {}  // NOLINT(google-explicit-constructor)
  std::filesystem::path file;                                // the image file, or the shard holding it
  std::string member;                                        // the tar member's name; empty for a file of its own
  std::int64_t offset = -1;                                  // >= 0: the bytes are [offset, offset + size) of `file`
  std::int64_t size = 0;
  std::shared_ptr<const std::string> bytes;  // when set: the encoded image itself
  // How messages name it: "leaves/a/1.jpg" or "shards/train-000003.tar: a/1.jpg".
  std::string name() const { return member.empty() ? file.string() : file.string() + ": " + member; }
  bool operator==(const ImageRef& o) const = default;
};

// The encoded bytes of an image (NotFound / DataLoss errors name it).
std::string read_encoded(const ImageRef& ref);
// The checks that need only an image's first 4 KiB and last 64 bytes: DataLoss naming it
// when it is empty, has no known signature, is a JPEG without its end-of-image marker or a PNG
// without its IEND chunk (both: cut short), or a TIFF with an unsupported channel count.
void check_image(const ImageRef& ref);
// Reads and decodes an image wherever it lies, or a file.
cv::Mat read_image(const ImageRef& ref, int channels = 0);
cv::Mat read_image(const std::filesystem::path& path, int channels = 0);

// Decodes an encoded image held in memory; `name` is the file or member it came from, for errors.
cv::Mat decode_image(std::string_view bytes, const std::string& name, int channels = 0);

// Decodes the rectangle `pick(height, width)` chooses (it must lie inside the image) and nothing
// more where the format allows it (JPEG: jpeg.h), otherwise decodes whole and crops: either way the
// pixels decode_image gives there. For a pipeline led by a RegionStep (augment.h). A corrupt stretch
// of a JPEG outside the rectangle may go unnoticed.
cv::Mat decode_image_region(std::string_view bytes, const std::string& name, int channels,
                            const std::function<cv::Rect(int height, int width)>& pick);

// decode_image's channel step on a decoded 8-bit image of 1, 3 or 4 channels, in RGB(A) order
// when `rgb`, otherwise OpenCV's BGR(A): to `channels` (0: 1 stays 1, else RGB).
cv::Mat convert_channels(const cv::Mat& img, int channels, bool rgb);

// [C, H, W] uint8 (a copy) from an 8-bit HWC matrix, and back.
at::Tensor image_to_tensor(const cv::Mat& image);
cv::Mat tensor_to_image(const at::Tensor& chw);

// PNG bytes of an 8-bit HWC matrix in RGB (or gray) order.
std::string encode_png(const cv::Mat& image);
// JPEG bytes (quality 1-100) of an 8-bit HWC matrix in RGB (or gray) order.
std::string encode_jpeg(const cv::Mat& image, int quality = 95);

// Makes OpenCV run each call on the calling thread: loader workers are the parallelism, and
// OpenCV's own pool inside them would only oversubscribe the cores. Idempotent.
void use_single_threaded_opencv();

}  // namespace glassbox::data
