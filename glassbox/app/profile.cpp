// Tested end to end by serve_monitor, serve_monitor_prometheus and serve_dashboard_browser (tests/serve/): each
// exports the quickstart model with its profile and checks the profile files and the alarms served from it.
#include "glassbox/app/profile.h"

#include <algorithm>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/monitor/profile.h"

namespace glassbox::app {

ProfileOutcome write_model_profile(LoadedModel& m, const std::filesystem::path& dir, const std::string& input_name,
                                   const std::string& output_name, const ProfileJob& job) {
  GB_CHECK(m.task == TaskKind::kClassification, InvalidArgument,
           "a reference profile watches class confidences; " << m.source() << " is a " << name_of(m.task) << " model",
           "serve it unmonitored");
  GB_CHECK(job.max_samples > 0 && job.batch_size > 0, InvalidArgument, "profile sizes must be positive",
           "use e.g. 20000 samples in batches of 512");
  const std::shared_ptr<const data::Dataset> ds = split_dataset(m, job.split);
  const nn::ModelContract contract = contract_for_checkpoint(m);
  std::optional<monitor::InputSpec> spec;
  if (job.profile_input) {
    monitor::InputSpec s;
    s.name = input_name;
    s.kind = contract.layout == nn::InputLayout::kNCHW ? monitor::InputKind::kImage : monitor::InputKind::kTabular;
    s.shape = contract.input_shape;
    s.mean = contract.mean;
    s.std = contract.std;
    s.feature_names = contract.feature_names;
    spec = s;
  }
  monitor::ReferenceBuilder builder(spec, output_name, contract.output_kind == nn::OutputKind::kLogits,
                                    contract.class_names());
  torch::NoGradGuard no_grad;
  m.model->module()->eval();
  const std::int64_t n = std::min(ds->size(), job.max_samples);
  for (std::int64_t start = 0; start < n; start += job.batch_size) {
    const at::Tensor idx = torch::arange(start, std::min(n, start + job.batch_size), torch::kLong);
    const data::Batch b = ds->get_batch(idx);
    const at::Tensor out = m.model->forward(b.inputs.to(m.device)).to(torch::kCPU, torch::kDouble).contiguous();
    const at::Tensor x = b.inputs.to(torch::kCPU, torch::kDouble).contiguous().reshape({idx.size(0), -1});
    const at::Tensor y =
        b.targets.defined() && b.targets.dim() == 1 ? b.targets.to(torch::kLong).contiguous() : at::Tensor();
    const std::int64_t k = out.size(1), width = x.size(1);
    for (std::int64_t i = 0; i < idx.size(0); ++i) {
      const double* xi = x.data_ptr<double>() + i * width;
      const double* oi = out.data_ptr<double>() + i * k;
      builder.add({xi, static_cast<std::size_t>(width)}, {oi, static_cast<std::size_t>(k)},
                  y.defined() ? y.data_ptr<std::int64_t>()[i] : -1);
    }
  }
  const monitor::Reference ref = builder.build();
  monitor::write_reference(dir, ref);
  ProfileOutcome o;
  o.dir = dir;
  o.samples = builder.size();
  for (const auto& f : ref.features) o.features.push_back(f.name);
  return o;
}

}  // namespace glassbox::app
