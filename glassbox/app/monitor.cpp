// Tested by cli_test (MonitorTools.*) and serve_monitor_prometheus (promtool, a real Prometheus).
#include "glassbox/app/monitor.h"

#include "glassbox/base/error.h"
#include "glassbox/export/repository.h"
#include "glassbox/monitor/runtime.h"

namespace glassbox::app {

namespace fs = std::filesystem;

std::vector<monitor::ModelAlarms> repository_alarms(const fs::path& repository) {
  GB_CHECK(fs::is_directory(repository), NotFound, "model repository '" << repository.string() << "' does not exist",
           "pass the folder glassbox export --format repository wrote (--model-repository DIR)");
  std::vector<monitor::ModelAlarms> out;
  for (const std::string& name : exporter::list_repository_models(repository)) {
    exporter::ParseConfigOptions po;
    po.allow_unknown_fields = true;
    const exporter::RepositoryEntry e = exporter::read_model_repository_entry(repository / name, po);
    monitor::MonitorOptions mo;
    for (const auto& [key, value] : e.config.parameters()) {
      const std::string prefix = "glassbox.monitor.";
      if (key.rfind(prefix, 0) != 0) continue;
      try {
        mo.set(key.substr(prefix.size()), value.string_value());
      } catch (const Error& err) {
        GB_THROW(InvalidArgument, "model '" << name << "': " << err.message(), err.hint());
      }
    }
    bool profiled = false;
    for (std::int64_t v : e.served_versions())
      profiled = profiled || fs::exists(e.dir / std::to_string(v) / "profile.json");
    out.push_back({name, mo.alarms, mo.enabled && profiled});
  }
  GB_CHECK(!out.empty(), NotFound, "model repository '" << repository.string() << "' holds no model",
           "export one into it: glassbox export --checkpoint CKPT --format repository --out " + repository.string());
  return out;
}

std::string monitor_rules(const MonitorToolsJob& job) {
  return monitor::prometheus_rules(repository_alarms(job.repository), {job.triton_names, job.for_duration});
}

nlohmann::json monitor_dashboard(const MonitorToolsJob& job) {
  return monitor::grafana_dashboard(repository_alarms(job.repository), {job.triton_names, job.for_duration});
}

}  // namespace glassbox::app
