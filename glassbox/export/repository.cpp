#include "glassbox/export/repository.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include <google/protobuf/util/message_differencer.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::exporter {
namespace {

namespace fs = std::filesystem;

// Removes a temporary directory unless the work that built it was committed.
class TempDir {
 public:
  explicit TempDir(fs::path path) : path_(std::move(path)) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (!committed_) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  const fs::path& path() const { return path_; }
  void commit() { committed_ = true; }

 private:
  fs::path path_;
  bool committed_ = false;
};

bool is_version_name(const std::string& s) {
  if (s.empty() || s.size() > 18 || s[0] == '0') return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

std::string join_versions(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::int64_t x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

// The part of a config every version of a model must agree on: what goes in and comes out.
triton::ModelConfig signature(const triton::ModelConfig& c) {
  triton::ModelConfig s;
  s.set_platform(c.platform());
  s.set_backend(c.backend());
  s.set_max_batch_size(c.max_batch_size());
  *s.mutable_input() = c.input();
  *s.mutable_output() = c.output();
  for (auto& o : *s.mutable_output()) o.clear_label_filename();
  // The preprocessing contract (glassbox.* parameters) is shared too: clients of every version
  // feed what it says. The architecture may change from one version to the next.
  for (const auto& [key, value] : c.parameters())
    if (key != "glassbox.architecture") (*s.mutable_parameters())[key] = value;
  return s;
}

// Refuses to put a config beside versions that expect another signature.
void check_other_versions(const fs::path& model_dir, std::int64_t version, const triton::ModelConfig& config,
                          const std::string& labels_text) {
  std::vector<std::int64_t> others = list_versions(model_dir);
  others.erase(std::remove(others.begin(), others.end(), version), others.end());
  const fs::path config_path = model_dir / kConfigFile;
  if (others.empty() || !fs::exists(config_path)) return;
  triton::ModelConfig existing;
  try {
    ParseConfigOptions o;
    o.validate = false;
    o.allow_unknown_fields = true;
    existing = read_model_config(config_path, {}, o);
  } catch (const Error& e) {
    GB_THROW(FailedPrecondition,
             config_path.string() << " cannot be read (" << e.message() << ") and versions " << join_versions(others)
                                  << " depend on it; writing a new one could break them",
             "fix or remove " + config_path.string() + ", or export under another name");
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(signature(existing), signature(config))) {
    GB_THROW(
        FailedPrecondition,
        "model " << config.name() << " already has versions " << join_versions(others)
                 << " with another input/output signature or preprocessing (platform, max_batch_size, input, output, "
                 << "glassbox.* parameters) in " << config_path.string() << "; one config.pbtxt serves every version",
        "export under another --name, or remove the old versions first");
  }
  const fs::path labels_path = model_dir / kLabelsFile;
  GB_CHECK(!fs::exists(labels_path) || read_file(labels_path) == labels_text, FailedPrecondition,
           "model " << config.name() << " already has versions " << join_versions(others)
                    << " with other class names in " << labels_path.string() << "; one labels.txt serves every version",
           "export under another --name, or remove the old versions first");
}

WrittenFile written(const fs::path& path) { return {path, fs::file_size(path)}; }

}  // namespace

std::uintmax_t RepositoryWriteResult::total_bytes() const {
  std::uintmax_t n = 0;
  for (const auto& f : files) n += f.bytes;
  return n;
}

void check_model_name(const std::string& name) {
  const bool chars_ok = std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '_' || c == '-' || c == '.';
  });
  const bool ok = !name.empty() && name.size() <= 128 && chars_ok && name[0] != '.' && name[0] != '-';
  GB_CHECK(ok, InvalidArgument, "model name \"" << name << "\" is not a valid model directory name",
           "use letters, digits, '_', '-' and '.', starting with a letter, digit or '_' (e.g. fashion_cnn)");
}

std::string labels_to_text(const std::vector<std::string>& labels) {
  std::string out;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    GB_CHECK(labels[i].find_first_of("\r\n") == std::string::npos, InvalidArgument,
             "label " << i << " contains a line break; a label file holds one name per line",
             "remove line breaks from class names");
    out += labels[i] + "\n";
  }
  return out;
}

std::vector<std::string> parse_labels(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

std::vector<std::int64_t> list_versions(const fs::path& model_dir) {
  std::vector<std::int64_t> out;
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(model_dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && is_version_name(n)) out.push_back(std::stoll(n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> list_repository_models(const fs::path& repository) {
  GB_CHECK(fs::is_directory(repository), NotFound, "no model repository " << repository.string(),
           "pass the folder that holds one directory per model (glassbox export --format repository --out DIR)");
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(repository)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && !n.empty() && n[0] != '.') out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::int64_t> select_versions(const triton::ModelConfig& config,
                                          const std::vector<std::int64_t>& available) {
  std::vector<std::int64_t> sorted = available;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  const triton::ModelVersionPolicy& p = config.version_policy();
  if (p.has_all()) return sorted;
  if (p.has_specific()) {
    std::vector<std::int64_t> out;
    for (std::int64_t v : sorted) {
      const auto& want = p.specific().versions();
      if (std::find(want.begin(), want.end(), v) != want.end()) out.push_back(v);
    }
    return out;
  }
  const std::size_t n = p.has_latest() ? p.latest().num_versions() : 1;
  if (sorted.size() <= n) return sorted;
  return {sorted.end() - static_cast<std::ptrdiff_t>(n), sorted.end()};
}

std::vector<std::int64_t> RepositoryEntry::served_versions() const { return select_versions(config, versions); }

fs::path RepositoryEntry::model_path(std::int64_t version) const {
  const std::string file = config.default_model_filename().empty() ? kModelFile : config.default_model_filename();
  return dir / std::to_string(version) / file;
}

RepositoryWriteResult write_model_repository(const fs::path& repository, const std::string& name, std::int64_t version,
                                             const fs::path& model_file, const nn::ModelContract& contract,
                                             const ModelConfigOptions& options) {
  check_model_name(name);
  GB_CHECK(version >= 1, InvalidArgument, "model version " << version << " is not a version number",
           "versions are numbered from 1 (--version 1)");
  GB_CHECK(fs::is_regular_file(model_file), NotFound, "no model file " << model_file.string(),
           "export the TorchScript file first (glassbox export --format torchscript)");
  GB_CHECK(!fs::exists(repository) || fs::is_directory(repository), InvalidArgument,
           "model repository " << repository.string() << " is a file", "choose a directory for --out");

  // Everything that can be checked is checked before the first byte is written.
  nn::ModelContract c = contract;
  c.name = name;
  RepositoryWriteResult r;
  r.config = make_model_config(name, c, options);
  const std::string config_text = print_model_config(r.config);
  const std::string labels_text = labels_to_text(c.class_names());
  const std::string contract_text = nn::contract_to_json(c);
  const std::string model_bytes = read_file(model_file);

  r.model_dir = repository / name;
  r.version_dir = r.model_dir / std::to_string(version);
  GB_CHECK(!fs::exists(r.model_dir) || fs::is_directory(r.model_dir), InvalidArgument,
           r.model_dir.string() << " is a file, not a model directory", "remove it or choose another --name");

  const auto write_top_files = [&](const fs::path& dir) {
    write_file_atomic(dir / kLabelsFile, labels_text);
    write_file_atomic(dir / kContractFile, contract_text);
    write_file_atomic(dir / kConfigFile, config_text);  // last: a reader sees a config only with its files
  };

  if (!fs::exists(r.model_dir)) {
    // A new model appears whole: built beside, then renamed into place.
    fs::create_directories(repository);
    TempDir tmp(temp_sibling(r.model_dir));
    write_file_atomic(tmp.path() / std::to_string(version) / kModelFile, model_bytes);
    write_top_files(tmp.path());
    replace_dir_atomic(tmp.path(), r.model_dir);
    tmp.commit();
  } else {
    check_other_versions(r.model_dir, version, r.config, labels_text);
    r.replaced_version = fs::exists(r.version_dir);
    // The shared files are staged beside their final names first, the version is swapped in,
    // then the staged files are renamed over the old ones (config last): a failure before the
    // swap leaves the model as it was, and a rename in one folder does not fail for space.
    std::vector<std::pair<fs::path, fs::path>> staged;
    try {
      for (const auto& [file, text] : {std::pair{kLabelsFile, &labels_text}, std::pair{kContractFile, &contract_text},
                                       std::pair{kConfigFile, &config_text}}) {
        const fs::path final_path = r.model_dir / file;
        staged.emplace_back(temp_sibling(final_path), final_path);
        write_file_atomic(staged.back().first, *text);
      }
      TempDir tmp(temp_sibling(r.version_dir));
      write_file_atomic(tmp.path() / kModelFile, model_bytes);
      replace_dir_atomic(tmp.path(), r.version_dir);
      tmp.commit();
    } catch (...) {
      std::error_code ec;
      for (const auto& [tmp_path, final_path] : staged) fs::remove(tmp_path, ec);
      throw;
    }
    for (const auto& [tmp_path, final_path] : staged) fs::rename(tmp_path, final_path);
  }
  r.files = {written(r.version_dir / kModelFile), written(r.model_dir / kLabelsFile),
             written(r.model_dir / kContractFile), written(r.model_dir / kConfigFile)};
  return r;
}

RepositoryEntry read_model_repository_entry(const fs::path& model_dir, const ParseConfigOptions& options) {
  RepositoryEntry e;
  e.dir = model_dir.filename().empty() ? model_dir.parent_path() : model_dir;
  e.name = e.dir.filename().string();
  GB_CHECK(fs::is_directory(e.dir), NotFound, "no model directory " << e.dir.string(),
           "pass DIR/NAME of a model repository (glassbox export --format repository --out DIR)");
  e.config = read_model_config(e.dir / kConfigFile, e.name, options);
  for (const auto& out : e.config.output()) {
    if (out.label_filename().empty()) continue;
    const fs::path path = e.dir / out.label_filename();
    GB_CHECK(fs::is_regular_file(path), NotFound,
             "label file " << path.string() << " named by output " << out.name() << "'s label_filename is missing",
             "write one class name per line, or remove label_filename from config.pbtxt");
    e.labels[out.name()] = parse_labels(read_file(path));
  }
  if (fs::exists(e.dir / kContractFile)) e.contract = nn::read_contract(e.dir / kContractFile);
  e.versions = list_versions(e.dir);
  return e;
}

}  // namespace glassbox::exporter
