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
//   pytorch_libtorch — a TorchScript file (Python's torch.jit.save or glassbox export). Inputs are
//     passed positionally by the INPUT__i convention (or in config order when the names follow
//     another convention), outputs read from a tensor, a tuple or a list by OUTPUT__i (or config
//     order). BYTES inputs arrive as List[str] (flattened over the batch), BYTES outputs from
//     List[str].
//   glassbox — the same file plus the contract (contract.json): the server applies the contract's
//     preprocessing (scale, channel order, mean/std) to raw inputs (UINT8 or FP32 as the config
//     says) and, for logits models, may return probabilities (parameters glassbox.*).
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
  // Runs config.model_warmup (zero or random data, `count` times); nothing when none is configured.
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
  int intra_op_threads = 0;  // 0: the config's INTRA_OP_THREAD_COUNT parameter, else LibTorch's default
};

// Loads version `version` of `entry` (entry.model_path(version)). Throws glassbox::Error naming the
// model, the version and the file: NotFound (missing file), DataLoss (not a TorchScript file),
// InvalidArgument (a platform glassbox does not serve, or a config the model contradicts).
std::shared_ptr<Backend> load_backend(const exporter::RepositoryEntry& entry, std::int64_t version,
                                      const BackendOptions& options = {});

}  // namespace glassbox::serve
