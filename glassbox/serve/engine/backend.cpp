// The TorchScript and glassbox backends (backend.h): loading, per-instance modules, execution,
// warm-up and the load check. The plan derived from the config and forward()'s schema is
// model_plan.cpp's.
#include "glassbox/serve/engine/backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <mutex>

#include <opencv2/core.hpp>
#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/data/image.h"
#include "glassbox/serve/engine/model_plan.h"
#include "glassbox/serve/engine/torch_io.h"

namespace glassbox::serve {
namespace {

namespace fs = std::filesystem;
namespace triton = exporter::triton;
using Clock = std::chrono::steady_clock;
using detail::dims_match;
using detail::error_summary;
using detail::InputPlan;
using detail::join;
using detail::OutputPlan;
using detail::Plan;
using detail::Platform;
using detail::positive_parameter;
using detail::to_vector;

std::uint64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

int default_threads() {
  static const int n = at::intraop_default_num_threads();
  return n;
}

// INTER_OP_THREAD_COUNT: one process-wide pool, sized by the first load that asks.
void apply_inter_op_threads(const triton::ModelConfig& c) {
  const int n = positive_parameter(c, "INTER_OP_THREAD_COUNT");
  if (n == 0) return;
  static std::mutex mu;
  static int applied = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (applied == n) return;
  if (applied == 0) {
    try {
      at::set_num_interop_threads(n);
      applied = n;
      return;
    } catch (const std::exception&) {
      // The pool already started (or was sized elsewhere): fall through to the note.
    }
  }
  std::clog << "serve: model '" << c.name() << "' asks for INTER_OP_THREAD_COUNT " << n
            << "; LibTorch's inter-op pool is process-wide and already has " << at::get_num_interop_threads()
            << " threads, kept\n";
}

torch::jit::Module load_module(const fs::path& file, const std::string& who) {
  const std::string hint =
      "save the model with torch.jit.save(torch.jit.script(model), path) or glassbox export --format repository";
  GB_CHECK(fs::is_regular_file(file), NotFound, who << ": no model file " << file.string(), hint);
  try {
    torch::jit::Module m = torch::jit::load(file.string(), c10::Device(c10::kCPU));
    m.eval();
    return m;
  } catch (const std::exception& e) {
    GB_THROW(DataLoss, who << ": " << file.string() << " is not a TorchScript archive (" << error_summary(e) << ")",
             hint);
  }
}

// One warm-up (or load-check) sample: the inputs of one request of batch 1 (or the config's shape).
std::vector<Tensor> warmup_sample(const Plan& p, const triton::ModelWarmup& w) {
  std::vector<Tensor> sample;
  at::Generator gen = at::detail::createCPUGenerator(0);
  for (const InputPlan& in : p.inputs) {
    const auto it = w.inputs().find(in.name);
    GB_CHECK(it != w.inputs().end(), InvalidArgument,
             p.who() << ": model_warmup '" << w.name() << "' gives no data for input '" << in.name << "'",
             std::string("add inputs { key: \"") + in.name + "\" value: { ... zero_data: true } }");
    const triton::ModelWarmup::Input& wi = it->second;
    GB_CHECK(wi.data_type() == in.config_type, InvalidArgument,
             p.who() << ": model_warmup '" << w.name() << "' input '" << in.name << "' is "
                     << triton::DataType_Name(wi.data_type()) << ", the input is "
                     << triton::DataType_Name(in.config_type),
             std::string("use the input's data type"));
    std::vector<std::int64_t> dims = to_vector(wi.dims());
    const std::int64_t count = element_count(dims);
    std::string data;
    if (wi.has_input_data_file()) {
      const fs::path file = p.model_dir / "warmup" / wi.input_data_file();
      data = read_file(file);
      if (in.bytes) {
        detail::parse_strings({reinterpret_cast<const std::uint8_t*>(data.data()), data.size()}, count,
                              "warm-up file " + file.string());
      } else {
        GB_CHECK(data.size() == static_cast<std::size_t>(count) * c10::elementSize(in.dtype), InvalidArgument,
                 p.who() << ": warm-up file " << file.string() << " holds " << data.size() << " bytes, dims "
                         << shape_string(dims) << " of " << triton::DataType_Name(in.config_type) << " need "
                         << static_cast<std::size_t>(count) * c10::elementSize(in.dtype),
                 std::string("write the sample's raw little-endian bytes, row-major"));
      }
    } else if (wi.random_data() && !in.bytes) {
      const at::Tensor r = c10::isFloatingType(in.dtype)
                               ? at::rand(dims, gen, at::TensorOptions().dtype(at::kFloat)).to(in.dtype)
                               : at::randint(0, in.dtype == at::kBool ? 2 : 100, dims, gen, at::kLong).to(in.dtype);
      data.assign(static_cast<const char*>(r.data_ptr()), r.nbytes());
    } else if (in.bytes && p.image) {
      // Encoded images: a black PNG of the model's size for each element.
      const cv::Mat black(static_cast<int>(p.image_shape[1]), static_cast<int>(p.image_shape[2]),
                          CV_8UC(static_cast<int>(p.image->spec().channels)), cv::Scalar::all(0));
      const std::string png = data::encode_png(black);
      for (std::int64_t k = 0; k < count; ++k) {
        const auto len = static_cast<std::uint32_t>(png.size());
        for (int b = 0; b < 4; ++b) data.push_back(static_cast<char>((len >> (8 * b)) & 0xff));
        data += png;
      }
    } else {  // zero_data (and random_data for BYTES: empty strings)
      data.assign(static_cast<std::size_t>(count) * (in.bytes ? 4 : c10::elementSize(in.dtype)), '\0');
    }
    if (p.batched) dims.insert(dims.begin(), 1);
    sample.push_back(Tensor::owning(in.name, in.datatype, std::move(dims), std::move(data)));
  }
  return sample;
}

class TorchInstance final : public ModelInstance {
 public:
  TorchInstance(std::shared_ptr<const Plan> plan, torch::jit::Module module, c10::Device device)
      : plan_(std::move(plan)), module_(std::move(module)), device_(device) {
    if (plan_->platform == Platform::kGlassbox) {
      const auto opts = at::TensorOptions().dtype(at::kFloat);
      pre_mul_ = at::tensor(plan_->pre_mul, opts).reshape(plan_->pre_shape).to(device_);
      pre_sub_ = at::tensor(plan_->pre_sub, opts).reshape(plan_->pre_shape).to(device_);
    }
  }

  void warmup() override {
    for (const triton::ModelWarmup& w : plan_->config.model_warmup()) {
      const std::vector<Tensor> sample = warmup_sample(*plan_, w);
      const std::vector<BatchItem> items(plan_->batched ? std::max<std::uint32_t>(1, w.batch_size()) : 1,
                                         BatchItem{&sample, 1});
      for (std::uint32_t i = 0; i < std::max<std::uint32_t>(1, w.count()); ++i) {
        ExecuteTimings t;
        execute(items, t);
      }
    }
  }

  std::vector<std::vector<Tensor>> execute(std::span<const BatchItem> items, ExecuteTimings& timings) override {
    c10::InferenceMode guard;
    const Plan& p = *plan_;
    const auto t0 = Clock::now();
    std::vector<std::int64_t> sizes;
    std::int64_t total = 0;
    for (const BatchItem& item : items) {
      sizes.push_back(item.batch_size);
      total += item.batch_size;
    }
    std::vector<c10::IValue> args(p.forward_args);
    for (std::size_t j = 0; j < p.inputs.size(); ++j) {
      const InputPlan& in = p.inputs[j];
      if (in.bytes && p.image) {
        at::Tensor x = decode_images(detail::gather_strings(items, j, p.model, in.name), in);
        if (!device_.is_cpu()) x = x.to(device_);
        args[in.arg] = preprocess(std::move(x));
        continue;
      }
      if (in.bytes) {
        args[in.arg] = detail::gather_strings(items, j, p.model, in.name);
        continue;
      }
      at::Tensor x = detail::gather_input(items, j, in.dtype, p.batched, p.model, in.name);
      if (in.reshape) x = reshape(x, in, total);
      if (!device_.is_cpu()) x = x.to(device_);
      if (p.platform == Platform::kGlassbox) x = preprocess(std::move(x));
      args[in.arg] = std::move(x);
    }
    const auto t1 = Clock::now();
    c10::IValue result;
    try {
      result = module_.forward(std::move(args));
      if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
    } catch (const std::exception& e) {
      GB_THROW(Internal, p.who() << " failed on a batch of " << total << ": " << error_summary(e),
               std::string("check the request against the model's forward() (and config.pbtxt's dims)"));
    }
    const auto t2 = Clock::now();
    std::vector<std::vector<Tensor>> out(items.size());
    for (std::vector<Tensor>& o : out) o.reserve(p.outputs.size());
    const std::vector<c10::IValue> values = flatten(result);
    for (std::size_t k = 0; k < p.outputs.size(); ++k) {
      const OutputPlan& o = p.outputs[k];
      const c10::IValue v = select(result, values, o);
      std::vector<Tensor> parts = o.bytes ? split_strings(v, o, sizes, total) : split_tensor(v, o, k, sizes, total);
      for (std::size_t i = 0; i < items.size(); ++i) out[i].push_back(std::move(parts[i]));
    }
    const auto t3 = Clock::now();
    timings.input_ns = ns_between(t0, t1);
    timings.infer_ns = ns_between(t1, t2);
    timings.output_ns = ns_between(t2, t3);
    return out;
  }

 private:
  at::Tensor reshape(const at::Tensor& x, const InputPlan& in, std::int64_t total) const {
    std::vector<std::int64_t> shape = *in.reshape;
    if (plan_->batched) shape.insert(shape.begin(), total);
    GB_CHECK(element_count(shape) < 0 || element_count(shape) == x.numel(), InvalidArgument,
             "input '" << in.name << "' of model '" << plan_->model << "' has " << x.numel()
                       << " elements, its reshape " << shape_string(shape) << " needs " << element_count(shape),
             std::string("send the shape config.pbtxt's dims give"));
    return x.reshape(shape);
  }

  // Encoded images -> [B, C, H, W] raw samples, decoded in parallel on this instance's threads.
  at::Tensor decode_images(const c10::List<std::string>& images, const InputPlan& in) const {
    const Plan& p = *plan_;
    const auto n = static_cast<std::int64_t>(images.size());
    std::vector<at::Tensor> out(static_cast<std::size_t>(n));
    std::vector<std::string> errors(static_cast<std::size_t>(n));
    at::parallel_for(0, n, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const std::string what = "image " + std::to_string(i) + " of input '" + in.name + "'";
        try {
          at::Tensor t = (*p.image)(images.get(static_cast<std::size_t>(i)), what);
          if (t.sizes().vec() != p.image_shape)
            errors[static_cast<std::size_t>(i)] = what + " comes out " + shape_string(t.sizes().vec()) +
                                                  " after the contract's transforms, the model takes " +
                                                  shape_string(p.image_shape);
          out[static_cast<std::size_t>(i)] = std::move(t);
        } catch (const Error& err) {
          errors[static_cast<std::size_t>(i)] = err.message();
        }
      }
    });
    for (const std::string& e : errors)
      GB_CHECK(e.empty(), InvalidArgument, p.who() << ": " << e,
               std::string("send JPEG, PNG, BMP, TIFF or WebP files' bytes, one per sample"));
    return at::stack(out);
  }

  at::Tensor preprocess(at::Tensor x) const {
    x = x.to(at::kFloat);
    if (plan_->flip_channels) x = x.flip({1});
    return x.mul_(pre_mul_).sub_(pre_sub_);
  }

  static std::vector<c10::IValue> flatten(const c10::IValue& r) {
    if (r.isTuple()) return r.toTupleRef().elements().vec();
    if (r.isList()) {
      const c10::List<c10::IValue> l = r.toList();
      if (l.size() > 0 && l.get(0).isString()) return {r};  // one BYTES output
      return std::vector<c10::IValue>(l.begin(), l.end());
    }
    return {r};
  }

  c10::IValue select(const c10::IValue& result, const std::vector<c10::IValue>& values, const OutputPlan& o) const {
    if (result.isGenericDict()) {
      const c10::Dict<c10::IValue, c10::IValue> d = result.toGenericDict();
      std::vector<std::string> keys;
      for (const auto& kv : d) {
        if (kv.key().isString() && kv.key().toStringRef() == o.name) return kv.value();
        keys.push_back(kv.key().isString() ? kv.key().toStringRef() : kv.key().tagKind());
      }
      GB_THROW(
          Internal,
          plan_->who() << ": forward() returns a dict without output '" << o.name << "' (keys: " << join(keys) << ")",
          std::string("name the config's outputs after the dict's keys"));
    }
    GB_CHECK(o.index < values.size(), Internal,
             plan_->who() << ": output '" << o.name << "' is element " << o.index
                          << " of forward()'s result, which has " << values.size()
                          << (values.size() == 1 ? " output" : " outputs"),
             std::string("list as many outputs in config.pbtxt as forward() returns (OUTPUT__0, OUTPUT__1, ...)"));
    return values[o.index];
  }

  std::vector<Tensor> split_tensor(const c10::IValue& v, const OutputPlan& o, std::size_t k,
                                   const std::vector<std::int64_t>& sizes, std::int64_t total) const {
    const Plan& p = *plan_;
    GB_CHECK(v.isTensor(), Internal,
             p.who() << ": output '" << o.name << "' is a " << v.tagKind() << ", config.pbtxt says a tensor of "
                     << triton::DataType_Name(o.config_type),
             std::string("return tensors (or List[str] for TYPE_STRING outputs)"));
    at::Tensor t = v.toTensor();
    if (p.probabilities && k == 0 && t.dim() >= 2) t = p.sigmoid_outputs ? t.sigmoid() : t.softmax(1);
    GB_CHECK(t.scalar_type() == o.dtype, Internal,
             p.who() << ": output '" << o.name << "' is " << detail::dtype_text(t.scalar_type())
                     << ", config.pbtxt says " << triton::DataType_Name(o.config_type),
             "set the output's data_type to " +
                 detail::dtype_text(t.scalar_type()).substr(0, detail::dtype_text(t.scalar_type()).find(' ')) +
                 " or make forward() return " + triton::DataType_Name(o.config_type));
    t = t.to(c10::kCPU).contiguous();
    const std::vector<std::int64_t> shape(t.sizes().begin(), t.sizes().end());
    const std::vector<std::int64_t> sample =
        p.batched && !shape.empty() ? std::vector<std::int64_t>(shape.begin() + 1, shape.end()) : shape;
    GB_CHECK(!p.batched || (!shape.empty() && shape[0] == total), Internal,
             p.who() << ": output '" << o.name << "' has shape " << shape_string(shape) << " for a batch of " << total,
             std::string("forward() must return the batch along axis 0 (or set max_batch_size: 0)"));
    GB_CHECK(dims_match(o.model_dims, sample), Internal,
             p.who() << ": output '" << o.name << "' has dims " << shape_string(sample) << " (without the batch axis), "
                     << "config.pbtxt says " << shape_string(o.model_dims),
             std::string("set the output's dims to ") + shape_string(sample));
    std::vector<std::int64_t> served;
    if (o.reshaped) {
      const auto r = detail::resolve_dims(o.dims, element_count(sample));
      GB_CHECK(r.has_value(), Internal,
               p.who() << ": output '" << o.name << "' of dims " << shape_string(sample) << " does not fit dims "
                       << shape_string(o.dims),
               std::string("make reshape and dims hold the same number of elements"));
      served = *r;
    }
    return detail::split_output(t, o.name, o.datatype, sizes, p.batched, served);
  }

  std::vector<Tensor> split_strings(const c10::IValue& v, const OutputPlan& o, const std::vector<std::int64_t>& sizes,
                                    std::int64_t total) const {
    const Plan& p = *plan_;
    const bool strings = v.isList() && std::all_of(v.toListRef().begin(), v.toListRef().end(),
                                                   [](const c10::IValue& e) { return e.isString(); });
    GB_CHECK(strings, Internal,
             p.who() << ": output '" << o.name << "' is TYPE_STRING in config.pbtxt but forward() returns a "
                     << (v.isTensor() ? "Tensor" : v.tagKind()),
             std::string("return a List[str] for a TYPE_STRING output"));
    const c10::List<std::string> list = c10::impl::toTypedList<std::string>(v.toList());
    const auto n = static_cast<std::int64_t>(list.size());
    const std::int64_t rows = p.batched ? total : 1;
    const std::optional<std::vector<std::int64_t>> dims =
        rows > 0 && n % rows == 0 ? detail::resolve_dims(o.dims, n / rows) : std::nullopt;
    GB_CHECK(dims.has_value(), Internal,
             p.who() << ": output '" << o.name << "' returns " << n << " strings for a batch of " << rows
                     << ", config.pbtxt says dims " << shape_string(o.dims) << " per sample",
             std::string("return batch x elements-per-sample strings"));
    std::vector<Tensor> out;
    const std::int64_t per = element_count(*dims);
    std::size_t begin = 0;
    for (std::int64_t b : (p.batched ? sizes : std::vector<std::int64_t>{1})) {
      std::vector<std::int64_t> shape = *dims;
      if (p.batched) shape.insert(shape.begin(), b);
      const std::size_t end = begin + static_cast<std::size_t>(b * per);
      out.push_back(
          Tensor::owning(o.name, DataType::kBytes, std::move(shape), detail::serialize_strings(list, begin, end)));
      begin = end;
    }
    return out;
  }

  std::shared_ptr<const Plan> plan_;
  torch::jit::Module module_;
  c10::Device device_;
  at::Tensor pre_mul_, pre_sub_;
};

class TorchBackend final : public Backend {
 public:
  TorchBackend(std::shared_ptr<const Plan> plan, torch::jit::Module prototype, const BackendOptions& options)
      : plan_(std::move(plan)), prototype_(std::move(prototype)), options_(options) {}

  std::unique_ptr<ModelInstance> create_instance(int index) override {
    const Plan& p = *plan_;
    const int threads = options_.intra_op_threads > 0           ? options_.intra_op_threads
                        : p.config_intra_op_threads > 0         ? p.config_intra_op_threads
                        : options_.default_intra_op_threads > 0 ? options_.default_intra_op_threads
                                                                : default_threads();
    // Initialise this thread's count first (LibTorch does it lazily from the process-wide value,
    // which would overwrite a count set before), then set it for this thread.
    if (at::get_num_threads() != threads) at::set_num_threads(threads);
    const c10::Device device = p.devices[static_cast<std::size_t>(std::max(index, 0)) % p.devices.size()];
    torch::jit::Module m;
    {
      std::lock_guard<std::mutex> lock(mu_);
      m = prototype_.clone();
    }
    m.eval();
    if (!device.is_cpu()) m.to(device);
    return std::make_unique<TorchInstance>(plan_, std::move(m), device);
  }

  // The load check: one run against the config (see backend.h).
  void check_against_config() {
    const Plan& p = *plan_;
    triton::ModelWarmup w;
    if (p.config.model_warmup_size() > 0) {
      w = p.config.model_warmup(0);
      w.set_batch_size(1);
    } else {
      w.set_name("zeros");
      for (const triton::ModelInput& in : p.config.input()) {
        triton::ModelWarmup::Input& wi = (*w.mutable_inputs())[in.name()];
        wi.set_data_type(in.data_type());
        for (std::int64_t d : in.dims()) wi.add_dims(d < 0 ? 1 : d);
        wi.set_zero_data(true);
      }
    }
    const std::vector<Tensor> sample = warmup_sample(p, w);
    const BatchItem item{&sample, 1};
    const c10::Device device = p.devices.front();
    TorchInstance check(plan_, device.is_cpu() ? prototype_ : prototype_.clone(), device);
    try {
      ExecuteTimings t;
      check.execute({&item, 1}, t);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kInternal) throw;
      const bool failed = e.message().find(" failed on a batch") != std::string::npos;
      GB_THROW(InvalidArgument, (failed ? e.message() + " (a sample shaped as config.pbtxt says)" : e.message()),
               std::string("make config.pbtxt's inputs and outputs (names, data types, dims) match the model's "
                           "forward(): ") +
                   e.hint());
    }
  }

 private:
  std::shared_ptr<const Plan> plan_;
  torch::jit::Module prototype_;
  BackendOptions options_;
  std::mutex mu_;  // clone() of the prototype
};

}  // namespace

std::shared_ptr<Backend> load_backend(const exporter::RepositoryEntry& entry, std::int64_t version,
                                      const BackendOptions& options) {
  std::shared_ptr<Plan> plan = detail::begin_plan(entry, version);
  apply_inter_op_threads(entry.config);
  default_threads();
  torch::jit::Module module = load_module(entry.model_path(version), plan->who());
  detail::plan_signature(*plan, module, entry);
  auto backend = std::make_shared<TorchBackend>(plan, std::move(module), options);
  backend->check_against_config();
  return backend;
}

}  // namespace glassbox::serve
