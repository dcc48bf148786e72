// Tested by monitor_test (Profile.*).
#include "glassbox/monitor/profile.h"

#include <algorithm>
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
  if (!reference.entropy.values.empty()) {
    j["entropy"] = entry_of(reference.entropy, all.size());
    all.insert(all.end(), reference.entropy.values.begin(), reference.entropy.values.end());
  }
  if (!reference.input.name.empty()) j["input"] = reference.input.to_json();
  json ranges = json::array();
  for (const ValueRange& r : reference.ranges) ranges.push_back({{"name", r.name}, {"min", r.min}, {"max", r.max}});
  j["ranges"] = ranges;
  j["output"] = {{"name", reference.output}, {"kind", reference.output_logits ? "logits" : "probabilities"}};
  j["classes"] = reference.classes;
  j["true_share"] = reference.true_share;
  j["class_error"] = reference.class_error;
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
    if (j.contains("entropy")) r.entropy = sample_of(j["entropy"], all, json_path);
    if (j.contains("input")) r.input = InputSpec::from_json(j["input"]);
    for (const json& e : j.value("ranges", json::array()))
      r.ranges.push_back({e.at("name").get<std::string>(), e.at("min").get<double>(), e.at("max").get<double>()});
    if (j.contains("output")) {
      r.output = j["output"].at("name").get<std::string>();
      r.output_logits = j["output"].at("kind").get<std::string>() != "probabilities";
    }
    r.classes = j.value("classes", std::vector<std::string>{});
    r.true_share = j.value("true_share", std::vector<double>{});
    r.class_error = j.value("class_error", std::vector<double>{});
  } catch (const Error& e) {
    GB_THROW(DataLoss, json_path.string() << ": " << e.message(), "export the model again to rewrite its profile");
  } catch (const json::exception& ex) {
    GB_THROW(DataLoss, json_path.string() << " is malformed (" << ex.what() << ")",
             "export the model again to rewrite its profile");
  }
  return r;
}

Scored score(std::span<double> scores, bool logits) {
  Scored out;
  if (scores.empty() || !std::all_of(scores.begin(), scores.end(), [](double v) { return std::isfinite(v); }))
    return out;
  if (logits) {
    const double top = *std::max_element(scores.begin(), scores.end());
    double sum = 0;
    for (double& v : scores) sum += (v = std::exp(v - top));
    for (double& v : scores) v /= sum;
  }
  const auto best = std::max_element(scores.begin(), scores.end());
  out.predicted = best - scores.begin();
  out.confidence = *best;
  for (double p : scores)
    if (p > 0) out.entropy -= p * std::log(p);
  return out;
}

ReferenceBuilder::ReferenceBuilder(std::optional<InputSpec> input, std::string output, bool logits,
                                   std::vector<std::string> classes)
    : output_(std::move(output)), logits_(logits), classes_(std::move(classes)) {
  if (input) {
    extractor_.emplace(std::move(*input));
    ranges_ = extractor_->observe_start();
    features_.resize(extractor_->names().size());
  }
  predicted_.assign(classes_.size(), 0);
  labels_.assign(classes_.size(), 0);
  wrong_.assign(classes_.size(), 0);
}

void ReferenceBuilder::add(std::span<const double> input_values, std::span<const double> scores, std::int64_t label) {
  if (extractor_) {
    values_.resize(features_.size());
    InputCounts unused;
    extractor_->extract(input_values, values_, {}, 0.0, unused);
    extractor_->observe_ranges(input_values, ranges_);
    for (std::size_t f = 0; f < values_.size(); ++f)
      if (std::isfinite(values_[f])) features_[f].push_back(values_[f]);
  }
  GB_CHECK(scores.size() == classes_.size(), InvalidArgument,
           "an output row of " << scores.size() << " scores for " << classes_.size() << " classes",
           "pass the model's whole output row");
  row_.assign(scores.begin(), scores.end());
  const Scored s = score(row_, logits_);
  if (s.predicted >= 0) {
    confidence_.push_back(s.confidence);
    entropy_.push_back(s.entropy);
    ++predicted_[static_cast<std::size_t>(s.predicted)];
  }
  if (label >= 0 && label < static_cast<std::int64_t>(classes_.size())) {
    ++labels_[static_cast<std::size_t>(label)];
    if (s.predicted != label) ++wrong_[static_cast<std::size_t>(label)];
    ++labelled_;
  }
  ++count_;
}

Reference ReferenceBuilder::build(std::size_t keep) const {
  GB_CHECK(count_ > 0 && !confidence_.empty(), InvalidArgument, "a reference profile of no predictions",
           "profile at least one sample the model scores finitely");
  Reference r;
  if (extractor_) {
    r.input = extractor_->spec();
    r.ranges = ranges_;
    for (std::size_t f = 0; f < features_.size(); ++f) {
      GB_CHECK(!features_[f].empty(), InvalidArgument,
               "monitored feature " << extractor_->names()[f] << " has no finite value in the reference data",
               "check the validation data");
      r.features.push_back(ReferenceSample::of(extractor_->names()[f], features_[f], keep));
    }
  }
  r.confidence = ReferenceSample::of("confidence", confidence_, keep);
  r.entropy = ReferenceSample::of("entropy", entropy_, keep);
  r.output = output_;
  r.output_logits = logits_;
  r.classes = classes_;
  const auto n = static_cast<double>(confidence_.size());
  r.predictions = static_cast<std::int64_t>(confidence_.size());
  for (std::int64_t c : predicted_) r.predicted_share.push_back(static_cast<double>(c) / n);
  if (labelled_ > 0) {
    for (std::size_t c = 0; c < classes_.size(); ++c) {
      r.true_share.push_back(static_cast<double>(labels_[c]) / static_cast<double>(labelled_));
      r.class_error.push_back(labels_[c] ? static_cast<double>(wrong_[c]) / static_cast<double>(labels_[c]) : 0.0);
    }
  }
  return r;
}

}  // namespace glassbox::monitor
