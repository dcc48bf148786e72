// The engine over a model repository (api.h's make_engine): which models and versions are
// loaded, routing requests to their runners, metadata, statistics, the repository index and
// model control (explicit mode), shutdown.
//
// State: one immutable ModelState snapshot per model, replaced whole by a load or an unload
// (copy-on-write under a shared mutex), so a request looks its runner up under a shared lock and
// submits without holding any lock. Loads and unloads are serialised by a second mutex and run
// outside the shared one: requests keep flowing to the old runners while new ones load; the old
// ones are closed and drained after the swap.
//
// Over 600 lines: loading (config, versions, backends, runners, monitors), routing and control all
// read and replace the same ModelState under the same two mutexes; the payload-log glue (about 50
// lines) could move out if it grows.
//
// Choices (documented in api.h's error mapping):
//   unknown model               InvalidArgument  "Request for unknown model: 'x' is not found" (400)
//   unknown version             NotFound         "Request for unknown model: 'x' version 7 is not found" (404)
//   known, nothing ready        FailedPrecondition "Request for unknown model: 'x' has no available versions",
//                               hint naming the reason (UNAVAILABLE: ... / unloaded)          (400)
//   version known, not ready    FailedPrecondition "Request for unknown model: 'x' version 2 is not at ready state"
//   after begin_shutdown        Unavailable      "server is shutting down" (503)
// Readiness is strict (Triton's default): every model that should be loaded (mode none: all;
// explicit: the startup models and those load_model has loaded since, even in part) must have
// every served version READY. A load_model that fails outright does not count (its caller got
// the error; the index shows the model UNAVAILABLE with the reason).
// A load_model that fails keeps the versions that were serving (a bad reload never takes a
// model down) and throws the load's error; a model that never loaded shows UNAVAILABLE with it.
// config.pbtxt: Triton fields glassbox does not implement are skipped (a warning in the log and in
// the index's reason, READY entries included) unless strict_config; anything else that does not
// parse makes the model UNAVAILABLE with protobuf's message and a hint.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/version.h"
#include "glassbox/export/repository.h"
#include "glassbox/monitor/profile.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/engine/backend.h"
#include "glassbox/serve/engine/runner.h"

namespace glassbox::serve {
namespace {

namespace fs = std::filesystem;
namespace triton = exporter::triton;
using Clock = std::chrono::steady_clock;

// How long an unload or a reload waits for the old runners' queued and in-flight requests.
constexpr std::chrono::seconds kUnloadDrain{60};

// One model, as the engine sees it at one moment. Immutable once published.
struct ModelState {
  std::string name;
  std::shared_ptr<const triton::ModelConfig> config;                        // when the config was read
  std::map<std::int64_t, std::shared_ptr<ModelRunner>> ready;               // version -> its runner
  std::map<std::int64_t, Error> failed;                                     // version -> why it did not load
  std::map<std::int64_t, std::shared_ptr<monitor::ModelMonitor>> monitors;  // the monitored ready versions
  std::map<std::int64_t, std::string> unmonitored;  // a ready version -> why it is not monitored
  std::optional<Error> error;                       // why no version was tried (a config error, no version folder)
  std::string reason;                               // why nothing serves ("unloaded", or the error's line)
  std::string warning;                              // what of the config was skipped; empty when nothing
  bool wanted = false;                              // counts for readiness
  std::optional<Error> first_error;                 // the first load error (for load_model's caller)
};

std::string platform_of(const triton::ModelConfig& c) {
  if (!c.platform().empty()) return c.platform();
  return c.backend() == "pytorch" ? exporter::kTorchScriptPlatform : c.backend();
}

std::string versions_text(const std::map<std::int64_t, std::shared_ptr<ModelRunner>>& ready) {
  std::string out;
  for (const auto& [v, r] : ready) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out.empty() ? "none" : out;
}

// An index reason with the config's warning after it.
std::string with_warning(const std::string& reason, const std::string& warning) {
  if (warning.empty()) return reason;
  return reason.empty() ? warning : reason + "; " + warning;
}

// NotFound (missing, not a directory) or FailedPrecondition (unreadable), naming the fix.
void check_repository(const fs::path& repository) {
  const std::string hint_layout =
      "pass the folder that holds one directory per model, NAME/config.pbtxt + NAME/1/model.pt (glassbox export "
      "--format repository --out DIR writes one)";
  std::error_code ec;
  const fs::file_status st = fs::status(repository, ec);
  GB_CHECK(fs::exists(st), NotFound, "model repository '" << repository.string() << "' does not exist", hint_layout);
  GB_CHECK(fs::is_directory(st), NotFound, "model repository '" << repository.string() << "' is not a directory",
           hint_layout);
  fs::directory_iterator probe(repository, ec);
  GB_CHECK(!ec, FailedPrecondition, "model repository '" << repository.string() << "' cannot be read: " << ec.message(),
           "give the server's user read and search permission on it (chmod u+rx " + repository.string() +
               ") or pass another --model-repository");
}

Error unknown_model(const std::string& model) {
  return Error(ErrorCode::kInvalidArgument, "Request for unknown model: '" + model + "' is not found",
               "POST /v2/repository/index lists the repository's models (names are case-sensitive)");
}

std::string with_defaults(const triton::ModelConfig& config) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(exporter::model_config_to_json(config));
  // Protobuf's JSON omits fields at their defaults; perf_analyzer reads these keys unchecked.
  if (!j.contains("max_batch_size")) j["max_batch_size"] = 0;
  if (j.contains("dynamic_batching")) {
    if (!j["model_transaction_policy"].contains("decoupled")) j["model_transaction_policy"]["decoupled"] = false;
    if (!j["response_cache"].contains("enable")) j["response_cache"]["enable"] = false;
  }
  return j.dump();
}

constexpr std::string_view kMonitorParameter = "glassbox.monitor.";

class RepositoryEngine final : public Engine {
 public:
  explicit RepositoryEngine(const EngineOptions& options) : options_(options) {
    options_.validate();
    check_repository(options_.repository);
    if (!options_.payload_log.dir.empty())
      payload_log_ = std::make_shared<monitor::PayloadLogger>(options_.payload_log);
    const std::vector<std::string> all = exporter::list_repository_models(options_.repository);
    std::vector<std::string> names;
    if (options_.control_mode == ModelControlMode::kNone ||
        std::find(options_.startup_models.begin(), options_.startup_models.end(), "*") !=
            options_.startup_models.end()) {
      names = all;
    } else {
      for (const std::string& n : options_.startup_models) {
        GB_CHECK(std::find(all.begin(), all.end(), n) != all.end(), NotFound,
                 "model '" << n << "' to load at startup has no directory in " << options_.repository.string(),
                 std::string("the repository holds: ") + fmt::format("{}", fmt::join(all, ", ")));
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      }
    }
    load_all(names);
  }

  ~RepositoryEngine() override {
    for (const auto& r : all_runners()) r->close("server is shutting down");
    std::unique_lock lock(mu_);
    models_.clear();  // each runner's destructor drains briefly and joins its threads
  }

  ServerMetadata server_metadata() const override {
    ServerMetadata m;
    m.name = "glassbox";
    m.version = kGlassboxVersion;
    m.extensions = {"binary_tensor_data",  "classification",  "model_repository",
                    "model_configuration", "schedule_policy", "statistics"};
    return m;
  }

  bool live() const override { return true; }

  bool ready() const override {
    if (shutting_down_.load()) return false;
    std::shared_lock lock(mu_);
    for (const auto& [name, s] : models_) {
      if (s->wanted && (s->ready.empty() || !s->failed.empty())) return false;
    }
    return true;
  }

  ModelMetadata model_metadata(const std::string& model, std::int64_t version) const override {
    const Target t = resolve(model, version);
    const triton::ModelConfig& c = *t.state->config;
    ModelMetadata m;
    m.name = model;
    for (const auto& [v, r] : t.state->ready) m.versions.push_back(std::to_string(v));
    m.platform = platform_of(c);
    const bool batched = c.max_batch_size() > 0;
    const auto spec = [batched](const std::string& name, triton::DataType type, const auto& dims) {
      TensorSpec s;
      s.name = name;
      s.datatype = *parse_datatype(exporter::kserve_datatype(type));
      if (batched) s.shape.push_back(-1);
      s.shape.insert(s.shape.end(), dims.begin(), dims.end());
      return s;
    };
    for (const auto& in : c.input()) m.inputs.push_back(spec(in.name(), in.data_type(), in.dims()));
    for (const auto& out : c.output()) m.outputs.push_back(spec(out.name(), out.data_type(), out.dims()));
    return m;
  }

  bool model_ready(const std::string& model, std::int64_t version) const override {
    if (shutting_down_.load()) return false;
    try {
      resolve(model, version);
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  std::string model_config_json(const std::string& model, std::int64_t version) const override {
    return with_defaults(*resolve(model, version).state->config);
  }

  void infer(InferRequest request, InferCallback done) override {
    std::shared_ptr<ModelRunner> runner;
    try {
      GB_CHECK(!shutting_down_.load(), Unavailable, "server is shutting down",
               std::string("retry against another replica"));
      Target t = resolve(request.model, request.version);
      runner = std::move(t.runner);
      if (payload_log_ && payload_log_->sample()) done = logged(request, t.version, payload_log_, std::move(done));
    } catch (const Error& e) {
      answer(request, std::move(done), e);
      return;
    } catch (const std::exception& e) {
      answer(request, std::move(done), Error(ErrorCode::kInternal, e.what(), "report this as a bug"));
      return;
    }
    runner->submit(std::move(request), std::move(done));
  }

  monitor::MonitorSnapshot monitor_snapshot(const std::string& model, std::int64_t version) const override {
    return monitor_for(model, version)->snapshot();
  }

  monitor::MonitorSnapshot set_monitor_sample_rate(const std::string& model, std::int64_t version,
                                                   double rate) override {
    const std::shared_ptr<monitor::ModelMonitor> m = monitor_for(model, version);
    m->set_sample_rate(rate);
    return m->snapshot();
  }

  // The version's monitor; FailedPrecondition with the reason when it is not monitored.
  std::shared_ptr<monitor::ModelMonitor> monitor_for(const std::string& model, std::int64_t version) const {
    const Target t = resolve(model, version);
    std::shared_ptr<monitor::ModelMonitor> m = monitor_of(*t.state, t.version);
    if (!m) {
      const auto it = t.state->unmonitored.find(t.version);
      throw Error(ErrorCode::kFailedPrecondition,
                  "model '" + model + "' version " + std::to_string(t.version) + " is not monitored",
                  it != t.state->unmonitored.end() ? it->second : "the server runs with --monitor=false");
    }
    return m;
  }

  std::vector<monitor::MonitorSnapshot> monitor_snapshots() const override {
    std::vector<std::shared_ptr<monitor::ModelMonitor>> all;
    {
      std::shared_lock lock(mu_);
      for (const auto& [name, s] : models_)
        for (const auto& [v, m] : s->monitors) all.push_back(m);
    }
    std::vector<monitor::MonitorSnapshot> out;
    for (const auto& m : all) out.push_back(m->snapshot());
    return out;
  }

  std::optional<monitor::PayloadLogger::Stats> payload_log_stats() const override {
    if (!payload_log_) return std::nullopt;
    return payload_log_->stats();
  }

  std::vector<ModelStats> statistics(const std::string& model, std::int64_t version) const override {
    std::vector<std::pair<std::string, std::map<std::int64_t, std::shared_ptr<ModelRunner>>>> sources;
    if (model.empty()) {
      std::shared_lock lock(mu_);
      for (const auto& [name, s] : models_) sources.emplace_back(name, s->ready);
    } else if (version == 0) {
      // Every ready version; a model with none is an error, as for inference (Triton's answer),
      // not an empty list a dashboard would read as "idle".
      const std::shared_ptr<const ModelState> s = find(model);
      if (!s || s->ready.empty()) resolve(model, 0);  // throws: unknown, unloaded, or failed
      sources.emplace_back(model, s->ready);
    } else {
      const Target t = resolve(model, version);
      sources.push_back({model, {{t.version, t.runner}}});
    }
    std::vector<ModelStats> out;
    for (const auto& [name, runners] : sources) {
      for (const auto& [v, runner] : runners) {
        ModelStats st = runner->stats();
        st.name = name;
        st.version = std::to_string(v);
        out.push_back(std::move(st));
      }
    }
    return out;
  }

  std::vector<IndexEntry> repository_index(bool ready_only) const override {
    std::vector<std::string> names;
    try {
      names = exporter::list_repository_models(options_.repository);
    } catch (const Error&) {
      // The repository went away: list what is loaded.
    }
    std::map<std::string, std::shared_ptr<const ModelState>> snapshot;
    {
      std::shared_lock lock(mu_);
      snapshot = models_;
    }
    for (const auto& [name, s] : snapshot) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    std::vector<IndexEntry> out;
    for (const std::string& name : names) {
      const auto it = snapshot.find(name);
      if (it == snapshot.end()) {
        if (!ready_only) out.push_back({name, "", "UNAVAILABLE", "unloaded"});
        continue;
      }
      const ModelState& s = *it->second;
      std::map<std::int64_t, IndexEntry> versions;
      for (const auto& [v, r] : s.ready) versions[v] = {name, std::to_string(v), "READY", s.warning};
      if (!ready_only) {
        for (const auto& [v, why] : s.failed)
          versions[v] = {name, std::to_string(v), "UNAVAILABLE", with_warning(why.one_line(), s.warning)};
        if (versions.empty()) out.push_back({name, "", "UNAVAILABLE", with_warning(s.reason, s.warning)});
      }
      for (auto& [v, e] : versions) out.push_back(std::move(e));
    }
    return out;
  }

  StartupReport startup_report() const override { return startup_; }

  void load_model(const std::string& model, const std::string& config_json) override {
    check_control();
    check_directory(model);
    std::lock_guard control(control_mu_);
    std::shared_ptr<ModelState> fresh = load_state(model, config_json);
    fresh->wanted = !fresh->ready.empty();  // a load that failed outright was answered with its error
    const std::shared_ptr<const ModelState> old = find(model);
    const bool keep_old = fresh->ready.empty() && old && !old->ready.empty();
    if (!keep_old) {
      publish(model, fresh);
      if (old) retire(*old, fresh.get(), "model '" + model + "' is reloading");
    }
    if (fresh->first_error) throw *fresh->first_error;
  }

  void unload_model(const std::string& model) override {
    check_control();
    const std::shared_ptr<const ModelState> old = find(model);
    if (!old) check_directory(model);
    std::lock_guard control(control_mu_);
    auto state = std::make_shared<ModelState>();
    state->name = model;
    state->reason = "unloaded";
    const std::shared_ptr<const ModelState> current = find(model);
    publish(model, state);
    if (current) retire(*current, nullptr, "model '" + model + "' is unloading");
  }

  void begin_shutdown() override {
    shutting_down_.store(true);
    for (const auto& r : all_runners()) r->close("server is shutting down");
  }

  bool drain(std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    bool drained = true;
    for (const auto& r : all_runners()) {
      const auto left = std::max(std::chrono::milliseconds(0),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      drained = r->drain(left) && drained;
    }
    return drained;
  }

 private:
  struct Target {
    std::shared_ptr<const ModelState> state;
    std::int64_t version = 0;
    std::shared_ptr<ModelRunner> runner;
  };

  static std::shared_ptr<monitor::ModelMonitor> monitor_of(const ModelState& s, std::int64_t version) {
    const auto it = s.monitors.find(version);
    return it == s.monitors.end() ? nullptr : it->second;
  }

  std::shared_ptr<const ModelState> find(const std::string& model) const {
    std::shared_lock lock(mu_);
    const auto it = models_.find(model);
    return it == models_.end() ? nullptr : it->second;
  }

  bool has_directory(const std::string& model) const {
    try {
      exporter::check_model_name(model);
    } catch (const Error&) {
      return false;
    }
    return fs::is_directory(options_.repository / model);
  }

  void check_directory(const std::string& model) const {
    if (!has_directory(model)) throw unknown_model(model);
  }

  void check_control() const {
    GB_CHECK(options_.control_mode == ModelControlMode::kExplicit, FailedPrecondition,
             "model control is disabled: models are loaded and unloaded only in explicit model control mode",
             std::string("start the server with --model-control-mode explicit"));
    GB_CHECK(!shutting_down_.load(), Unavailable, "server is shutting down", std::string("retry after the restart"));
  }

  Target resolve(const std::string& model, std::int64_t version) const {
    const std::shared_ptr<const ModelState> s = find(model);
    if (!s) {
      if (!has_directory(model)) throw unknown_model(model);
      throw Error(
          ErrorCode::kFailedPrecondition, "Request for unknown model: '" + model + "' has no available versions",
          "model '" + model + "' is not loaded (UNAVAILABLE: unloaded): load it with POST /v2/repository/models/" +
              model + "/load");
    }
    if (version == 0) {
      if (s->ready.empty()) {
        const std::string why = !s->failed.empty() ? s->failed.begin()->second.one_line() : s->reason;
        throw Error(ErrorCode::kFailedPrecondition,
                    "Request for unknown model: '" + model + "' has no available versions",
                    "model '" + model + "' is UNAVAILABLE: " + why);
      }
      const auto& [v, runner] = *s->ready.rbegin();
      return {s, v, runner};
    }
    if (const auto it = s->ready.find(version); it != s->ready.end()) return {s, version, it->second};
    if (const auto it = s->failed.find(version); it != s->failed.end()) {
      throw Error(
          ErrorCode::kFailedPrecondition,
          "Request for unknown model: '" + model + "' version " + std::to_string(version) + " is not at ready state",
          "version " + std::to_string(version) + " is UNAVAILABLE: " + it->second.one_line());
    }
    throw Error(
        ErrorCode::kNotFound,
        "Request for unknown model: '" + model + "' version " + std::to_string(version) + " is not found",
        "model '" + model + "' serves versions " + versions_text(s->ready) + " (version_policy in config.pbtxt)");
  }

  static void answer(const InferRequest& request, InferCallback done, const Error& e) {
    InferOutcome out;
    out.response.model = request.model;
    out.response.version = request.version;
    out.response.id = request.id;
    out.error = e;
    try {
      done(std::move(out));
    } catch (...) {
      // A callback's exception must not escape infer(), which never throws.
    }
  }

  std::vector<std::shared_ptr<ModelRunner>> all_runners() const {
    std::vector<std::shared_ptr<ModelRunner>> out;
    std::shared_lock lock(mu_);
    for (const auto& [name, s] : models_)
      for (const auto& [v, r] : s->ready) out.push_back(r);
    return out;
  }

  void publish(const std::string& model, std::shared_ptr<const ModelState> state) {
    std::unique_lock lock(mu_);
    models_[model] = std::move(state);
  }

  // Closes and drains the runners of `old` that `now` does not hold (in-flight requests finish).
  static void retire(const ModelState& old, const ModelState* now, const std::string& why) {
    std::vector<std::shared_ptr<ModelRunner>> gone;
    for (const auto& [v, r] : old.ready) {
      const bool kept = now && now->ready.count(v) != 0 && now->ready.at(v) == r;
      if (!kept) gone.push_back(r);
    }
    for (const auto& r : gone) r->close(why);
    for (const auto& r : gone) r->drain(kUnloadDrain);
  }

  // The model's directory, with config.pbtxt or the override; `skipped` receives the Triton fields
  // the config sets that glassbox skipped.
  exporter::RepositoryEntry read_entry(const std::string& model, const std::string& config_json,
                                       std::vector<std::string>& skipped) const {
    exporter::ParseConfigOptions po;
    po.allow_unknown_fields = !options_.strict_config;
    po.skipped = &skipped;
    const fs::path dir = options_.repository / model;
    if (config_json.empty()) return exporter::read_model_repository_entry(dir, po);
    po.validate = false;  // after the name's default
    triton::ModelConfig c =
        exporter::parse_model_config_json(config_json, "model '" + model + "': config override", po);
    if (c.name().empty()) c.set_name(model);
    exporter::validate_model_config(c, model, "config override");
    exporter::RepositoryEntry e;
    e.name = model;
    e.dir = dir;
    e.config = std::move(c);
    for (const auto& out : e.config.output()) {
      if (out.label_filename().empty()) continue;
      const fs::path path = dir / out.label_filename();
      GB_CHECK(fs::is_regular_file(path), NotFound,
               "label file " << path.string() << " named by output " << out.name() << "'s label_filename is missing",
               std::string("write one class name per line, or drop label_filename"));
      e.labels[out.name()] = exporter::parse_labels(read_file(path));
    }
    if (fs::exists(dir / exporter::kContractFile)) e.contract = nn::read_contract(dir / exporter::kContractFile);
    e.versions = exporter::list_versions(dir);
    return e;
  }

  // Reads the model and loads every served version; never throws (failures are recorded).
  std::shared_ptr<ModelState> load_state(const std::string& model, const std::string& config_json) const {
    auto s = std::make_shared<ModelState>();
    s->name = model;
    s->wanted = true;
    const auto fail = [&s](const Error& e) {
      if (!s->first_error) s->first_error = e;
      return e;
    };
    // No version is tried: the model as a whole is UNAVAILABLE with `e`.
    const auto fail_model = [&](const Error& e) {
      s->error = fail(e);
      s->reason = e.one_line();
      std::clog << "serve: model '" << model << "' did not load: " << s->reason << "\n";
      return s;
    };
    exporter::RepositoryEntry entry;
    std::vector<std::string> skipped;
    try {
      entry = read_entry(model, config_json, skipped);
    } catch (const Error& e) {
      return fail_model(e);
    } catch (const std::exception& e) {
      return fail_model(Error(ErrorCode::kInternal, e.what()));
    }
    if (!skipped.empty()) {
      s->warning =
          fmt::format("{} skipped Triton fields glassbox does not implement: {}",
                      config_json.empty() ? exporter::kConfigFile : "the config override", fmt::join(skipped, ", "));
      std::clog << "serve: model '" << model << "': " << s->warning << "\n";
    }
    s->config = std::make_shared<const triton::ModelConfig>(entry.config);
    const std::vector<std::int64_t> versions = entry.served_versions();
    if (versions.empty()) {
      return fail_model(entry.versions.empty()
                            ? Error(ErrorCode::kNotFound, "model '" + model + "' has no version folder",
                                    "put the model at " + (entry.dir / "1" / exporter::kModelFile).string())
                            : Error(ErrorCode::kNotFound,
                                    "model '" + model + "': version_policy selects none of the version folders",
                                    "fix version_policy in config.pbtxt or add the versions it names"));
    }
    BackendOptions bo;
    bo.default_intra_op_threads = options_.default_intra_op_threads;
    RunnerOptions ro;
    ro.split_large_requests = options_.split_large_requests;
    ro.labels = entry.labels;
    for (std::int64_t v : versions) {
      const auto t0 = Clock::now();
      try {
        std::shared_ptr<Backend> backend = load_backend(entry, v, bo);
        RunnerOptions rv = ro;
        rv.monitor = start_monitor(entry, v, *s);  // the runner hands it each batch it answers
        s->ready[v] = std::make_shared<ModelRunner>(entry.config, v, std::move(backend), rv);
        if (rv.monitor) s->monitors[v] = rv.monitor;
        std::clog << fmt::format("serve: model '{}' version {} loaded in {:.3f} s\n", model, v,
                                 std::chrono::duration<double>(Clock::now() - t0).count());
      } catch (const Error& e) {
        s->failed.insert_or_assign(v, fail(e));
      } catch (const std::exception& e) {
        s->failed.insert_or_assign(
            v, fail(Error(ErrorCode::kInternal,
                          "model '" + model + "' version " + std::to_string(v) + " failed to load: " + e.what())));
      }
      if (const auto it = s->failed.find(v); it != s->failed.end()) {
        s->unmonitored.erase(v);  // a version that did not load is not served at all
        std::clog << "serve: " << it->second.one_line() << "\n";
      }
    }
    if (s->ready.empty()) s->reason = s->failed.begin()->second.one_line();
    return s;
  }

  static monitor::PayloadTensor payload_tensor(const Tensor& t) {
    monitor::PayloadTensor p;
    p.name = t.name;
    p.datatype = datatype_name(t.datatype);
    p.shape = t.shape;
    p.data = monitor_tensor(t);
    return p;
  }

  // `done`, writing the request and its response to the payload log once the client has its
  // answer (dropped and counted when the writer is behind or the disk fails).
  static InferCallback logged(const InferRequest& request, std::int64_t version,
                              std::shared_ptr<monitor::PayloadLogger> log, InferCallback done) {
    monitor::PayloadRecord rec;
    rec.model = request.model;
    rec.version = version;
    rec.id = request.id;
    for (const Tensor& t : request.inputs) rec.inputs.push_back(payload_tensor(t));
    return [log = std::move(log), rec = std::move(rec), received = request.received,
            done = std::move(done)](InferOutcome out) mutable {
      if (out.error) {
        done(std::move(out));
        return;
      }
      for (const Tensor& t : out.response.outputs) rec.outputs.push_back(payload_tensor(t));
      rec.latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - received).count();
      rec.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      done(std::move(out));
      log->offer(std::move(rec));
    };
  }

  // The version's monitor when its folder holds a profile and monitoring is on; otherwise null and
  // the reason in `s.unmonitored`. A profile that does not read or options that do not parse leave
  // the version serving, unmonitored, with the reason logged and in the index.
  std::shared_ptr<monitor::ModelMonitor> start_monitor(const exporter::RepositoryEntry& entry, std::int64_t v,
                                                       ModelState& s) const {
    const fs::path dir = entry.dir / std::to_string(v);
    const auto off = [&](const std::string& why, bool warn) -> std::shared_ptr<monitor::ModelMonitor> {
      s.unmonitored[v] = why;
      if (!warn) return nullptr;
      std::clog << "serve: model '" << entry.name << "' version " << v << " is not monitored: " << why << "\n";
      s.warning = with_warning(s.warning, "version " + std::to_string(v) + " is not monitored: " + why);
      return nullptr;
    };
    if (!options_.monitor) return off("the server runs with --monitor=false", false);
    monitor::MonitorOptions mo = options_.monitor_options;
    try {
      for (const auto& [key, value] : entry.config.parameters()) {
        if (key.rfind(kMonitorParameter, 0) != 0) continue;
        mo.set(key.substr(kMonitorParameter.size()), value.string_value());
      }
      mo.validate();
    } catch (const Error& e) {
      return off("config.pbtxt: " + e.one_line(), true);
    }
    if (!mo.enabled) return off("config.pbtxt sets glassbox.monitor.enabled to false", false);
    if (!fs::exists(dir / "profile.json"))
      return off("no reference profile (" + (dir / "profile.json").string() +
                     "): glassbox export writes one beside the model when the checkpoint's validation data is at hand",
                 false);
    try {
      return std::make_shared<monitor::ModelMonitor>(entry.name, v, monitor::read_reference(dir), mo);
    } catch (const Error& e) {
      return off(e.one_line(), true);
    } catch (const std::exception& e) {  // a profile that cannot be read never takes the model down
      return off(std::string("its profile could not be read: ") + e.what(), true);
    }
  }

  // Startup: the models load in parallel (each model's versions in order).
  void load_all(const std::vector<std::string>& names) {
    std::vector<std::shared_ptr<ModelState>> states(names.size());
    std::atomic<std::size_t> next{0}, done{0};
    const auto t0 = Clock::now();
    if (names.size() > 1)
      std::clog << fmt::format("serve: loading {} models from {}\n", names.size(), options_.repository.string());
    const auto work = [&] {
      for (std::size_t i = next++; i < names.size(); i = next++) {
        states[i] = load_state(names[i], "");
        const std::size_t k = ++done;
        if (names.size() > 1)
          std::clog << fmt::format("serve: {}/{} models loaded or failed ({:.1f} s)\n", k, names.size(),
                                   std::chrono::duration<double>(Clock::now() - t0).count());
      }
    };
    const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
    const std::size_t n = std::min<std::size_t>({names.size(), hw, 4});
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < n; ++i) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    startup_.models = names;
    std::sort(startup_.models.begin(), startup_.models.end());
    std::unique_lock lock(mu_);
    for (std::size_t i = 0; i < names.size(); ++i) {
      states[i]->first_error.reset();
      models_[names[i]] = states[i];
    }
    for (const std::string& name : startup_.models) {
      const ModelState& s = *models_.at(name);
      if (!s.ready.empty()) startup_.serving.push_back(name);
      if (s.error) startup_.failures.push_back({name, "", *s.error});
      for (const auto& [v, e] : s.failed) startup_.failures.push_back({name, std::to_string(v), e});
    }
  }

  EngineOptions options_;
  mutable std::shared_mutex mu_;
  std::map<std::string, std::shared_ptr<const ModelState>> models_;
  std::mutex control_mu_;  // one load or unload at a time
  StartupReport startup_;  // set by the constructor, then immutable
  std::atomic<bool> shutting_down_{false};
  std::shared_ptr<monitor::PayloadLogger> payload_log_;  // null: payload logging off
};

}  // namespace

std::unique_ptr<Engine> make_engine(const EngineOptions& options) {
  return std::make_unique<RepositoryEngine>(options);
}

}  // namespace glassbox::serve
