// Tested by cli_test (Tune.*) and, for the range test itself, train_test (LrFinder.*).
#include "glassbox/app/tune.h"

#include <sys/resource.h>

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "glassbox/app/init_weights.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/png.h"
#include "glassbox/core/seed.h"
#include "glassbox/inspect/tensorboard.h"
#include "glassbox/train/datamodule.h"
#include "glassbox/train/run_config.h"
#include "glassbox/train/scheduler.h"
#include "glassbox/train/trainer.h"

namespace glassbox::app {

namespace fs = std::filesystem;

std::vector<std::uint8_t> plot_lr_find(const train::LrFinderResult& r, int width, int height) {
  cv::Mat img(height, width, CV_8UC3, cv::Scalar(255, 255, 255));
  const int left = 70, right = 20, top = 36, bottom = 46;
  const cv::Rect area(left, top, width - left - right, height - top - bottom);
  cv::rectangle(img, area, cv::Scalar(120, 120, 120), 1);
  std::vector<std::size_t> finite;
  for (std::size_t i = 0; i < r.losses.size(); ++i)
    if (std::isfinite(r.losses[i]) && r.lrs[i] > 0) finite.push_back(i);
  auto text = [&](const std::string& s, int x, int y, double scale = 0.4) {
    cv::putText(img, s, cv::Point(x, y), cv::FONT_HERSHEY_SIMPLEX, scale, cv::Scalar(40, 40, 40), 1, cv::LINE_AA);
  };
  if (finite.size() >= 2) {
    double x0 = std::log10(r.lrs[finite.front()]), x1 = std::log10(r.lrs[finite.back()]);
    if (x1 <= x0) x1 = x0 + 1;
    // The loss range, without the last tenth of the points (a diverging end would flatten the rest).
    double y0 = std::numeric_limits<double>::infinity(), y1 = -y0;
    const std::size_t shown = std::max<std::size_t>(2, finite.size() - finite.size() / 10);
    for (std::size_t k = 0; k < finite.size(); ++k) {
      const double v = r.losses[finite[k]];
      y0 = std::min(y0, v);
      if (k < shown) y1 = std::max(y1, v);
    }
    if (!(y1 > y0)) y1 = y0 + 1;
    const double margin = 0.05 * (y1 - y0);
    y0 -= margin;
    y1 += margin;
    auto px = [&](double lr) {
      return left + static_cast<int>(std::lround((std::log10(lr) - x0) / (x1 - x0) * (area.width - 1)));
    };
    auto py = [&](double loss) {
      const double t = std::clamp((loss - y0) / (y1 - y0), 0.0, 1.0);
      return top + static_cast<int>(std::lround((1 - t) * (area.height - 1)));
    };
    for (int d = static_cast<int>(std::ceil(x0)); d <= static_cast<int>(std::floor(x1)); ++d) {
      const int x = px(std::pow(10.0, d));
      cv::line(img, {x, top + area.height}, {x, top + area.height + 4}, cv::Scalar(120, 120, 120));
      text(fmt::format("1e{}", d), x - 12, top + area.height + 18);
    }
    for (int k = 0; k <= 4; ++k) {
      const double v = y0 + (y1 - y0) * k / 4.0;
      text(fmt::format("{:.3g}", v), 6, py(v) + 4);
    }
    text("learning rate (log scale)", left + area.width / 2 - 70, height - 8);
    for (std::size_t i = 0; i < r.raw_losses.size() && i < r.lrs.size(); ++i)
      if (std::isfinite(r.raw_losses[i]) && r.lrs[i] > 0)
        cv::circle(img, {px(r.lrs[i]), py(r.raw_losses[i])}, 1, cv::Scalar(190, 190, 190), cv::FILLED);
    std::vector<cv::Point> pts;
    for (auto i : finite) pts.emplace_back(px(r.lrs[i]), py(r.losses[i]));
    cv::polylines(img, pts, false, cv::Scalar(180, 90, 20), 2, cv::LINE_AA);  // BGR order does not matter: RGB out
    auto mark = [&](std::optional<std::size_t> at, const cv::Scalar& colour) {
      if (!at) return;
      const int x = px(r.lrs[*at]);
      cv::line(img, {x, top}, {x, top + area.height}, colour, 1, cv::LINE_AA);
      cv::circle(img, {x, py(r.losses[*at])}, 4, colour, cv::FILLED, cv::LINE_AA);
    };
    mark(r.valley, cv::Scalar(40, 150, 40));
    mark(r.suggestion, cv::Scalar(200, 40, 40));
  }
  std::string title = "LR range test";
  if (r.suggestion) title += fmt::format("   steepest (red): {:.2e}", r.lrs[*r.suggestion]);
  if (r.valley) title += fmt::format("   valley (green): {:.2e}", r.lrs[*r.valley]);
  text(title, left, 22, 0.45);
  return std::vector<std::uint8_t>(img.data, img.data + img.total() * 3);
}

TuneLrOutcome tune_lr(const TuneLrRequest& request, std::ostream& out) {
  train::RunConfig config = train::load_run_config(request.config_file, request.overrides);
  request.options.validate();
  GB_CHECK(request.apply.empty() || !fs::exists(request.apply), AlreadyExists,
           "--apply " << request.apply.string() << " exists; tune writes a new file and changes no existing one",
           "name a new file, e.g. " + (request.apply.parent_path() / "tuned.toml").string());
  seed_everything(static_cast<std::uint64_t>(config.trainer.seed));
  train::StandardDataModule data(config.data);
  data.setup();
  const train::DataInfo info = data.info();
  auto model = nn::make_model(config.model, nn::ModelShape{info.sample_shape, info.num_classes});
  if (!config.model.init_from.empty()) load_initial_weights(*model->module(), config.model);
  if (config.trainer.gradient_checkpointing) apply_gradient_checkpointing(*model, true);
  train::ModelTask task(config.data.source.task, std::move(model),
                        nn::Loss(config.loss, info.num_classes, config.data.source.task));

  TuneLrOutcome o;
  o.out_dir = request.out_dir.empty() ? fs::path("runs") / (config.name + "-lr_find") : request.out_dir;
  if (!request.quiet)
    out << fmt::format("lr range test: {} steps from {:.1e} to {:.1e} ({})\n", request.options.num_training,
                       request.options.min_lr, request.options.max_lr, name_of(request.options.mode));
  o.result = train::lr_range_test(task, data, config.trainer, config.optim, request.options);
  const train::LrFinderResult& r = o.result;

  fs::create_directories(o.out_dir);
  nlohmann::json j = r.to_json();
  // Lightning's steepest descent at the first point it may pick: the loss fell fastest before
  // anything trains (MixUp, focal loss and label smoothing flatten the start) - rarely a usable rate.
  if (r.suggestion && *r.suggestion <= 10 && r.valley && *r.valley > *r.suggestion + 5) {
    o.warning = fmt::format(
        "the steepest descent is at the start of the range ({:.3e}), where nothing trains yet; the valley "
        "({:.3e}) is the usual alternative (--valley): check the plot",
        r.lrs[*r.suggestion], r.lrs[*r.valley]);
    j["warning"] = o.warning;
  }
  j["min_lr"] = request.options.min_lr;
  j["max_lr"] = request.options.max_lr;
  j["num_training"] = request.options.num_training;
  j["mode"] = name_of(request.options.mode);
  j["early_stop_threshold"] = request.options.early_stop_threshold;
  const int w = 720, h = 440;
  const std::vector<std::uint8_t> rgb = plot_lr_find(r, w, h);
  write_file_atomic(o.out_dir / "lr_find.png", encode_png(rgb.data(), w, h, 3));
  {
    inspect::EventWriter tb(o.out_dir);
    for (std::size_t i = 0; i < r.lrs.size(); ++i) {
      const auto step = static_cast<std::int64_t>(i);
      tb.add_scalar("lr_find/lr", r.lrs[i], step);
      if (std::isfinite(r.losses[i])) tb.add_scalar("lr_find/loss", r.losses[i], step);
      if (std::isfinite(r.raw_losses[i])) tb.add_scalar("lr_find/raw_loss", r.raw_losses[i], step);
    }
    tb.add_image("lr_find/plot", rgb.data(), h, w, 3, 0);
  }

  const std::optional<std::size_t> pick = request.use_valley ? r.valley : r.suggestion;
  if (!request.apply.empty()) {
    GB_CHECK(pick.has_value(), FailedPrecondition,
             "--apply: the range test gave no suggestion (" << r.lrs.size() << " steps; it needs at least 12)",
             "raise --num-training, or lower --min-lr so that more steps run before the loss diverges");
    const double lr = r.lrs[*pick];
    if (config.scheduler.name == train::SchedulerKind::kOnecycle) {
      config.scheduler.max_lr = {lr};
      o.applied_key = "scheduler.max_lr";
    } else {
      config.optim.lr = lr;
      o.applied_key = "optim.lr";
    }
    o.applied_lr = lr;
    write_file_atomic(request.apply, config.to_toml_text());
    j["applied"] = {{"file", request.apply.string()}, {"key", o.applied_key}, {"lr", lr}};
  }
  write_file_atomic(o.out_dir / "lr_find.json", j.dump(2) + "\n");
  if (!request.quiet) {
    if (r.stopped_early) out << "stopped after " << r.lrs.size() << " steps: " << r.stop_reason << "\n";
    out << (r.suggestion ? fmt::format("suggested lr (steepest descent, Lightning): {:.3e}\n", r.lrs[*r.suggestion])
                         : std::string("no suggestion: too few steps before the loss diverged\n"));
    if (r.valley) out << fmt::format("valley (fastai): {:.3e}\n", r.lrs[*r.valley]);
    if (!o.warning.empty()) out << "warning: " << o.warning << "\n";
    if (o.applied_lr)
      out << fmt::format("wrote {} with {} = {:.3e}\n", request.apply.string(), o.applied_key, *o.applied_lr);
    out << "plot: " << (o.out_dir / "lr_find.png").string() << "\n";
  }
  return o;
}

namespace {

// The configured data with another training batch size (the data loaded once for every trial).
class BatchSizeOverride final : public train::DataModule {
 public:
  BatchSizeOverride(train::DataModule& base, std::int64_t batch_size) : base_(base), batch_size_(batch_size) {}
  void setup() override {}
  train::DataInfo info() const override { return base_.info(); }
  std::shared_ptr<const data::Dataset> train_dataset() const override { return base_.train_dataset(); }
  std::shared_ptr<const data::Dataset> val_dataset() const override { return base_.val_dataset(); }
  std::shared_ptr<const data::Dataset> test_dataset() const override { return base_.test_dataset(); }
  data::LoaderOptions train_loader_options() const override {
    data::LoaderOptions o = base_.train_loader_options();
    o.batch_size = batch_size_;
    o.drop_last = false;
    return o;
  }
  data::LoaderOptions eval_loader_options() const override { return base_.eval_loader_options(); }
  data::BatchTransform train_batch_transform() const override { return base_.train_batch_transform(); }

 private:
  train::DataModule& base_;
  std::int64_t batch_size_;
};

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  const std::string what = e.what();
  return what.find("out of memory") != std::string::npos || what.find("CUDA error: out of memory") != std::string::npos;
}

}  // namespace

nlohmann::json TuneBatchOutcome::to_json() const {
  nlohmann::json j = {{"batch_size", batch_size}, {"stop_reason", stop_reason}};
  j["trials"] = nlohmann::json::array();
  for (const auto& t : trials)
    j["trials"].push_back(
        {{"batch_size", t.batch_size}, {"fits", t.fits}, {"peak_rss_mb", t.peak_rss_mb}, {"why", t.why}});
  return j;
}

TuneBatchOutcome tune_batch_size(const TuneBatchRequest& request, std::ostream& out) {
  train::RunConfig config = train::load_run_config(request.config_file, request.overrides);
  GB_CHECK(request.init >= 1 && request.steps_per_trial >= 1 && request.max_trials >= 1, InvalidArgument,
           "--init, --steps-per-trial and --max-trials must be >= 1", "use e.g. --init 2 --steps-per-trial 3");
  GB_CHECK(request.memory_limit_mb >= 0, InvalidArgument,
           "--memory-limit-mb must be >= 0, got " << request.memory_limit_mb, "use e.g. 4096, or 0 for none");
  GB_CHECK(request.apply.empty() || !fs::exists(request.apply), AlreadyExists,
           "--apply " << request.apply.string() << " exists; tune writes a new file and changes no existing one",
           "name a new file, e.g. " + (request.apply.parent_path() / "tuned.toml").string());
  seed_everything(static_cast<std::uint64_t>(config.trainer.seed));
  train::StandardDataModule data(config.data);
  data.setup();
  const train::DataInfo info = data.info();
  const std::int64_t n = data.train_dataset()->size();
  TuneBatchOutcome o;
  std::int64_t size = request.init;
  for (std::int64_t trial = 0; trial < request.max_trials; ++trial) {
    if (size > n) {
      o.stop_reason = fmt::format("a batch of {} would exceed the training set ({} samples)", size, n);
      break;
    }
    BatchTrial t;
    t.batch_size = size;
    {
      // A fresh model and optimiser per trial, as the real run would have.
      auto model = nn::make_model(config.model, nn::ModelShape{info.sample_shape, info.num_classes});
      if (config.trainer.gradient_checkpointing) apply_gradient_checkpointing(*model, true);
      train::ModelTask task(config.data.source.task, std::move(model),
                            nn::Loss(config.loss, info.num_classes, config.data.source.task));
      train::TrainerOptions to = config.trainer;
      to.max_steps = request.steps_per_trial;
      to.max_epochs = -1;
      to.max_time = 0;
      to.limit_val_batches = 0;
      to.num_sanity_val_steps = 0;
      to.enable_checkpointing = false;
      to.enable_progress_bar = false;
      to.enable_model_summary = false;
      to.accumulate_grad_batches = 1;
      BatchSizeOverride trial_data(data, size);
      try {
        train::Trainer trainer(to, config.optim, train::SchedulerOptions{});  // a few steps: no schedule
        trainer.fit(task, trial_data);
        t.fits = true;
      } catch (const std::exception& e) {
        if (!is_out_of_memory(e)) throw;
        t.why = "out of memory";
      }
    }
    t.peak_rss_mb = peak_rss_mb();
    if (t.fits && request.memory_limit_mb > 0 && t.peak_rss_mb > request.memory_limit_mb) {
      t.fits = false;
      t.why = fmt::format("peak resident memory {:.0f} MB above the limit of {:.0f} MB", t.peak_rss_mb,
                          request.memory_limit_mb);
    }
    if (!request.quiet)
      out << fmt::format("batch size {:>6}: {}\n", size,
                         t.fits ? fmt::format("fits (peak resident memory {:.0f} MB)", t.peak_rss_mb) : t.why);
    o.trials.push_back(t);
    if (!t.fits) {
      o.stop_reason = fmt::format("a batch of {} did not fit: {}", size, t.why);
      break;
    }
    o.batch_size = size;
    size *= 2;
  }
  if (o.stop_reason.empty()) o.stop_reason = fmt::format("{} trials", request.max_trials);
  if (!request.apply.empty()) {
    GB_CHECK(o.batch_size > 0, FailedPrecondition, "--apply: no batch size fitted (" << o.stop_reason << ")",
             "raise --memory-limit-mb or lower --init");
    config.data.loader.batch_size = o.batch_size;
    write_file_atomic(request.apply, config.to_toml_text());
  }
  if (!request.quiet) {
    out << fmt::format("largest batch size that fits: {} ({})\n", o.batch_size, o.stop_reason);
    if (!request.apply.empty())
      out << fmt::format("wrote {} with data.loader.batch_size = {}\n", request.apply.string(), o.batch_size);
  }
  return o;
}

}  // namespace glassbox::app
