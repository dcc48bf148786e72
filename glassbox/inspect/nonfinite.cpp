#include "glassbox/inspect/nonfinite.h"

#include <cmath>
#include <ostream>
#include <sstream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/seed.h"
#include "glassbox/inspect/recorder.h"
#include "glassbox/nn/batchnorm.h"
#include "glassbox/train/precision.h"
#include "glassbox/train/trainer.h"

namespace glassbox::inspect {

namespace {

std::vector<std::int64_t> to_vector(const at::Tensor& t) {
  std::vector<std::int64_t> v;
  if (!t.defined()) return v;
  at::Tensor c = t.to(torch::kCPU, torch::kLong).contiguous();
  v.assign(c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel());
  return v;
}

std::string list_samples(const std::vector<std::int64_t>& s, std::size_t max = 8) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  if (s.size() > max) out += fmt::format(" and {} more", s.size() - max);
  return out;
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string compose_message(const NonFiniteEvent& e) {
  const std::string where = fmt::format("step {} (epoch {}, batch {})", e.step, e.epoch, e.batch);
  const std::string samples = e.bad_samples.empty() ? "" : "; samples " + list_samples(e.bad_samples);
  if (e.kind == "input")
    return fmt::format("non-finite input at {}: {} NaN/Inf values in the batch{}", where, e.nonfinite, samples);
  if (e.kind == "activation" || e.kind == "loss") {
    return fmt::format(
        "non-finite {} at {}: {} \"{}\"{} produced {} NaN/Inf values in {} {} from finite inputs (max |input| "
        "{:.4g}){}",
        e.kind == "loss" ? "loss" : "activation", where, e.type.empty() ? "function" : "module", e.layer,
        e.type.empty() ? "" : " (" + e.type + ")", e.nonfinite, e.op, shape_str(e.shape), e.input_max_abs, samples);
  }
  if (e.kind == "parameter")
    return fmt::format(
        "non-finite loss at {}: parameter {} already holds {} NaN/Inf values (an earlier update broke it)", where,
        e.layer, e.nonfinite);
  if (e.kind == "gradient" && e.parameter.empty()) {
    return fmt::format(
        "non-finite gradient at {} (loss {:.4g} was finite); replaying the step gave finite gradients (a "
        "non-deterministic op?)",
        where, e.loss);
  }
  if (e.kind == "gradient") {
    return fmt::format(
        "non-finite gradient at {} (loss {:.4g} was finite): the first parameter in backward order with NaN/Inf "
        "gradient is {} "
        "(module \"{}\", {}; {} values)",
        where, e.loss, e.parameter, e.layer, e.type, e.nonfinite);
  }
  return fmt::format("non-finite loss at {}: no op in the forward pass produced it from finite inputs", where);
}

}  // namespace

nlohmann::json NonFiniteEvent::to_json() const {
  return {{"step", step},
          {"epoch", epoch},
          {"batch", batch},
          {"kind", kind},
          {"layer", layer},
          {"type", type},
          {"op", op},
          {"shape", shape},
          {"nonfinite", nonfinite},
          {"input_max_abs", input_max_abs},
          {"samples", samples},
          {"bad_samples", bad_samples},
          {"parameter", parameter},
          {"loss", std::isfinite(loss) ? nlohmann::json(loss) : nlohmann::json(nullptr)},
          {"message", message}};
}

RngSnapshot RngSnapshot::take() { return {cpu_rng_state(), cuda_rng_states()}; }

void RngSnapshot::restore() const {
  if (cpu.defined()) set_cpu_rng_state(cpu);
  if (!cuda.empty()) set_cuda_rng_states(cuda);
}

NonFiniteEvent localise_nonfinite(train::TaskModule& task, const data::Batch& batch, const LayerMap& map,
                                  train::Precision* precision, const RngSnapshot* rng,
                                  const at::Tensor& dataset_index) {
  NonFiniteEvent e;
  e.batch = batch.batch_index;
  at::Tensor index =
      batch.indices.defined() ? batch.indices.to(torch::kCPU, torch::kLong) : torch::arange(batch.inputs.size(0));
  const auto to_dataset = [&](const at::Tensor& rows) {
    at::Tensor ids = at::index_select(index, 0, rows.to(torch::kCPU, torch::kLong));
    if (dataset_index.defined()) ids = at::index_select(dataset_index.to(torch::kCPU, torch::kLong), 0, ids);
    return to_vector(ids);
  };
  e.samples = to_dataset(torch::arange(index.size(0)));
  torch::NoGradGuard outer_no_grad;
  // 1. The batch itself.
  if (batch.inputs.is_floating_point() && batch.inputs.numel() > 0) {
    at::Tensor bad = ~torch::isfinite(batch.inputs);
    const std::int64_t n = bad.sum().item<std::int64_t>();
    if (n > 0) {
      e.kind = "input";
      e.nonfinite = n;
      e.shape = batch.inputs.sizes().vec();
      e.bad_samples = to_dataset(bad.reshape({batch.inputs.size(0), -1}).any(1).nonzero().flatten());
      e.message = compose_message(e);
      return e;
    }
  }
  // 2. Replay the forward pass with every op checked.
  const RngSnapshot now = RngSnapshot::take();
  std::vector<std::pair<at::Tensor, at::Tensor>> buffers;
  for (auto& b : task.module().buffers(true)) buffers.emplace_back(b, b.clone());
  std::vector<at::Tensor> grads;
  for (auto& p : task.module().parameters(true)) grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  if (rng != nullptr) rng->restore();
  train::StepOutput out;
  const OpRecord* origin = nullptr;
  std::unique_ptr<ForwardRecorder> rec;
  {
    torch::AutoGradMode grad_mode(true);
    RecorderOptions ro;
    ro.stats = false;
    ro.check_finite = true;
    rec = std::make_unique<ForwardRecorder>(map, ro);
    {
      std::unique_ptr<train::AutocastScope> scope = precision != nullptr ? precision->autocast() : nullptr;
      out = task.training_step(batch);
    }
    rec->stop();
    origin = rec->first_nonfinite_origin();
    const bool loss_finite = out.loss.defined() && torch::isfinite(out.loss.detach()).all().item<bool>();
    e.loss = out.loss.defined() ? out.loss.detach().to(torch::kDouble).item<double>() : NAN;
    if (origin != nullptr) {
      e.kind = origin->shape.empty() || (origin->shape.size() == 1 && origin->shape[0] == 1) ? "loss" : "activation";
      e.layer = origin->layer;
      e.type = origin->unit >= 0 ? map.units()[static_cast<std::size_t>(origin->unit)].type : "";
      e.op = origin->op;
      e.shape = origin->shape;
      e.nonfinite = origin->nonfinite;
      e.input_max_abs = origin->input_max_abs;
      if (origin->bad_rows.defined() && !origin->shape.empty() && origin->shape[0] == index.size(0))
        e.bad_samples = to_dataset(origin->bad_rows);
    } else if (!loss_finite) {
      for (const auto& p : map.parameters()) {
        const std::int64_t n = (~torch::isfinite(p.tensor.detach())).sum().item<std::int64_t>();
        if (n > 0) {
          e.kind = "parameter";
          e.layer = p.name;
          e.type = map.units()[static_cast<std::size_t>(p.unit)].type;
          e.nonfinite = n;
          break;
        }
      }
      if (e.kind.empty()) e.kind = "loss";
    } else if (out.loss.requires_grad()) {
      // 3. The forward pass was finite: find the first parameter, in backward order, whose
      // gradient is non-finite (hooks fire in the order autograd computes them).
      std::vector<at::Tensor> params;
      std::vector<const NamedParameter*> named;
      for (const auto& p : map.parameters())
        if (p.tensor.requires_grad()) {
          params.push_back(p.tensor);
          named.push_back(&p);
        }
      std::vector<std::pair<std::size_t, std::int64_t>> fired;  // parameter, non-finite count
      std::vector<unsigned> hooks;
      for (std::size_t i = 0; i < params.size(); ++i) {
        hooks.push_back(params[i].register_hook([&fired, i](const at::Tensor& g) {
          torch::NoGradGuard ng;
          fired.emplace_back(i, (~torch::isfinite(g)).sum().item<std::int64_t>());
        }));
      }
      at::Tensor scaled = precision != nullptr ? precision->scale(out.loss) : out.loss;
      torch::autograd::grad({scaled}, params, {}, /*retain_graph=*/false, /*create_graph=*/false,
                            /*allow_unused=*/true);
      for (std::size_t i = 0; i < params.size(); ++i) params[i].remove_hook(hooks[i]);
      for (const auto& [i, n] : fired) {
        if (n == 0) continue;
        e.kind = "gradient";
        e.parameter = named[i]->name;
        e.layer = map.units()[static_cast<std::size_t>(named[i]->unit)].path;
        e.type = map.units()[static_cast<std::size_t>(named[i]->unit)].type;
        e.nonfinite = n;
        break;
      }
      if (e.kind.empty()) e.kind = "gradient";  // not reproduced (e.g. the scaler's overflow)
    }
  }
  rec.reset();
  for (auto& [b, saved] : buffers) b.copy_(saved);
  {
    std::size_t i = 0;
    for (auto& p : task.module().parameters(true)) {
      if (grads[i].defined()) {
        p.mutable_grad() = grads[i];
      } else {
        p.mutable_grad() = at::Tensor();
      }
      ++i;
    }
  }
  now.restore();
  e.message = compose_message(e);
  return e;
}

NonFiniteMonitor::NonFiniteMonitor(NonFinitePolicy policy, std::ostream* out, std::filesystem::path report,
                                   GradientCheck check_gradients)
    : policy_(policy), out_(out), report_path_(std::move(report)), check_gradients_(check_gradients) {}

NonFiniteMonitor::~NonFiniteMonitor() = default;

void NonFiniteMonitor::on_fit_start(train::Trainer& t) {
  map_ = std::make_unique<LayerMap>(t.task()->module());
  first_.reset();
  events_ = scaler_skips_ = 0;
}

void NonFiniteMonitor::on_train_batch_start(train::Trainer& t, const data::Batch& batch) {
  if (t.sanity_checking()) return;
  batch_ = batch;
  // The generator states a replay needs: the CPU one always (dropout masks of CPU models, data
  // augmentation), the CUDA ones only when training there.
  rng_.cpu = cpu_rng_state();
  if (t.device().is_cuda()) {
    rng_.cuda = cuda_rng_states();
  } else {
    rng_.cuda.clear();
  }
}

void NonFiniteMonitor::on_before_backward(train::Trainer&, const at::Tensor& loss) { loss_ = loss.detach(); }

void NonFiniteMonitor::on_after_backward(train::Trainer& t) {
  if (check_gradients_ == GradientCheck::EveryStep) t.request_grad_norm();
  if (!loss_.defined()) return;
  // One host read; the loss is a scalar (with accumulation, the micro-batch's).
  const bool finite =
      loss_.numel() == 1 ? std::isfinite(loss_.item<double>()) : torch::isfinite(loss_).all().item<bool>();
  loss_ = at::Tensor();
  if (!finite) report(t, "loss");
}

void NonFiniteMonitor::on_before_optimizer_step(train::Trainer& t) {
  const bool bad = bad_in_window_;
  bad_in_window_ = false;
  if (bad) return;  // already reported for this step (the loss)
  if (check_gradients_ == GradientCheck::Off) return;
  const double g = t.last_grad_norm();
  if (!t.has_grad_norm() || std::isfinite(g)) return;
  if (t.precision().uses_scaler()) {
    ++scaler_skips_;  // the GradScaler skips this step and lowers its scale
    return;
  }
  report(t, "gradient");
}

void NonFiniteMonitor::report(train::Trainer& t, const std::string& what) {
  ++events_;
  bad_in_window_ = what == "loss";
  if (!first_) {
    at::Tensor ds_index;
    if (const auto& ds = t.train_dataset()) {
      if (batch_.indices.defined() && dynamic_cast<const data::SubsetDataset*>(ds.get()) != nullptr) {
        // Map positions in the training split to positions in the file.
        ds_index = data::root_indices(*ds, torch::arange(ds->size()));
      }
    }
    // The replay runs on this rank alone: SyncBatchNorm's collectives would wait for the others.
    const nn::BatchNormSyncPause local_batchnorm(t.task()->module());
    NonFiniteEvent e = localise_nonfinite(*t.task(), batch_, *map_, &t.precision(), &rng_, ds_index);
    e.step = t.global_step();
    e.epoch = t.current_epoch();
    e.batch = batch_.batch_index;    // the loader's position of the batch in its epoch
    e.message = compose_message(e);  // with the trainer's step numbers
    first_ = e;
    if (out_ != nullptr) *out_ << "glassbox: " << e.message << "\n" << std::flush;
    if (!report_path_.empty()) {
      try {
        write_file_atomic(report_path_, e.to_json().dump(2) + "\n");
      } catch (const std::exception& ex) {
        if (out_ != nullptr)
          *out_ << "glassbox: warning: could not write " << report_path_.string() << ": " << ex.what() << "\n";
      }
    }
  }
  switch (policy_) {
    case NonFinitePolicy::Stop:
      t.skip_step("non-finite " + what);
      t.request_stop(
          "non-finite " + what + " at step " + std::to_string(t.global_step()) + (first_ ? ": " + first_->message : ""),
          train::StopKind::kNonFinite);
      break;
    case NonFinitePolicy::Skip: t.skip_step("non-finite " + what); break;
    case NonFinitePolicy::Continue: break;
  }
}

}  // namespace glassbox::inspect
