// A Triton-style model repository: the layout `tritonserver --model-repository DIR` loads (and
// glassbox's own server, `glassbox serve`).
//
//   DIR/NAME/config.pbtxt     the model configuration (glassbox/export/model_config.h)
//   DIR/NAME/labels.txt       class names, one per line in index order (output label_filename)
//   DIR/NAME/contract.json    glassbox's preprocessing contract (glassbox/nn/contract.h)
//   DIR/NAME/N/model.pt       the TorchScript file of version N (numeric folders only)
//
//   RepositoryWriteResult r = write_model_repository("runs/q/export/repository", "fashion_cnn", 1,
//                                                    "runs/q/export/model.pt", contract);
//   for (const auto& f : r.files) std::cout << f.path << " " << f.bytes << "\n";
//   RepositoryEntry e = read_model_repository_entry("runs/q/export/repository/fashion_cnn");
//   for (std::int64_t v : e.served_versions()) load(e.model_path(v));
//
// Writing never corrupts or loses what is there: every file is written to a temporary name and
// renamed into place, a version folder is built beside its final name and swapped in (the old
// one is removed only once the new one is in place), and other models and other versions are
// never touched. A new model directory appears whole. Replacing a version of a model whose other
// versions expect different inputs or outputs is refused (the config is shared by all versions).
// Thread safety: free functions, reentrant; concurrent writers of one model race (last wins).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "glassbox/export/model_config.h"
#include "glassbox/nn/contract.h"

namespace glassbox::exporter {

struct WrittenFile {
  std::filesystem::path path;
  std::uintmax_t bytes = 0;
};

struct RepositoryWriteResult {
  std::filesystem::path model_dir;    // DIR/NAME
  std::filesystem::path version_dir;  // DIR/NAME/N
  std::vector<WrittenFile> files;     // N/model.pt, labels.txt, contract.json, config.pbtxt
  bool replaced_version = false;      // an existing DIR/NAME/N was swapped out
  triton::ModelConfig config;         // what config.pbtxt holds
  std::uintmax_t total_bytes() const;
};

// Writes model `name`, version `version` (>= 1) of the TorchScript file `model_file` into the
// repository `repository` (created when missing). The contract is stored with name = `name`.
// Errors, one line each: InvalidArgument (a name that is not a plain directory name, a version
// < 1, a bad contract or option), NotFound (model_file), FailedPrecondition (other versions of
// `name` with another input/output signature, or an unreadable config.pbtxt beside them),
// ResourceExhausted (a write failed; what was there is intact).
RepositoryWriteResult write_model_repository(const std::filesystem::path& repository, const std::string& name,
                                             std::int64_t version, const std::filesystem::path& model_file,
                                             const nn::ModelContract& contract, const ModelConfigOptions& options = {});

// InvalidArgument unless `name` is a model directory name: letters, digits, '_', '-', '.',
// starting with a letter, digit or '_', at most 128 characters (it is also a URL path segment).
void check_model_name(const std::string& name);

// One model of a repository, as read back.
struct RepositoryEntry {
  std::string name;                                        // the directory's name (= config.name)
  std::filesystem::path dir;                               // DIR/NAME
  triton::ModelConfig config;                              // parsed and validated
  std::optional<nn::ModelContract> contract;               // contract.json, when present
  std::map<std::string, std::vector<std::string>> labels;  // output name -> its label file's lines
  std::vector<std::int64_t> versions;                      // numeric version folders, ascending

  // The versions the config's version_policy selects from `versions` (select_versions).
  std::vector<std::int64_t> served_versions() const;
  // DIR/NAME/V/<default_model_filename, or model.pt when unset>.
  std::filesystem::path model_path(std::int64_t version) const;
};

// Reads DIR/NAME: config.pbtxt (its name must equal the directory's), every output's label file
// (NotFound when named but missing), contract.json when present, and the version folders.
RepositoryEntry read_model_repository_entry(const std::filesystem::path& model_dir,
                                            const ParseConfigOptions& options = {});

// The model directories of a repository (folders not starting with '.'), sorted by name.
std::vector<std::string> list_repository_models(const std::filesystem::path& repository);

// The numeric version folders of a model directory ("1", "2", ..., not "01" or "1a"), ascending.
std::vector<std::int64_t> list_versions(const std::filesystem::path& model_dir);

// Triton's version policy: unset or latest{n} -> the n highest (default 1), all -> every one,
// specific{versions} -> those listed that exist. Result ascending.
std::vector<std::int64_t> select_versions(const triton::ModelConfig& config,
                                          const std::vector<std::int64_t>& available);

// Label files: one name per line, '\n' endings (a trailing '\r' is dropped on reading).
std::string labels_to_text(const std::vector<std::string>& labels);
std::vector<std::string> parse_labels(const std::string& text);

}  // namespace glassbox::exporter
