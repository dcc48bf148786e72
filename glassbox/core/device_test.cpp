#include "glassbox/core/device.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/seed.h"

namespace glassbox {
namespace {

TEST(Device, ResolvesSpecs) {
  EXPECT_TRUE(resolve_device("cpu").is_cpu());
  EXPECT_EQ(resolve_device("auto").is_cuda(), cuda_available());
  EXPECT_THROW(resolve_device("tpu"), Error);
  EXPECT_THROW(resolve_device("cuda:x"), Error);
  if (!cuda_available()) {
    try {
      resolve_device("cuda");
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);  // a user error: exit status 2
    }
  }
}

TEST(Seed, RngStateRestoresSequence) {
  seed_everything(7);
  at::Tensor state = cpu_rng_state();
  at::Tensor a = torch::rand({5});
  set_cpu_rng_state(state);
  at::Tensor b = torch::rand({5});
  EXPECT_TRUE(torch::equal(a, b));
}

TEST(Cuda, PinnedNonBlockingCopyRoundTrips) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  at::Tensor host = torch::randn({64, 64}).pin_memory();
  at::Tensor dev = host.to(resolve_device("cuda"), /*non_blocking=*/true);
  EXPECT_TRUE(torch::equal(dev.cpu(), host));
}

}  // namespace
}  // namespace glassbox
