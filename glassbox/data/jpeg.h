// jpeg: JPEG decoding straight through libjpeg-turbo, whole or one region.
//
//   if (auto info = jpeg_info(bytes)) {                       // nullopt: leave it to OpenCV
//     cv::Mat all = decode_jpeg(bytes, "leaf.jpg");           // RGB (or gray) HWC uint8
//     cv::Mat part = decode_jpeg(bytes, "leaf.jpg", cv::Rect(40, 10, 200, 150));
//   }
//
// The pixels are the very ones OpenCV's imdecode gives (the same libjpeg-turbo, the same islow
// IDCT and fancy upsampling), in RGB order without OpenCV's BGR round trip, which makes a whole
// decode faster. A region decode is bit-identical to cropping the whole decode: rows above the
// region are entropy-decoded only (jpeg_skip_scanlines), rows below it not at all, and the
// inverse DCT and colour conversion run on the region's columns (jpeg_crop_scanline), widened by
// one MCU on each side so that chroma upsampling sees the same neighbours as in a whole decode.
// This is what lets the loader decode only the part of a photograph a RandomResizedCrop keeps.
// Handled here: 8-bit baseline and progressive JPEGs with one (gray) or three (YCbCr or RGB)
// components; anything else (CMYK, YCCK, 12-bit) gets nullopt from jpeg_info.
// Thread safety: every call has its own decoder state.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <opencv2/core/mat.hpp>

namespace glassbox::data {

struct JpegInfo {
  int width = 0;
  int height = 0;
  int channels = 0;  // what a decode gives: 1 (gray) or 3 (RGB)
};

// The header of a JPEG this module decodes; nullopt when it is not a JPEG, its header does not
// parse, or it is of a kind left to OpenCV.
std::optional<JpegInfo> jpeg_info(std::string_view bytes);

// Decodes the whole image, or only `region` (clipped to the image; must not be empty), into
// CV_8UC3 RGB or CV_8UC1. A region may come back as a view into a slightly wider buffer (rows not
// contiguous). DataLoss naming `name` for data libjpeg cannot decode.
cv::Mat decode_jpeg(std::string_view bytes, const std::string& name, std::optional<cv::Rect> region = std::nullopt);

}  // namespace glassbox::data
