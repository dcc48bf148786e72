// Tested by monitor_test (Profile.*).
#include "glassbox/monitor/profile.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::monitor {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

static_assert(std::endian::native == std::endian::little, "profile.npy is written little-endian as it is in memory");

// NPY 1.0 of a float64 vector: the magic, a header padded so that the data starts at a multiple
// of 64, the values.
std::string npy_of(const std::vector<double>& values) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(values.size()) + ",), }";
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  return out;
}

std::vector<double> values_of_npy(const std::string& bytes, const fs::path& path) {
  const auto bad = [&](const std::string& why) {
    GB_THROW(DataLoss, path.string() << " is not a profile's sample array: " << why,
             "export the model again to rewrite its profile");
  };
  if (bytes.size() < 10 || bytes.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) != 0) bad("no NPY 1.0 header");
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  if (bytes.size() < 10 + header_len) bad("the header is cut short");
  const std::string header = bytes.substr(10, header_len);
  if (header.find("'descr': '<f8'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    bad("not a little-endian float64 array");
  const auto open = header.find("'shape': (");
  if (open == std::string::npos) bad("no shape");
  const std::size_t count = std::stoull(header.substr(open + 10));
  const std::size_t data = 10 + header_len;
  if (bytes.size() != data + count * sizeof(double))
    bad("the header announces " + std::to_string(count) + " values, the file holds " +
        std::to_string((bytes.size() - data) / sizeof(double)));
  std::vector<double> out(count);
  if (count > 0) std::memcpy(out.data(), bytes.data() + data, count * sizeof(double));
  return out;
}

json entry_of(const ReferenceSample& s, std::size_t offset) {
  return {{"name", s.name}, {"count", s.count}, {"min", s.min},     {"max", s.max},
          {"mean", s.mean}, {"std", s.std},     {"offset", offset}, {"size", s.values.size()}};
}

ReferenceSample sample_of(const json& e, const std::vector<double>& all, const fs::path& path) {
  ReferenceSample s;
  try {
    s.name = e.at("name").get<std::string>();
    s.count = e.at("count").get<std::int64_t>();
    s.min = e.at("min").get<double>();
    s.max = e.at("max").get<double>();
    s.mean = e.at("mean").get<double>();
    s.std = e.at("std").get<double>();
    const auto offset = e.at("offset").get<std::size_t>(), size = e.at("size").get<std::size_t>();
    GB_CHECK(offset <= all.size() && size <= all.size() - offset, DataLoss,
             path.string() << ": the sample of " << s.name << " (values " << offset << " to " << offset + size
                           << ") lies beyond profile.npy's " << all.size() << " values",
             "export the model again to rewrite its profile");
    s.values.assign(all.begin() + static_cast<std::ptrdiff_t>(offset),
                    all.begin() + static_cast<std::ptrdiff_t>(offset + size));
  } catch (const json::exception& ex) {
    GB_THROW(DataLoss, path.string() << ": a sample entry is malformed (" << ex.what() << ")",
             "export the model again to rewrite its profile");
  }
  for (std::size_t i = 0; i < s.values.size(); ++i)
    GB_CHECK(std::isfinite(s.values[i]) && (i == 0 || s.values[i - 1] <= s.values[i]), DataLoss,
             path.string() << ": the sample of " << s.name << " is not sorted and finite at value " << i,
             "export the model again to rewrite its profile");
  return s;
}

}  // namespace

void write_reference(const fs::path& dir, const Reference& reference) {
  std::vector<double> all;
  json features = json::array();
  for (const ReferenceSample& f : reference.features) {
    features.push_back(entry_of(f, all.size()));
    all.insert(all.end(), f.values.begin(), f.values.end());
  }
  const json confidence = entry_of(reference.confidence, all.size());
  all.insert(all.end(), reference.confidence.values.begin(), reference.confidence.values.end());
  json j = {{"format", kProfileFormat},
            {"predictions", reference.predictions},
            {"predicted_share", reference.predicted_share},
            {"features", features},
            {"confidence", confidence}};
  write_file_atomic(dir / "profile.npy", npy_of(all));
  write_file_atomic(dir / "profile.json", j.dump(1) + "\n");
}

Reference read_reference(const fs::path& dir) {
  const fs::path json_path = dir / "profile.json", npy_path = dir / "profile.npy";
  for (const fs::path& p : {json_path, npy_path})
    GB_CHECK(fs::exists(p), NotFound, "no reference profile: " << p.string() << " is missing",
             "export the model with a profile, or serve it with monitoring off");
  json j;
  try {
    j = json::parse(read_file(json_path));
  } catch (const json::exception& ex) {
    GB_THROW(DataLoss, json_path.string() << " is not JSON (" << ex.what() << ")",
             "export the model again to rewrite its profile");
  }
  GB_CHECK(j.is_object() && j.contains("format") && j["format"].is_number_integer(), DataLoss,
           json_path.string() << " is not a reference profile (no \"format\")",
           "export the model again to rewrite its profile");
  GB_CHECK(j["format"].get<int>() <= kProfileFormat, FailedPrecondition,
           json_path.string() << " has profile format " << j["format"].get<int>() << "; this glassbox reads up to "
                              << kProfileFormat,
           "serve it with a newer glassbox, or export the model again with this one");
  const std::vector<double> all = values_of_npy(read_file(npy_path), npy_path);
  Reference r;
  try {
    r.predictions = j.at("predictions").get<std::int64_t>();
    r.predicted_share = j.at("predicted_share").get<std::vector<double>>();
    for (const json& e : j.at("features")) r.features.push_back(sample_of(e, all, json_path));
    r.confidence = sample_of(j.at("confidence"), all, json_path);
  } catch (const json::exception& ex) {
    GB_THROW(DataLoss, json_path.string() << " is malformed (" << ex.what() << ")",
             "export the model again to rewrite its profile");
  }
  return r;
}

}  // namespace glassbox::monitor
