// Tested by image_test.cpp (against OpenCV's imdecode, whole and by region, across chroma
// subsamplings, progressive and restart-marker files, odd sizes and gray).
#include "glassbox/data/jpeg.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "glassbox/base/error.h"

#if !defined(LIBJPEG_TURBO_VERSION_NUMBER) || LIBJPEG_TURBO_VERSION_NUMBER < 2000000
#error \
    "glassbox needs libjpeg-turbo 2.0 or newer (jpeg_crop_scanline, jpeg_skip_scanlines): install libjpeg62-turbo-dev"
#endif

namespace glassbox::data {

namespace {

// libjpeg reports a fatal error through error_exit, which must not return: it jumps back to the
// setjmp of the call that is running. Only plain data lives in the frames between the two (the
// functions below), so the jump skips no destructor.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<ErrorManager*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (corrupt data libjpeg can decode around, extra bytes after the image) are ignored, as
// OpenCV's decoder ignores them; a file cut short is caught before decoding, by its end marker.
void on_message(j_common_ptr, int) {}

struct Decoder {
  jpeg_decompress_struct info{};
  ErrorManager error{};
  bool created = false;

  Decoder() {
    info.err = jpeg_std_error(&error.pub);
    error.pub.error_exit = on_error;
    error.pub.emit_message = on_message;
    error.message[0] = '\0';
  }
  ~Decoder() {
    if (created) jpeg_destroy_decompress(&info);
  }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
};

// Reads the header; false (with error.message set, or empty for "not a kind handled here") when
// the decode should not go on.
bool read_header(Decoder& d, std::string_view bytes) {
  if (setjmp(d.error.jump)) return false;
  jpeg_create_decompress(&d.info);
  d.created = true;
  jpeg_mem_src(&d.info, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d.info, TRUE);
  const J_COLOR_SPACE cs = d.info.jpeg_color_space;
  const bool gray = d.info.num_components == 1 && cs == JCS_GRAYSCALE;
  const bool color = d.info.num_components == 3 && (cs == JCS_YCbCr || cs == JCS_RGB);
  if (!gray && !color) return false;
  d.info.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  d.info.dct_method = JDCT_ISLOW;
  d.info.do_fancy_upsampling = TRUE;
  return true;
}

struct Plan {
  JDIMENSION x_offset = 0;  // first decoded column (an MCU boundary at or left of the region)
  JDIMENSION width = 0;     // decoded columns
};

// Starts the decompressor and narrows it to the columns [x0, x1) widened by one MCU each side.
bool start(Decoder& d, int x0, int x1, Plan& plan) {
  if (setjmp(d.error.jump)) return false;
  jpeg_start_decompress(&d.info);
  const int image_w = static_cast<int>(d.info.output_width);
  if (x0 > 0 || x1 < image_w) {
    const int mcu_w = d.info.max_h_samp_factor * DCTSIZE;
    const int left = std::max(0, x0 - mcu_w);
    const int right = std::min(image_w, x1 + mcu_w);
    plan.x_offset = static_cast<JDIMENSION>(left);
    plan.width = static_cast<JDIMENSION>(right - left);
    if (left > 0 || right < image_w) jpeg_crop_scanline(&d.info, &plan.x_offset, &plan.width);
  } else {
    plan.x_offset = 0;
    plan.width = d.info.output_width;
  }
  return true;
}

// Decodes rows [y0, y1) into `rows` (one pointer per row, each of the planned width).
bool read_rows(Decoder& d, int y0, int y1, unsigned char** rows) {
  if (setjmp(d.error.jump)) return false;
  if (y0 > 0) jpeg_skip_scanlines(&d.info, static_cast<JDIMENSION>(y0));
  int done = 0;
  while (done < y1 - y0) {
    const JDIMENSION got = jpeg_read_scanlines(&d.info, reinterpret_cast<JSAMPARRAY>(rows + done),
                                               static_cast<JDIMENSION>(y1 - y0 - done));
    if (got == 0) break;  // suspended: cannot happen with a memory source, but never spin
    done += static_cast<int>(got);
  }
  if (static_cast<JDIMENSION>(y1) == d.info.output_height) {
    jpeg_finish_decompress(&d.info);
  } else {
    jpeg_abort_decompress(&d.info);  // the rows below the region are never decoded
  }
  return done == y1 - y0;
}

}  // namespace

std::optional<JpegInfo> jpeg_info(std::string_view bytes) {
  if (bytes.size() < 4 || static_cast<unsigned char>(bytes[0]) != 0xFF || static_cast<unsigned char>(bytes[1]) != 0xD8)
    return std::nullopt;
  Decoder d;
  if (!read_header(d, bytes)) return std::nullopt;
  if (d.info.data_precision != 8) return std::nullopt;
  JpegInfo out;
  out.width = static_cast<int>(d.info.image_width);
  out.height = static_cast<int>(d.info.image_height);
  out.channels = d.info.out_color_space == JCS_GRAYSCALE ? 1 : 3;
  return out;
}

cv::Mat decode_jpeg(std::string_view bytes, const std::string& name, std::optional<cv::Rect> region) {
  Decoder d;
  const auto fail = [&](const char* what) {
    GB_THROW(DataLoss,
             name << ": corrupt JPEG (" << bytes.size() << " bytes): " << (d.error.message[0] ? d.error.message : what),
             "replace or delete the file, or set data.on_bad_image = \"skip\" to leave such files out");
  };
  if (!read_header(d, bytes)) fail("not a gray, YCbCr or RGB JPEG");
  GB_CHECK(d.info.image_width > 0 && d.info.image_height > 0, DataLoss, name << ": an image with no pixels",
           "replace or delete the file");
  const int w = static_cast<int>(d.info.image_width), h = static_cast<int>(d.info.image_height);
  cv::Rect r = region.value_or(cv::Rect(0, 0, w, h)) & cv::Rect(0, 0, w, h);
  GB_CHECK(!r.empty(), InvalidArgument, name << ": the region to decode lies outside the " << w << "x" << h << " image",
           "pass a region inside it");
  Plan plan;
  if (!start(d, r.x, r.x + r.width, plan)) fail("the decoder did not start");
  const int channels = d.info.out_color_space == JCS_GRAYSCALE ? 1 : 3;
  cv::Mat buffer(r.height, static_cast<int>(plan.width), channels == 1 ? CV_8UC1 : CV_8UC3);
  std::vector<unsigned char*> rows(static_cast<std::size_t>(r.height));
  for (int y = 0; y < r.height; ++y) rows[static_cast<std::size_t>(y)] = buffer.ptr(y);
  if (!read_rows(d, r.y, r.y + r.height, rows.data())) fail("the data ends early");
  const int dx = r.x - static_cast<int>(plan.x_offset);
  if (dx == 0 && r.width == buffer.cols) return buffer;
  return buffer(cv::Rect(dx, 0, r.width, r.height));
}

}  // namespace glassbox::data
