// The steady state of a training loop allocates nothing per tensor: the
// same tensors every step, submitted, waited on and submitted again, cost
// no heap allocation for names, shapes, queue entries or handles (on the
// application's thread and the cycle thread together). Its own executable:
// it replaces the global operator new to count.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "test_env.h"

// The replacements below pair malloc with free, as the standard allows for
// a replaced global operator new; GCC's check cannot see that pairing.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace hvdtune {
namespace {

using namespace testing_util;

TEST(SteadyState, NoAllocationPerTensor) {
  constexpr int kTensors = 1000;
  constexpr int kCount = 16;
  Runtime rt(RuntimeOptions{MapEnv({})});
  std::vector<std::string> names;
  std::vector<std::vector<float>> in(kTensors), out(kTensors);
  for (int i = 0; i < kTensors; ++i) {
    // Longer than any short-string buffer, so a copy would allocate.
    names.push_back("model/layer" + std::to_string(i) + "/weight.gradient");
    in[i].assign(kCount, static_cast<float>(i + rt.rank()));
    out[i].assign(kCount, 0.0f);
  }
  const std::vector<std::int64_t> shape{4, kCount / 4};
  std::vector<Handle> handles(kTensors);
  auto step = [&] {
    // Backward order, each handle replaced as the next step submits (as a
    // training loop that keeps last step's handles does).
    for (int i = kTensors; i-- > 0;) {
      handles[i] = rt.Allreduce(names[i], in[i].data(), out[i].data(), shape,
                                DataType::kFloat32, ReduceOp::kSum);
    }
    for (int i = kTensors; i-- > 0;) ASSERT_TRUE(handles[i].Wait().ok());
  };
  for (int s = 0; s < 20; ++s) step();
  constexpr int kSteps = 50;
  const long before = g_allocations.load();
  for (int s = 0; s < kSteps; ++s) step();
  const long allocations = g_allocations.load() - before;
  const double per_tensor =
      static_cast<double>(allocations) / (kSteps * kTensors);
  std::printf(
      "[rank %d] %ld allocations in %d steps of %d tensors (%.4f per "
      "tensor)\n",
      rt.rank(), allocations, kSteps, kTensors, per_tensor);
  // What is left is per cycle (the fusion plan: about 20 per step here),
  // not per tensor; one allocation per tensor would read 1 or more.
  EXPECT_LT(per_tensor, 0.2);
  const int n = rt.size();
  for (int i = 0; i < kTensors; ++i) {
    const float expected = static_cast<float>(n * i + n * (n - 1) / 2);
    for (float v : out[i]) ASSERT_EQ(v, expected) << names[i];
  }
}

}  // namespace
}  // namespace hvdtune
