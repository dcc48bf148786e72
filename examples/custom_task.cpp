// A user-written TaskModule plugged into glassbox's Trainer.
//
// The model is the user's own torch::nn::Module (no zoo, no registry); the data comes from the
// standard DataModule (Fashion-MNIST by default), so swapping the data never touches this code.
// The task adds an auxiliary penalty to the loss to show that training_step is the user's.
//
//   build/examples/custom_task [--epochs N] [--run-dir DIR]
#include <iostream>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/seed.h"
#include "glassbox/train/callbacks.h"
#include "glassbox/train/trainer.h"

namespace gb = glassbox;

// The user's network: a tiny convolutional net written directly against LibTorch.
struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5).stride(2)));
    fc = register_module("fc", torch::nn::Linear(16 * 12 * 12, 10));
  }
  at::Tensor forward(const at::Tensor& x) { return fc->forward(torch::relu(conv->forward(x)).flatten(1)); }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(TinyNet);

// The user's task: cross-entropy plus a small L1 penalty on the logits.
class MyTask final : public gb::train::TaskModule {
 public:
  torch::nn::Module& module() override { return *net_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return net_.ptr(); }
  std::string name() const override { return "tiny-net"; }
  gb::train::StepOutput training_step(const gb::data::Batch& batch) override {
    at::Tensor logits = net_->forward(batch.inputs);
    at::Tensor loss = torch::nn::functional::cross_entropy(logits, batch.targets) + 1e-4 * logits.abs().mean();
    return {loss, logits};
  }

 private:
  TinyNet net_;
};

int main(int argc, char** argv) {
  std::int64_t epochs = 1;
  std::string run_dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--epochs")
      epochs = std::stoll(argv[i + 1]);
    else if (a == "--run-dir")
      run_dir = argv[i + 1];
  }
  try {
    gb::seed_everything(0);
    gb::train::DataModuleOptions data_options;  // defaults: Debian's Fashion-MNIST
    data_options.loader.batch_size = 128;
    gb::train::StandardDataModule data(data_options);
    MyTask task;
    gb::train::TrainerOptions t;
    t.max_epochs = epochs;
    gb::train::OptimizerOptions opt;
    opt.name = glassbox::train::OptimizerKind::kAdam;
    opt.lr = 2e-3;
    gb::train::Trainer trainer(t, opt, gb::train::SchedulerOptions{}, run_dir);
    trainer.add_callback(std::make_unique<gb::train::ProgressBarCallback>(std::cout));
    if (!run_dir.empty())
      trainer.add_callback(std::make_unique<gb::train::ModelCheckpoint>(gb::train::CheckpointOptions{}));
    trainer.fit(task, data);
    const auto r = trainer.test(task, data);
    std::cout << "test accuracy " << r.accuracy << " (" << r.samples << " samples)\n";
  } catch (const gb::Error& e) {
    std::cerr << "error: " << e.one_line() << "\n";
    return gb::is_user_error(e.code()) ? 2 : 1;
  }
  return 0;
}
