#include "glassbox/base/png.h"

#include <png.h>

#include <cstring>
#include <limits>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox {
namespace {

// Larger images are refused: libpng's row stride is a 32-bit int, and a side of 65536 pixels is
// far beyond any diagnostic image.
constexpr int kMaxSide = 1 << 16;
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 31;

png_uint_32 format_of(int channels) {
  switch (channels) {
    case 1: return PNG_FORMAT_GRAY;
    case 2: return PNG_FORMAT_GA;
    case 3: return PNG_FORMAT_RGB;
    case 4: return PNG_FORMAT_RGBA;
    default: return 0;
  }
}

void check_shape(int width, int height, int channels) {
  GB_CHECK(channels == 1 || channels == 3 || channels == 4, InvalidArgument,
           "PNG: unsupported channel count " << channels,
           "pass 1 (gray), 3 (RGB) or 4 (RGBA) interleaved 8-bit channels");
  GB_CHECK(width > 0 && height > 0 && width <= kMaxSide && height <= kMaxSide, InvalidArgument,
           "PNG: bad image size " << width << "x" << height, "pass a width and height between 1 and 65536");
  GB_CHECK(
      static_cast<std::uint64_t>(width) * static_cast<std::uint64_t>(height) * static_cast<std::uint64_t>(channels) <
          kMaxBytes,
      InvalidArgument, "PNG: image " << width << "x" << height << "x" << channels << " is too large",
      "downscale the image below 2 GiB of pixels");
}

}  // namespace

std::string encode_png(const std::uint8_t* pixels, int width, int height, int channels) {
  check_shape(width, height, channels);
  GB_CHECK(pixels != nullptr, InvalidArgument, "PNG: null pixel buffer", "pass height * width * channels bytes");
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = format_of(channels);
  std::string out(PNG_IMAGE_PNG_SIZE_MAX(image), '\0');
  png_alloc_size_t size = out.size();
  if (png_image_write_to_memory(&image, out.data(), &size, /*convert_to_8_bit=*/0, pixels, /*row_stride=*/0,
                                /*colormap=*/nullptr) == 0) {
    const std::string message = image.message;
    png_image_free(&image);
    GB_THROW(Internal,
             "PNG: libpng failed to encode a " << width << "x" << height << "x" << channels << " image: " << message,
             "report this as a bug");
  }
  out.resize(size);
  return out;
}

void write_png(const std::filesystem::path& path, const std::uint8_t* pixels, int width, int height, int channels) {
  write_file_atomic(path, encode_png(pixels, width, height, channels));
}

DecodedPng decode_png(const std::string& bytes) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()) == 0) {
    const std::string message = image.message;
    png_image_free(&image);
    GB_THROW(DataLoss, "PNG: cannot read " << bytes.size() << " bytes as PNG: " << message,
             "pass the bytes of a complete PNG file");
  }
  const bool color = (image.format & PNG_FORMAT_FLAG_COLOR) != 0;
  const bool alpha = (image.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  DecodedPng out;
  out.channels = (color ? 3 : 1) + (alpha ? 1 : 0);
  image.format = format_of(out.channels);  // 8-bit, no colour map
  if (image.width > static_cast<png_uint_32>(kMaxSide) || image.height > static_cast<png_uint_32>(kMaxSide) ||
      static_cast<std::uint64_t>(PNG_IMAGE_SIZE(image)) >= kMaxBytes) {
    const png_uint_32 w = image.width, h = image.height;
    png_image_free(&image);
    GB_THROW(InvalidArgument, "PNG: image " << w << "x" << h << " is too large to decode",
             "decode images up to 65536 pixels a side");
  }
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  out.pixels.resize(PNG_IMAGE_SIZE(image));
  if (png_image_finish_read(&image, /*background=*/nullptr, out.pixels.data(), /*row_stride=*/0,
                            /*colormap=*/nullptr) == 0) {
    const std::string message = image.message;
    png_image_free(&image);
    GB_THROW(DataLoss, "PNG: corrupt image data (" << bytes.size() << " bytes): " << message,
             "pass the bytes of a complete, undamaged PNG file");
  }
  return out;
}

}  // namespace glassbox
