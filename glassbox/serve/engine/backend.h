// A model backend: the code that runs one loaded version of a repository model. The scheduler
// (runner.h) owns the threads and the batching; a backend only turns a batch of requests into
// outputs.
//
//   std::shared_ptr<Backend> b = load_backend(entry, 1, {});      // TorchScript or glassbox
//   std::unique_ptr<ModelInstance> inst = b->create_instance(0);  // on the instance's thread
//   inst->warmup();                                               // config.model_warmup
//   std::vector<BatchItem> items = {{&req_a.inputs, 2}, {&req_b.inputs, 3}};
//   ExecuteTimings t;
//   auto outs = inst->execute(items, t);   // outs[0]: req_a's outputs [2, ...], outs[1]: [3, ...]
//
// Platforms (config.platform / backend):
//   pytorch_libtorch (or backend "pytorch" with no platform, Triton's other spelling) — a
//     TorchScript file (Python's torch.jit.save or glassbox export), loaded on the CPU.
//     Inputs: when every config input name is a forward() argument name, by name; else when every
//     name follows Triton's "<name>__<i>" convention (INPUT__0, INPUT__1), argument i; else config
//     order. Arguments left over must have defaults. Outputs: a Tensor, a tuple or a list of them
//     (OUTPUT__i / "<name>__<i>" picks element i, other names go by config order), or a
//     Dict[str, Tensor] (by name). BYTES inputs arrive as one List[str] flattened over the batch
//     (`def forward(self, x: List[str])`); BYTES outputs are read from a List[str] of
//     batch x elements-per-sample strings. UINT16/32/64 map to LibTorch's unsigned dtypes, which
//     hold and copy data but lack most arithmetic kernels.
//   glassbox — the same file plus the contract (contract.json beside config.pbtxt, required). The
//     single input is raw data, TYPE_UINT8 or TYPE_FP32, dims = contract.input_shape; before
//     forward() the server applies the contract's preprocessing per sample: x * scale, then for a
//     BGR model the channels are reversed (clients send RGB), then (x - mean[c]) / std[c] with the
//     statistics in the model's channel order — so clients can send raw uint8 pixels. With the
//     config parameter "glassbox.output" = "probabilities" and a contract whose output kind is
//     logits, output 0 is softmax(logits, 1) — a sigmoid per label for a multi-label model (its
//     contract's output.task); a regression model refuses the parameter.
//
// Load checks: load_backend runs the model once (on the first instance's device) with
// the first model_warmup sample, or, without one, a batch of 1 of zeros (empty strings for BYTES,
// -1 dims as 1) and compares what forward() returns with the config: the number of outputs, each
// data type and non-batch dims. A contradiction is InvalidArgument naming the model, the output,
// the expected and the returned value, so a wrong config leaves the model UNAVAILABLE with a reason.
//
// Threads. LibTorch's CPU build in the torch wheel uses OpenMP, whose thread count is a per-thread
// setting (the calling thread's nthreads ICV; MKL's count is set thread-locally too), and
// at::set_num_threads sets it for the calling thread. Two catches, both handled by
// create_instance: LibTorch initialises a thread's count lazily, on its first parallel call, from
// the most recent value any thread set (so a thread that sets its count before that first call can
// have it overwritten by another thread's later setting: create_instance initialises first, then
// sets); and set_num_threads also updates that process-wide "most recent" value, so threads that
// never set a count inherit whatever was set last. Every instance therefore sets its count
// explicitly: BackendOptions::intra_op_threads, else the config parameter INTRA_OP_THREAD_COUNT
// (Triton's PyTorch backend key), else BackendOptions::default_intra_op_threads, else LibTorch's
// default (at::intraop_default_num_threads()). Inter-op threads (TorchScript fork/wait) are one
// process-wide pool that can be sized only before it starts: INTER_OP_THREAD_COUNT is applied by
// the first load that asks for it; later different values are reported on std::clog and ignored.
//
// Instances. KIND_CPU (and KIND_MODEL) instances run on the CPU; KIND_GPU on cuda:<gpus[j % n]>
// (every GPU when gpus is empty), Unavailable naming the model when LibTorch sees no CUDA device;
// KIND_AUTO: cuda:0 when available, else the CPU. Instance `index` counts the groups' instances in
// config order (count 0 means 1). Every instance owns a deep copy of the module (its parameters and
// buffers are its own), set to eval mode; execute() runs under c10::InferenceMode.
// Thread safety: a Backend is shared by its instances (create_instance may run on several threads
// at once); one ModelInstance is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "glassbox/export/repository.h"
#include "glassbox/serve/engine/api.h"

namespace glassbox::serve {

// Nanoseconds spent in each phase of one execution (Triton's compute_input / infer / output).
struct ExecuteTimings {
  std::uint64_t input_ns = 0;   // wire bytes -> model input tensors (copy, concatenate, preprocess)
  std::uint64_t infer_ns = 0;   // the forward pass
  std::uint64_t output_ns = 0;  // model outputs -> per-request Tensors
};

// One request's share of a batch: its inputs in the config's input order. With
// max_batch_size > 0 every input is [batch_size, ...dims] and all items of one batch have equal
// non-batch shapes; with max_batch_size == 0 a batch holds exactly one item, shapes as in config.
struct BatchItem {
  const std::vector<Tensor>* inputs = nullptr;
  std::int64_t batch_size = 1;
};

class ModelInstance {
 public:
  virtual ~ModelInstance() = default;
  // Runs config.model_warmup, each entry `count` times (at least once): Triton's semantics,
  // batch_size requests of one sample each, inputs zero_data, random_data (seeded; BYTES get empty
  // strings) or input_data_file (raw little-endian bytes, BYTES serialized, read from the model
  // directory's warmup/ folder). Nothing when none is configured.
  virtual void warmup() = 0;
  // One forward pass over the concatenation of `items` along axis 0. Returns, per item, every
  // output of the config in config order, each [item.batch_size, ...]. Throws glassbox::Error
  // (Internal for a model that fails or returns the wrong thing, naming the model and output).
  virtual std::vector<std::vector<Tensor>> execute(std::span<const BatchItem> items, ExecuteTimings& timings) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // A new instance (a model copy where the platform needs one). Called on the thread that will
  // run it; sets that thread's intra-op thread count.
  virtual std::unique_ptr<ModelInstance> create_instance(int index) = 0;
};

struct BackendOptions {
  int intra_op_threads = 0;          // > 0: every instance's count, whatever the config says
  int default_intra_op_threads = 0;  // > 0: the count when the config has no INTRA_OP_THREAD_COUNT
};

// Loads version `version` of `entry` (entry.model_path(version)) and checks it against the config.
// Throws glassbox::Error naming the model, the version and the file: NotFound (missing file, or a
// glassbox model without contract.json), DataLoss (not a TorchScript archive), InvalidArgument (a
// platform glassbox does not serve, a config the model contradicts, an unusable parameter),
// Unavailable (KIND_GPU without a CUDA device).
std::shared_ptr<Backend> load_backend(const exporter::RepositoryEntry& entry, std::int64_t version,
                                      const BackendOptions& options = {});

}  // namespace glassbox::serve
