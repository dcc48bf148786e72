#include "glassbox/inspect/diagnostics.h"

#include <ostream>

#include <torch/torch.h>

#include "glassbox/inspect/nonfinite.h"
#include "glassbox/inspect/probes.h"
#include "glassbox/inspect/tensorboard.h"
#include "glassbox/train/trainer.h"

namespace glassbox::inspect {

namespace {

// Owns the event writer; mirrors every logged metric row into it.
class TensorBoardCallback final : public train::Callback {
 public:
  TensorBoardCallback(std::unique_ptr<EventWriter> writer, std::string config_text, nlohmann::json hparams)
      : writer_(std::move(writer)), config_text_(std::move(config_text)), hparams_(std::move(hparams)) {}
  std::string name() const override { return "TensorBoard"; }
  EventWriter* writer() { return writer_.get(); }

  void on_fit_start(train::Trainer& t) override {
    if (!sink_added_) {
      sink_added_ = true;
      EventWriter* w = writer_.get();
      t.logger().add_sink([w](const nlohmann::json& row) {
        const std::int64_t step = row.value("step", std::int64_t{0});
        for (auto it = row.begin(); it != row.end(); ++it) {
          if (it.key() == "step" || it.key() == "epoch" || !it.value().is_number()) continue;
          w->add_scalar(it.key(), it.value().get<double>(), step);
        }
      });
    }
    if (!config_text_.empty()) writer_->add_text("config", "```toml\n" + config_text_ + "```", t.global_step());
    std::map<std::string, HParamValue> hp;
    for (auto it = hparams_.begin(); it != hparams_.end(); ++it) {
      const auto& v = it.value();
      if (v.is_boolean()) {
        hp.emplace(it.key(), v.get<bool>());
      } else if (v.is_number()) {
        hp.emplace(it.key(), v.get<double>());
      } else if (v.is_string()) {
        hp.emplace(it.key(), v.get<std::string>());
      }
    }
    if (!hp.empty() && !hparams_written_) {
      hparams_written_ = true;
      writer_->add_hparams(hp, {"val_loss", "val_acc", "test_loss", "test_acc", "train_loss"});
    }
    writer_->flush();
  }
  void on_validation_end(train::Trainer&) override { writer_->flush(); }
  void on_train_end(train::Trainer&) override { writer_->flush(); }
  void on_test_end(train::Trainer&) override { writer_->flush(); }
  void on_exception(train::Trainer&, const std::exception&) override { writer_->flush(); }

 private:
  std::unique_ptr<EventWriter> writer_;
  std::string config_text_;
  nlohmann::json hparams_;
  bool sink_added_ = false;
  bool hparams_written_ = false;
};

}  // namespace

nlohmann::json flatten_hparams(const nlohmann::json& config) {
  nlohmann::json out = nlohmann::json::object();
  std::function<void(const std::string&, const nlohmann::json&)> walk = [&](const std::string& prefix,
                                                                            const nlohmann::json& j) {
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it)
        walk(prefix.empty() ? it.key() : prefix + "." + it.key(), it.value());
    } else if (j.is_array()) {
      out[prefix] = j.dump();
    } else if (j.is_number() || j.is_string() || j.is_boolean()) {
      out[prefix] = j;
    }
  };
  walk("", config);
  return out;
}

Diagnostics install_diagnostics(train::Trainer& trainer, const train::DiagnosticsOptions& options,
                                const std::filesystem::path& run_dir, std::ostream& out, const std::string& config_text,
                                const nlohmann::json& hparams) {
  options.validate();
  Diagnostics d;
  if (options.tensorboard && !run_dir.empty()) {
    auto cb = std::make_unique<TensorBoardCallback>(std::make_unique<EventWriter>(run_dir), config_text, hparams);
    d.writer = cb->writer();
    trainer.add_callback(std::move(cb));
  }
  auto probes = std::make_unique<ProbeCallback>(
      ProbeOptions::from(options), d.writer,
      run_dir.empty() || options.probe_every_n_steps == 0 ? std::filesystem::path() : run_dir / "probes.jsonl", &out);
  d.probes = probes.get();
  trainer.add_callback(std::move(probes));
  NonFinitePolicy policy = NonFinitePolicy::Stop;
  switch (options.nonfinite) {
    case train::NonFiniteAction::kStop: policy = NonFinitePolicy::Stop; break;
    case train::NonFiniteAction::kSkip: policy = NonFinitePolicy::Skip; break;
    case train::NonFiniteAction::kContinue: policy = NonFinitePolicy::Continue; break;
    case train::NonFiniteAction::kOff: break;
  }
  if (options.nonfinite != train::NonFiniteAction::kOff) {
    auto guard = std::make_unique<NonFiniteMonitor>(
        policy, &out, run_dir.empty() ? std::filesystem::path() : run_dir / "nonfinite.json",
        options.grad_norm_every_step ? GradientCheck::EveryStep : GradientCheck::WhenComputed);
    d.nonfinite = guard.get();
    trainer.add_callback(std::move(guard));
  }
  return d;
}

}  // namespace glassbox::inspect
