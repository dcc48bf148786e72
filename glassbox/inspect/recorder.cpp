#include "glassbox/inspect/recorder.h"

#include <set>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/inspect/stats.h"

namespace glassbox::inspect {

namespace {

thread_local ForwardRecorder* tl_recorder = nullptr;
thread_local int tl_depth = 0;

// Ops that only re-view, copy or cast: on parameters they make a derived parameter (e.g. the
// bf16 copy autocast feeds to linear); on activations they add no information.
bool is_view_or_cast(const std::string& op) {
  static const std::set<std::string> ops = {
      "aten::view",     "aten::reshape",      "aten::_reshape_alias", "aten::flatten",    "aten::unflatten",
      "aten::t",        "aten::transpose",    "aten::permute",        "aten::contiguous", "aten::to",
      "aten::_to_copy", "aten::detach",       "aten::expand",         "aten::expand_as",  "aten::unsqueeze",
      "aten::squeeze",  "aten::alias",        "aten::clone",          "aten::type_as",    "aten::as_strided",
      "aten::slice",    "aten::select",       "aten::narrow",         "aten::numpy_T",    "aten::mT",
      "aten::view_as",  "aten::reshape_as",   "aten::lift_fresh",     "aten::split",      "aten::chunk",
      "aten::unbind",   "aten::resolve_conj", "aten::resolve_neg"};
  return ops.count(op) > 0;
}

bool is_cast(const std::string& op) { return op == "aten::to" || op == "aten::_to_copy" || op == "aten::type_as"; }

struct Context final : at::ObserverContext {
  std::unique_ptr<ForwardRecorder::Pending> pending;
};

std::unique_ptr<at::ObserverContext> start_callback(const at::RecordFunction& fn) {
  const int depth = ++tl_depth;
  if (depth != 1 || tl_recorder == nullptr) return nullptr;
  auto pending = tl_recorder->on_start(fn.name(), fn.inputs());
  if (!pending) return nullptr;
  auto ctx = std::make_unique<Context>();
  ctx->pending = std::move(pending);
  return ctx;
}

void end_callback(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  --tl_depth;
  if (ctx == nullptr || tl_recorder == nullptr) return;
  tl_recorder->on_end(*static_cast<Context*>(ctx)->pending, fn.outputs());
}

template <class F>
void each_tensor(c10::ArrayRef<const c10::IValue> values, F&& f) {
  for (const auto& v : values) {
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined()) f(t);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector())
        if (t.defined()) f(t);
    }
  }
}

at::Tensor first_tensor(const std::vector<c10::IValue>& values) {
  for (const auto& v : values) {
    if (v.isTensor()) return v.toTensor();
    if (v.isTensorList()) {
      auto list = v.toTensorVector();
      if (!list.empty()) return list.front();
    }
  }
  return {};
}

}  // namespace

struct ForwardRecorder::Pending {
  std::string op;
  int param_owner = -1;     // unit owning a parameter/buffer among the inputs
  bool only_params = true;  // every tensor input is a parameter, buffer or a view/cast of one
  bool inputs_finite = true;
  double input_max_abs = 0;
};

ForwardRecorder::ForwardRecorder(const LayerMap& map, RecorderOptions options) : map_(map), options_(options) {
  GB_CHECK(tl_recorder == nullptr, FailedPrecondition, "a ForwardRecorder is already active on this thread",
           "stop the other recorder first (one per thread)");
  tl_recorder = this;
  tl_depth = 0;
  at::RecordFunctionCallback cb(&start_callback, &end_callback);
  cb.needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION});
  handle_ = at::addThreadLocalCallback(cb);
}

ForwardRecorder::~ForwardRecorder() { stop(); }

void ForwardRecorder::stop() {
  if (handle_ == 0) return;
  at::removeCallback(handle_);
  handle_ = 0;
  if (tl_recorder == this) tl_recorder = nullptr;
  tl_depth = 0;
  derived_.clear();
}

std::unique_ptr<ForwardRecorder::Pending> ForwardRecorder::on_start(const char* name,
                                                                    c10::ArrayRef<const c10::IValue> inputs) {
  if (records_.size() >= options_.max_ops) return nullptr;
  at::DisableRecordFunctionGuard no_record;
  torch::NoGradGuard no_grad;
  auto p = std::make_unique<Pending>();
  p->op = name;
  bool any_tensor = false;
  each_tensor(inputs, [&](const at::Tensor& t) {
    any_tensor = true;
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    int owner = map_.owner(impl);
    if (owner < 0) {
      auto it = derived_.find(impl);
      if (it != derived_.end()) owner = it->second.second;
    }
    if (owner >= 0) {
      if (p->param_owner < 0) p->param_owner = owner;
    } else {
      p->only_params = false;
    }
    if (options_.check_finite && t.is_floating_point() && t.numel() > 0) {
      at::Tensor a = t.detach().abs();
      const bool finite = torch::isfinite(a).all().item<bool>();
      if (!finite) p->inputs_finite = false;
      if (finite) p->input_max_abs = std::max(p->input_max_abs, a.max().item<double>());
    }
  });
  if (!any_tensor) p->only_params = false;
  if (options_.track_in_flight) {
    in_flight_ = InFlightOp{};
    in_flight_.op = p->op;
    if (p->param_owner >= 0) {
      const Unit& u = map_.units()[static_cast<std::size_t>(p->param_owner)];
      in_flight_.layer = u.path;
      in_flight_.type = u.type;
    }
    each_tensor(inputs, [&](const at::Tensor& t) {
      if (!in_flight_.inputs.empty()) in_flight_.inputs += ", ";
      std::string shape = "[";
      for (std::int64_t d = 0; d < t.dim(); ++d) shape += (d ? ", " : "") + std::to_string(t.size(d));
      in_flight_.inputs += std::string(c10::toString(t.scalar_type())) + " " + t.device().str() + " " + shape + "]";
    });
  }
  return p;
}

int ForwardRecorder::attribute(const std::string& op, int param_owner) {
  const auto& units = map_.units();
  if (param_owner >= 0) {
    cursor_ = param_owner;
    return param_owner;
  }
  const int n = static_cast<int>(units.size());
  // A parameterless module of the kind that runs this op, before the next module with tensors.
  for (int u = cursor_ + 1; u < n && !units[u].has_tensors; ++u) {
    if (units[u].known_kind && LayerMap::kind_runs_op(units[u].type, op)) {
      cursor_ = u;
      return u;
    }
  }
  // The parameterless module of the user's own kind that is running, or the next such one.
  if (cursor_ >= 0 && !units[cursor_].has_tensors && !units[cursor_].known_kind) return cursor_;
  for (int u = cursor_ + 1; u < n && !units[u].has_tensors; ++u) {
    if (!units[u].known_kind) {
      cursor_ = u;
      return u;
    }
  }
  return -1;
}

void ForwardRecorder::on_end(Pending& p, const std::vector<c10::IValue>& outputs) {
  // An op that threw ends (the guard's destructor) with no outputs: keep it as the one in flight.
  if (options_.track_in_flight && !outputs.empty()) in_flight_ = InFlightOp{};
  at::DisableRecordFunctionGuard no_record;
  torch::NoGradGuard no_grad;
  at::Tensor out = first_tensor(outputs);
  if (!out.defined() || !out.is_floating_point()) return;
  const bool view = is_view_or_cast(p.op);
  if (view && p.only_params && p.param_owner >= 0) {
    derived_[out.unsafeGetTensorImpl()] = {out, p.param_owner};  // e.g. the transpose addmm reads, autocast's bf16 copy
    return;
  }
  if (view && options_.skip_views && !(options_.check_finite && is_cast(p.op))) return;
  OpRecord r;
  r.index = static_cast<std::int64_t>(records_.size());
  r.op = p.op;
  r.unit = attribute(p.op, p.param_owner);
  const std::string base = p.op.rfind("aten::", 0) == 0 ? p.op.substr(6) : p.op;
  if (r.unit >= 0) {
    const Unit& u = map_.units()[static_cast<std::size_t>(r.unit)];
    r.layer = u.path.empty() ? u.type : u.path;
  } else {
    const std::string before = cursor_ >= 0 ? (map_.units()[static_cast<std::size_t>(cursor_)].path.empty()
                                                   ? map_.units()[static_cast<std::size_t>(cursor_)].type
                                                   : map_.units()[static_cast<std::size_t>(cursor_)].path)
                                            : std::string("input");
    r.layer = before + ":" + base;
  }
  r.shape = out.sizes().vec();
  r.dtype = std::string(c10::toString(out.scalar_type()));
  r.inputs_finite = p.inputs_finite;
  r.input_max_abs = p.input_max_abs;
  if (options_.check_finite && out.numel() > 0) {
    at::Tensor bad = ~torch::isfinite(out.detach());
    r.nonfinite = bad.sum().item<std::int64_t>();
    r.output_finite = r.nonfinite == 0;
    if (!r.output_finite && out.dim() >= 1)
      r.bad_rows = bad.reshape({out.size(0), -1}).any(1).nonzero().flatten().cpu();
  }
  if (options_.stats) r.stats = activation_stats_row(out);
  if (options_.keep_outputs) r.output = out.detach().clone();
  records_.push_back(std::move(r));
}

const OpRecord* ForwardRecorder::first_nonfinite_origin() const {
  for (const auto& r : records_)
    if (!r.output_finite && r.inputs_finite) return &r;
  return nullptr;
}

std::vector<const OpRecord*> ForwardRecorder::layer_outputs() const {
  std::vector<const OpRecord*> out;
  std::unordered_map<std::string, std::size_t> pos;
  for (const auto& r : records_) {
    auto it = pos.find(r.layer);
    if (it == pos.end()) {
      pos[r.layer] = out.size();
      out.push_back(&r);
    } else {
      out[it->second] = &r;
    }
  }
  return out;
}

}  // namespace glassbox::inspect
