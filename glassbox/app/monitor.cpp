// Tested end to end: monitor rules/dashboard by serve_monitor_prometheus (promtool, a real Prometheus), compare by
// monitor_compare_evidently (against Evidently) and serve_monitor (a payload log against its profile).
#include "glassbox/app/monitor.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/progress.h"
#include "glassbox/export/repository.h"
#include "glassbox/monitor/columns.h"
#include "glassbox/monitor/payload_log.h"
#include "glassbox/monitor/profile.h"
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

namespace {

using Clock = std::chrono::steady_clock;

bool is_profile(const fs::path& p) { return fs::is_directory(p) && fs::exists(p / "profile.json"); }

// A profile's kept samples as columns: its features, the confidence and the entropy.
monitor::Columns columns_of(const monitor::Reference& r) {
  monitor::Columns c;
  const auto add = [&](const monitor::ReferenceSample& s) {
    if (s.values.empty()) return;
    c.names.push_back(s.name);
    c.values.emplace_back(s.values.begin(), s.values.end());
    c.integer_text.push_back(false);
  };
  for (const auto& f : r.features) add(f);
  add(r.confidence);
  add(r.entropy);
  c.rows = r.predictions;
  return c;
}

// A payload log read as the profile sees served traffic: each logged sample's features (the
// profile's input), its confidence and entropy (the profile's output).
monitor::Columns columns_of_payload(const fs::path& dir, const monitor::Reference& ref) {
  GB_CHECK(!ref.input.name.empty() || !ref.output.empty(), InvalidArgument,
           "the profile monitors neither an input nor an output", "export the model again to write a full profile");
  monitor::Columns c;
  std::optional<monitor::FeatureExtractor> fx;
  if (!ref.input.name.empty()) {
    fx.emplace(ref.input);
    c.names = fx->names();
  }
  const std::size_t nf = c.names.size();
  if (!ref.output.empty()) {
    c.names.push_back("confidence");
    c.names.push_back("entropy");
  }
  c.values.assign(c.names.size(), {});
  c.integer_text.assign(c.names.size(), false);
  std::map<fs::path, monitor::NpyArray> cache;
  const auto array = [&](const fs::path& file) -> const monitor::NpyArray& {
    auto it = cache.find(file);
    if (it == cache.end()) {
      if (cache.size() > 8) cache.clear();
      it = cache.emplace(file, monitor::read_npy(file)).first;
    }
    return it->second;
  };
  std::vector<double> sample, features(nf), scores;
  for (const monitor::PayloadLine& line : monitor::read_payload_log(dir)) {
    const auto tensor = [&](const char* list, const std::string& name) -> const nlohmann::json* {
      if (!line.record.contains(list) || !line.record[list].is_array()) return nullptr;
      for (const auto& t : line.record[list])
        if (t.value("name", "") == name && t.contains("file")) return &t;
      return nullptr;
    };
    const nlohmann::json* in = fx ? tensor("inputs", ref.input.name) : nullptr;
    const nlohmann::json* out = ref.output.empty() ? nullptr : tensor("outputs", ref.output);
    if (!in && !out) continue;
    const std::int64_t from = (in ? *in : *out)["rows"][0], to = (in ? *in : *out)["rows"][1];
    for (std::int64_t row = from; row < to; ++row) {
      if (in) {
        const monitor::NpyArray& a = array(line.segment / (*in)["file"].get<std::string>());
        const std::size_t width = a.row_elements();
        GB_CHECK(width == static_cast<std::size_t>(ref.input.sample_size()), InvalidArgument,
                 line.segment.string() << ": input rows of " << width << " values; the profile's samples hold "
                                       << ref.input.sample_size(),
                 "compare the payload log of the model the profile belongs to");
        monitor::RawTensor t{a.type, a.shape, nullptr, reinterpret_cast<const std::uint8_t*>(a.data.data()),
                             a.data.size()};
        sample.resize(width);
        monitor::read_elements_for_compare(t, static_cast<std::size_t>(row) * width, sample);
        monitor::InputCounts counts;
        fx->extract(sample, features, {}, 0.0, counts);
        for (std::size_t f = 0; f < nf; ++f)
          if (std::isfinite(features[f])) c.values[f].push_back(static_cast<float>(features[f]));
      }
      if (out) {
        const monitor::NpyArray& a = array(line.segment / (*out)["file"].get<std::string>());
        const std::size_t k = a.row_elements();
        monitor::RawTensor t{a.type, a.shape, nullptr, reinterpret_cast<const std::uint8_t*>(a.data.data()),
                             a.data.size()};
        scores.resize(k);
        monitor::read_elements_for_compare(t, static_cast<std::size_t>(row) * k, scores);
        const monitor::Scored s = monitor::score(scores, ref.output_logits);
        if (s.predicted >= 0) {
          c.values[nf].push_back(static_cast<float>(s.confidence));
          c.values[nf + 1].push_back(static_cast<float>(s.entropy));
        }
      }
      ++c.rows;
    }
  }
  GB_CHECK(c.rows > 0, NotFound, "the payload log " << dir.string() << " holds no record of the profile's tensors",
           "point at the folder glassbox serve --payload-log wrote for this model");
  return c;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else if (ch == '&')
      out += "&amp;";
    else if (ch == '"')
      out += "&quot;";
    else
      out += ch;
  }
  return out;
}

std::string compare_html(const nlohmann::json& r) {
  std::string rows;
  for (const auto& c : r["columns"]) {
    const double score = c["score"].get<double>(), threshold = c["threshold"].get<double>();
    const bool distance = c["stattest"] == "wasserstein" || c["stattest"] == "jensenshannon";
    const double width = distance ? std::min(100.0, 100.0 * score / (2 * threshold))
                                  : std::min(100.0, -10.0 * std::log10(std::max(score, 1e-10)));
    rows += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{:.4g}</td><td class=\"num\">{:.4g}</td>"
        "<td><div class=\"bar\"><span style=\"width:{:.1f}%\"></span></div></td><td>{}</td></tr>\n",
        c["drifted"].get<bool>() ? "drift" : "", html_escape(c["name"].get<std::string>()),
        c["type"].get<std::string>(), c["stattest"].get<std::string>(), score, threshold, width,
        c["drifted"].get<bool>() ? "drift" : "stable");
  }
  return fmt::format(R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>glassbox monitor compare</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330}} h1{{font-size:20px}}
table{{border-collapse:collapse;width:100%;max-width:1100px}} td,th{{padding:4px 8px;border-bottom:1px solid #e5e7eb;text-align:left}}
td.num{{text-align:right;font-variant-numeric:tabular-nums}} tr.drift td{{background:#fef2f2}}
.bar{{width:160px;height:10px;background:#f1f5f9;border-radius:4px}} .bar span{{display:block;height:10px;background:#2563eb;border-radius:4px}}
tr.drift .bar span{{background:#dc2626}} .summary{{margin:12px 0 18px;color:#374151}}
</style></head><body>
<h1>Drift: {} against {}</h1>
<p class="summary">{} of {} columns drifted ({:.1f} %); data set drift: <b>{}</b> (half the columns or more).
Reference {} rows, current {} rows; compared in {:.2f} s.</p>
<table><thead><tr><th>column</th><th>type</th><th>test</th><th>score</th><th>threshold</th><th></th><th>verdict</th></tr></thead>
<tbody>
{}</tbody></table></body></html>
)",
                     html_escape(r["current"]["path"].get<std::string>()),
                     html_escape(r["reference"]["path"].get<std::string>()), r["drifted_columns"].get<int>(),
                     r["columns"].size(), 100 * r["drifted_share"].get<double>(),
                     r["dataset_drift"].get<bool>() ? "yes" : "no", r["reference"]["rows"].get<std::int64_t>(),
                     r["current"]["rows"].get<std::int64_t>(), r["seconds"]["total"].get<double>(), rows);
}

}  // namespace

CompareOutcome run_monitor_compare(const CompareJob& job) {
  const auto t0 = Clock::now();
  const int threads =
      job.threads > 0 ? job.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool ref_profile = is_profile(job.reference);
  GB_CHECK(ref_profile || fs::is_regular_file(job.reference), NotFound,
           "reference '" << job.reference.string() << "' is neither a CSV file nor a profile folder",
           "pass a CSV, or a model version folder holding profile.json (glassbox export writes it)");
  const bool cur_payload = fs::is_directory(job.current);
  GB_CHECK(cur_payload || fs::is_regular_file(job.current), NotFound,
           "current data '" << job.current.string() << "' is neither a CSV file nor a payload log folder",
           "pass a CSV, or the folder glassbox serve --payload-log wrote");
  GB_CHECK(!cur_payload || ref_profile, InvalidArgument, "a payload log is compared with a profile, not with a CSV",
           "pass the model version's folder (profile.json) as --reference");
  const auto bar_for = [&](const std::string& label) {
    auto bar = std::make_shared<ProgressBar>(std::cerr, job.progress);
    bar->set_unit("MB");
    bar->start(label, 0);
    return bar;
  };
  const auto read_csv = [&](const fs::path& p, const std::string& label) {
    auto bar = bar_for(label);
    bool started = false;
    monitor::Columns c = monitor::read_csv_columns(p, threads, [&](std::uint64_t done, std::uint64_t total) {
      if (!started) {
        bar->start(label, static_cast<std::int64_t>(total >> 20));
        started = true;
      }
      bar->update(static_cast<std::int64_t>(done >> 20), "", 0);
    });
    bar->finish(fmt::format("{} rows, {} columns", c.rows, c.names.size()));
    return c;
  };
  std::optional<monitor::Reference> profile;
  monitor::Columns ref, cur;
  if (ref_profile) {
    profile = monitor::read_reference(job.reference);
    ref = columns_of(*profile);
  } else {
    ref = read_csv(job.reference, "reading the reference");
  }
  cur = cur_payload ? columns_of_payload(job.current, *profile) : read_csv(job.current, "reading the current data");
  const auto t_read = Clock::now();
  auto bar = std::make_shared<ProgressBar>(std::cerr, job.progress);
  bar->set_unit("columns");
  monitor::CompareOptions co;
  co.threads = threads;
  bool started = false;
  const std::int64_t ref_rows = ref.rows, cur_rows = cur.rows;
  const std::vector<monitor::ColumnDrift> drift =
      monitor::compare_columns(ref, cur, co, [&](std::size_t done, std::size_t total) {
        if (!started) {
          bar->start("comparing", static_cast<std::int64_t>(total));
          started = true;
        }
        bar->update(static_cast<std::int64_t>(done), "", 0);
      });
  bar->finish(fmt::format("{} columns", drift.size()));
  const auto t_done = Clock::now();
  nlohmann::json cols = nlohmann::json::array();
  int drifted = 0;
  for (const auto& d : drift) {
    cols.push_back(d.to_json());
    drifted += d.drifted ? 1 : 0;
  }
  const double share = drift.empty() ? 0.0 : static_cast<double>(drifted) / static_cast<double>(drift.size());
  CompareOutcome o;
  o.report = {
      {"reference", {{"path", job.reference.string()}, {"kind", ref_profile ? "profile" : "csv"}, {"rows", ref_rows}}},
      {"current", {{"path", job.current.string()}, {"kind", cur_payload ? "payload_log" : "csv"}, {"rows", cur_rows}}},
      {"columns", cols},
      {"drifted_columns", drifted},
      {"drifted_share", share},
      {"dataset_drift", share >= 0.5},
      {"threads", threads},
      {"seconds",
       {{"read", std::chrono::duration<double>(t_read - t0).count()},
        {"compare", std::chrono::duration<double>(t_done - t_read).count()},
        {"total", std::chrono::duration<double>(t_done - t0).count()}}}};
  fs::create_directories(job.out);
  o.json_path = job.out / "drift.json";
  o.html_path = job.out / "drift.html";
  write_file_atomic(o.json_path, o.report.dump(1) + "\n");
  write_file_atomic(o.html_path, compare_html(o.report));
  return o;
}

}  // namespace glassbox::app
