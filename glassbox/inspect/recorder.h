// ForwardRecorder: watches every top-level ATen op run on this thread while it is alive and
// attributes each to a module of a LayerMap — glassbox's replacement for the forward hooks the
// C++ frontend lacks. Works on any model and any TaskModule without changing their code.
//
//   LayerMap map(task.module());
//   RecorderOptions ro;
//   ro.check_finite = true;
//   {
//     ForwardRecorder rec(map, ro);
//     task.training_step(batch);
//   }                                            // recording stops here
//   if (const OpRecord* r = rec.first_nonfinite_origin()) std::cout << r->layer << " " << r->op;
//
// Built on at::RecordFunction thread-local callbacks: while no recorder exists nothing is
// registered and ops pay nothing. Only ops in the forward scope are seen (not autograd nodes);
// stop recording before backward. Nested ops (those an op calls internally) are not recorded.
// Thread safety: one recorder per thread at a time; records are read after stop().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "glassbox/inspect/layer_map.h"

namespace glassbox::inspect {

struct OpRecord {
  std::int64_t index = 0;  // forward position among the recorded ops
  std::string op;          // "aten::linear"
  std::string layer;       // "layers.fc0", or "layer1.0.bn1:relu" for a function after a module
  int unit = -1;           // index into LayerMap::units(); -1 for a function between modules
  std::vector<std::int64_t> shape;
  std::string dtype;
  bool inputs_finite = true;   // (check_finite) every floating input was finite
  bool output_finite = true;   // (check_finite)
  std::int64_t nonfinite = 0;  // (check_finite) non-finite values in the output
  at::Tensor bad_rows;         // (check_finite) [k] int64 rows of dim 0 holding a non-finite value
  at::Tensor stats;            // (stats) [kActivationStats] float64 on the output's device
  at::Tensor output;           // (keep_outputs) the output, detached
  double input_max_abs = 0;    // (check_finite) largest |value| among the floating inputs
};

struct RecorderOptions {
  bool stats = true;             // activation statistics of each op output (no host sync)
  bool check_finite = false;     // NaN/Inf checks of inputs and outputs (host syncs: replay only)
  bool keep_outputs = false;     // keep each output tensor (memory!)
  bool skip_views = true;        // do not record view/cast ops on activations (they add nothing)
  std::size_t max_ops = 20000;   // stop recording after this many ops
  bool track_in_flight = false;  // remember the running op (to name the one that throws)
};

// The op that started but did not finish (it threw): its module and its inputs.
struct InFlightOp {
  std::string op;
  std::string layer;  // module path, or "" when no parameter of a module was among the inputs
  std::string type;
  std::string inputs;  // "float32 cpu [64, 784], float64 cpu [10, 784]"
};

class ForwardRecorder {
 public:
  ForwardRecorder(const LayerMap& map, RecorderOptions options);
  ~ForwardRecorder();
  ForwardRecorder(const ForwardRecorder&) = delete;
  ForwardRecorder& operator=(const ForwardRecorder&) = delete;

  void stop();
  bool active() const { return handle_ != 0; }
  const std::vector<OpRecord>& records() const { return records_; }
  std::vector<OpRecord>& records() { return records_; }
  // The first op whose output has a NaN/Inf while all its floating inputs were finite (requires
  // check_finite), or nullptr.
  const OpRecord* first_nonfinite_origin() const;
  // Per attributed name, the last op's record (a module's output): forward order of first use.
  std::vector<const OpRecord*> layer_outputs() const;
  // With track_in_flight: the top-level op that was running when recording stopped (an op that
  // threw never finishes), or nullptr.
  const InFlightOp* in_flight() const { return in_flight_.op.empty() ? nullptr : &in_flight_; }

  // --- called by the RecordFunction callbacks ---
  struct Pending;
  std::unique_ptr<Pending> on_start(const char* name, c10::ArrayRef<const c10::IValue> inputs);
  void on_end(Pending& pending, const std::vector<c10::IValue>& outputs);

 private:
  int attribute(const std::string& op, int param_owner);

  const LayerMap& map_;
  RecorderOptions options_;
  std::uint64_t handle_ = 0;
  std::vector<OpRecord> records_;
  // Casts/views of parameters -> unit. The tensors are held so that their TensorImpl addresses
  // cannot be reused by later activations while recording.
  std::unordered_map<const c10::TensorImpl*, std::pair<at::Tensor, int>> derived_;
  int cursor_ = -1;  // the unit that ran last
  InFlightOp in_flight_;
};

}  // namespace glassbox::inspect
