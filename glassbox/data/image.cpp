// Tested by image_test.cpp.
#include "glassbox/data/image.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/jpeg.h"

namespace glassbox::data {

namespace {

constexpr const char* kBadImageHint =
    "replace or delete the file, or set data.on_bad_image = \"skip\" to leave such files out";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// The container, from the first bytes (for messages and the JPEG end check).
std::string sniff(std::string_view b) {
  if (starts_with(b, "\xFF\xD8\xFF")) return "JPEG";
  if (starts_with(b, "\x89PNG\r\n\x1A\n")) return "PNG";
  if (starts_with(b, "BM")) return "BMP";
  if (starts_with(b, "II*") || starts_with(b, std::string_view("MM\0*", 4))) return "TIFF";
  if (starts_with(b, "RIFF") && b.size() >= 12 && b.substr(8, 4) == "WEBP") return "WebP";
  if (b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6') return "PNM";
  return "";
}

// A JPEG ends with the EOI marker FF D9 (encoders may pad after it with zeros or newlines).
bool jpeg_is_complete(std::string_view b) {
  std::size_t end = b.size();
  while (end > 0 && (b[end - 1] == '\0' || b[end - 1] == '\n' || b[end - 1] == '\r' || b[end - 1] == ' ')) --end;
  return end >= 4 && static_cast<unsigned char>(b[end - 2]) == 0xFF && static_cast<unsigned char>(b[end - 1]) == 0xD9;
}

// SamplesPerPixel of a TIFF's first image (0 when the header cannot be read): OpenCV refuses
// other counts than 1, 3 and 4 without saying why.
int tiff_samples_per_pixel(std::string_view b) {
  if (b.size() < 8) return 0;
  const bool le = b[0] == 'I';
  const auto u16 = [&](std::size_t at) -> std::uint32_t {
    if (at + 2 > b.size()) return 0;
    const auto x = static_cast<unsigned char>(b[at]), y = static_cast<unsigned char>(b[at + 1]);
    return le ? (x | (y << 8)) : ((x << 8) | y);
  };
  const auto u32 = [&](std::size_t at) -> std::uint32_t {
    return le ? (u16(at) | (u16(at + 2) << 16)) : ((u16(at) << 16) | u16(at + 2));
  };
  const std::uint32_t ifd = u32(4);
  const std::uint32_t n = u16(ifd);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::size_t e = ifd + 2 + 12 * static_cast<std::size_t>(i);
    if (u16(e) == 277) return static_cast<int>(u16(e + 8));
  }
  return 1;  // the default of the tag
}

// The checks that need only the first and last bytes of an encoded image: not empty, a known
// signature, a JPEG's end-of-image marker, a PNG's IEND chunk, a TIFF's channel count.
void check_encoded(std::string_view head, std::string_view tail, std::size_t size, const std::string& name) {
  GB_CHECK(size > 0, DataLoss, name << ": empty file (0 bytes), not an image", kBadImageHint);
  const std::string kind = sniff(head);
  GB_CHECK(!kind.empty(), DataLoss,
           name << ": not an image glassbox reads (no JPEG, PNG, BMP, TIFF, WebP or PNM signature in its first bytes)",
           kBadImageHint);
  if (kind == "JPEG") {
    GB_CHECK(jpeg_is_complete(tail), DataLoss,
             name << ": truncated JPEG (" << size << " bytes, no end-of-image marker)", kBadImageHint);
  }
  if (kind == "PNG") {
    GB_CHECK(tail.find("IEND") != std::string_view::npos, DataLoss,
             name << ": truncated PNG (" << size << " bytes, no IEND chunk at the end)", kBadImageHint);
  }
  if (kind == "TIFF") {
    const int spp = tiff_samples_per_pixel(head);
    GB_CHECK(spp == 0 || spp == 1 || spp == 2 || spp == 3 || spp == 4, DataLoss,
             name << ": unsupported channel count " << spp << "; glassbox reads gray, RGB and RGBA images",
             "convert it to gray or RGB (for multispectral tiles: pick three bands)");
  }
}

void check_region(const cv::Rect& r, int height, int width) {
  GB_CHECK(!r.empty() && (r & cv::Rect(0, 0, width, height)) == r, Internal,
           "region x " << r.x << " y " << r.y << " " << r.width << "x" << r.height << " is not inside the " << width
                       << "x" << height << " image",
           "report this as a bug");
}

void quiet_opencv_once() {
  static std::once_flag once;
  // libjpeg's warnings ("Premature end of JPEG file") would otherwise reach stderr from inside
  // OpenCV; the checks here turn the cases that matter into errors naming the file.
  std::call_once(once, [] { cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_ERROR); });
}

}  // namespace

bool is_image_file(const std::filesystem::path& path) {
  static const std::array<std::string_view, 9> kExt = {".jpg",  ".jpeg", ".png", ".bmp", ".tif",
                                                       ".tiff", ".webp", ".pgm", ".ppm"};
  const std::string ext = lower(path.extension().string());
  return std::find(kExt.begin(), kExt.end(), ext) != kExt.end();
}

cv::Mat decode_image(std::string_view bytes, const std::string& name, int channels) {
  quiet_opencv_once();
  GB_CHECK(channels == 0 || channels == 1 || channels == 3, InvalidArgument,
           "image channels must be 0 (as stored), 1 or 3, got " << channels, "set data.channels to 0, 1 or 3");
  check_encoded(bytes, bytes.substr(bytes.size() > 64 ? bytes.size() - 64 : 0), bytes.size(), name);
  const std::string kind = sniff(bytes);
  if (kind == "JPEG" && jpeg_info(bytes)) return convert_channels(decode_jpeg(bytes, name), channels, true);
  cv::Mat raw;
  try {
    const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8UC1,
                         const_cast<void*>(static_cast<const void*>(bytes.data())));
    raw = cv::imdecode(buffer, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    GB_THROW(DataLoss, name << ": corrupt " << kind << " (" << e.err << ")", kBadImageHint);
  }
  if (raw.empty() && kind == "TIFF") {
    const int spp = tiff_samples_per_pixel(bytes);
    GB_CHECK(spp == 0 || spp == 1 || spp == 3 || spp == 4, DataLoss,
             name << ": unsupported channel count " << spp << "; glassbox reads gray, RGB and RGBA images",
             "convert it to gray or RGB (for multispectral tiles: pick three bands)");
  }
  GB_CHECK(!raw.empty(), DataLoss, name << ": corrupt or truncated " << kind << " (" << bytes.size() << " bytes)",
           kBadImageHint);
  GB_CHECK(raw.dims == 2 && raw.rows > 0 && raw.cols > 0, DataLoss, name << ": an image with no pixels", kBadImageHint);

  cv::Mat img;
  switch (raw.depth()) {
    case CV_8U: img = raw; break;
    case CV_16U: raw.convertTo(img, CV_8U, 1.0 / 257.0); break;  // 65535 -> 255, rounded
    default:
      GB_THROW(DataLoss,
               name << ": unsupported sample type (" << cv::typeToString(raw.type())
                    << "); glassbox reads 8- and 16-bit integer images",
               "convert it to an 8- or 16-bit PNG or TIFF");
  }
  const int c = img.channels();
  GB_CHECK(c == 1 || c == 3 || c == 4, DataLoss,
           name << ": unsupported channel count " << c << "; glassbox reads gray, RGB and RGBA images",
           "convert it to gray or RGB");
  cv::Mat out = convert_channels(img, channels, false);
  if (out.data == raw.data) out = out.clone();  // never alias OpenCV's decode buffer by accident
  return out;
}

cv::Mat decode_image_region(std::string_view bytes, const std::string& name, int channels,
                            const std::function<cv::Rect(int height, int width)>& pick) {
  if (sniff(bytes) == "JPEG") {
    if (const std::optional<JpegInfo> info = jpeg_info(bytes)) {
      check_encoded(bytes, bytes.substr(bytes.size() > 64 ? bytes.size() - 64 : 0), bytes.size(), name);
      GB_CHECK(info->width > 0 && info->height > 0, DataLoss, name << ": an image with no pixels", kBadImageHint);
      const cv::Rect r = pick(info->height, info->width);
      check_region(r, info->height, info->width);
      return convert_channels(decode_jpeg(bytes, name, r), channels, true);
    }
  }
  const cv::Mat whole = decode_image(bytes, name, channels);
  const cv::Rect r = pick(whole.rows, whole.cols);
  check_region(r, whole.rows, whole.cols);
  return whole(r);
}

cv::Mat convert_channels(const cv::Mat& img, int channels, bool rgb) {
  const int c = img.channels();
  cv::Mat out;
  if (c == 1) {
    if (channels == 3) {
      cv::cvtColor(img, out, cv::COLOR_GRAY2RGB);
    } else {
      out = img;
    }
  } else if (channels == 1) {
    cv::cvtColor(
        img, out,
        c == 4 ? (rgb ? cv::COLOR_RGBA2GRAY : cv::COLOR_BGRA2GRAY) : (rgb ? cv::COLOR_RGB2GRAY : cv::COLOR_BGR2GRAY));
  } else if (rgb) {
    out = img;
    if (c == 4) cv::cvtColor(img, out, cv::COLOR_RGBA2RGB);
  } else {
    cv::cvtColor(img, out, c == 4 ? cv::COLOR_BGRA2RGB : cv::COLOR_BGR2RGB);
  }
  return out;
}

std::string read_encoded(const ImageRef& ref) {
  if (ref.bytes) return *ref.bytes;
  if (ref.offset >= 0) return read_file_range(ref.file, ref.offset, ref.size, ref.name());
  return read_file(ref.file);
}

cv::Mat read_image(const std::filesystem::path& path, int channels) {
  return decode_image(read_file(path), path.string(), channels);
}

void check_image(const ImageRef& ref) {
  if (ref.bytes) {
    const std::string_view b(*ref.bytes);
    check_encoded(b, b.substr(b.size() > 64 ? b.size() - 64 : 0), b.size(), ref.name());
    return;
  }
  std::error_code ec;
  const std::int64_t size =
      ref.offset >= 0 ? ref.size : static_cast<std::int64_t>(std::filesystem::file_size(ref.file, ec));
  GB_CHECK(!ec, NotFound, "cannot read " << ref.name() << ": " << ec.message(),
           "check that it exists and that you may read it");
  const std::int64_t base = ref.offset >= 0 ? ref.offset : 0;
  const std::int64_t head_n = std::min<std::int64_t>(size, 4096);  // the signature and, usually, a TIFF's first IFD
  const std::int64_t tail_n = std::min<std::int64_t>(size, 64);
  const std::string head = size > 0 ? read_file_range(ref.file, base, head_n, ref.name()) : std::string();
  const std::string tail =
      size > 0 ? read_file_range(ref.file, base + size - tail_n, tail_n, ref.name()) : std::string();
  check_encoded(head, tail, static_cast<std::size_t>(size), ref.name());
}

cv::Mat read_image(const ImageRef& ref, int channels) { return decode_image(read_encoded(ref), ref.name(), channels); }

at::Tensor image_to_tensor(const cv::Mat& image) {
  GB_CHECK(image.depth() == CV_8U && image.dims == 2, InvalidArgument,
           "image_to_tensor needs an 8-bit image, got " << cv::typeToString(image.type()), "decode it with read_image");
  const cv::Mat c = image.isContinuous() ? image : image.clone();
  const at::Tensor hwc =
      torch::from_blob(c.data, {c.rows, c.cols, c.channels()}, torch::kUInt8);  // borrows c while permuting
  return hwc.permute({2, 0, 1}).contiguous();
}

cv::Mat tensor_to_image(const at::Tensor& chw) {
  GB_CHECK(chw.dim() == 3 && chw.scalar_type() == torch::kUInt8, InvalidArgument,
           "tensor_to_image needs a [C, H, W] uint8 tensor", "convert it with .to(torch::kUInt8)");
  const at::Tensor hwc = chw.permute({1, 2, 0}).contiguous().cpu();
  const int c = static_cast<int>(hwc.size(2));
  cv::Mat out(static_cast<int>(hwc.size(0)), static_cast<int>(hwc.size(1)), CV_8UC(c));
  std::memcpy(out.data, hwc.data_ptr(), static_cast<std::size_t>(hwc.numel()));
  return out;
}

namespace {

std::string encode(const cv::Mat& image, const char* ext, const std::vector<int>& params) {
  cv::Mat bgr;  // a new matrix: converting into a copy of `image`'s header would swap its channels in place
  if (image.channels() == 3)
    cv::cvtColor(image, bgr, cv::COLOR_RGB2BGR);
  else
    bgr = image;
  std::vector<unsigned char> buf;
  GB_CHECK(cv::imencode(ext, bgr, buf, params), Internal, "OpenCV could not encode a " << ext << " image", "");
  return std::string(buf.begin(), buf.end());
}

}  // namespace

std::string encode_png(const cv::Mat& image) { return encode(image, ".png", {}); }

std::string encode_jpeg(const cv::Mat& image, int quality) {
  return encode(image, ".jpg", {cv::IMWRITE_JPEG_QUALITY, quality});
}

void use_single_threaded_opencv() {
  static std::once_flag once;
  std::call_once(once, [] { cv::setNumThreads(0); });
}

}  // namespace glassbox::data
