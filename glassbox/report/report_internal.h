// The report's sections, one function each, over the artefacts read by report.cpp (not a public
// header of the module). Each returns a complete <section id="..."> element.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/report/json_view.h"

namespace glassbox::report::detail {

namespace fs = std::filesystem;

// A parsed JSON artefact with the source that its errors name.
struct Artefact {
  JsonSource source;
  std::optional<nlohmann::json> json;  // nullopt: the file does not exist
  JsonView view() const { return json ? JsonView(*json, source) : JsonView(nullptr, source); }
};

// Reads and parses run_dir/relative; an absent file gives json == nullopt. Bad JSON, or a
// document that is not an object, throws DataLoss naming the file.
Artefact read_artefact(const fs::path& run_dir, const std::string& relative, const std::string& hint);

// Class names from eval/metrics.json or summary.json; "class 3" past the end of the list.
struct ClassNames {
  std::vector<std::string> names;
  std::string operator()(std::int64_t k) const;
};

// <section id="id"><h2>title</h2>body</section>
std::string section(std::string_view id, std::string_view title, std::string_view body);
// <figure class="chart" data-chart="name">content<figcaption>caption</figcaption></figure>
std::string figure(std::string_view chart, std::string_view content, std::string_view caption_html = {});
// <td class="num">value</td>, "—" for an absent value.
std::string num_cell(const std::optional<double>& v, int significant = 4);
inline constexpr const char* kDash = "\xE2\x80\x94";  // —

std::string training_section(const fs::path& run_dir);
std::string evaluation_section(const Artefact& eval, const ClassNames& names, const fs::path& run_dir);
std::string fairness_section(const Artefact& eval, const ClassNames& names);
std::string gradcam_section(const Artefact& index, const fs::path& run_dir);
std::string doctor_section(const Artefact& doctor);

}  // namespace glassbox::report::detail
