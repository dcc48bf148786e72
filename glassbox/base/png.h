// PNG encoding and decoding of 8-bit images (libpng's simplified API).
//
//   std::vector<std::uint8_t> rgb(h * w * 3);              // rows contiguous, channels interleaved
//   std::string png = glassbox::encode_png(rgb.data(), w, h, 3);
//   glassbox::write_png("runs/a/sample.png", rgb.data(), w, h, 3);
//   glassbox::DecodedPng img = glassbox::decode_png(png);  // img.pixels == rgb
//
// Pixels are 8-bit, row-major, top row first, `channels` interleaved samples per pixel:
// 1 = gray, 3 = RGB, 4 = RGBA (straight, not premultiplied alpha). Encoding and decoding an
// 8-bit image round-trips exactly. Bad input (zero or huge sizes, other channel counts,
// corrupt PNG bytes) throws glassbox::Error (InvalidArgument / DataLoss).
// Thread safety: reentrant (no shared state).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace glassbox {

struct DecodedPng {
  int width = 0;
  int height = 0;
  int channels = 0;                  // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA (as stored in the file)
  std::vector<std::uint8_t> pixels;  // height * width * channels bytes, top row first
};

// The PNG file bytes of `pixels` (height * width * channels bytes).
std::string encode_png(const std::uint8_t* pixels, int width, int height, int channels);

// encode_png written to `path` atomically (base/files.h); the parent folder is created.
void write_png(const std::filesystem::path& path, const std::uint8_t* pixels, int width, int height, int channels);

// Decodes PNG bytes to 8-bit samples: palette images become RGB(A), 16-bit samples are
// reduced to 8 bits (libpng's sRGB conversion), transparency chunks become an alpha channel.
DecodedPng decode_png(const std::string& bytes);

}  // namespace glassbox
