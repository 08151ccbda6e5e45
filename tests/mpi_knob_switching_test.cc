// The allreduce knobs changed the way the autotuner changes them, while a
// training-like stream of large and small gradients flows on one node: the
// algorithm (every one the engine serves) and the ring segment size switch
// every few steps, and every result stays exact on every rank. On the Gloo
// engine this once slowed to what looked like a hang (the ranks waiting in
// Gloo sends and receives for minutes after the first of Gloo's
// bound-buffer algorithms had left sockets with a 4.6 KB send buffer); the
// CTest entry has a timeout, so that fails it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using namespace testing_util;

std::vector<int> ServedAlgorithmIndices() {
  const KnobSpec& spec = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  std::vector<int> served;
  for (std::size_t i = 0; i < spec.choices.size(); ++i) {
    if (spec.Serves(TestEngine(), i)) served.push_back(static_cast<int>(i));
  }
  return served;
}

// A step is a backward pass: buckets of a few MiB (DDP's) and small
// tensors, all in flight together, then waited for; rank 0 asks for new
// knobs every `kStepsPerSample` steps, as a tuner's sample ends.
TEST(KnobSwitching, TunerLikeSwitchesUnderLargeBucketsKeepResultsExact) {
  Runtime rt(RuntimeOptions{MapEnv({{"HOROVOD_CYCLE_TIME", "1"}})});
  const std::vector<int> served = ServedAlgorithmIndices();
  ASSERT_FALSE(served.empty());
  constexpr std::int64_t kSegments[] = {100 << 10, 32 << 10, 1 << 20,
                                        256 << 10};
  constexpr std::int64_t kFusion[] = {64 << 20, 0, 4 << 20};
  // Element counts of the step's tensors (float32): three DDP-like buckets
  // and small ones between them.
  const std::vector<std::int64_t> counts = {
      (3 << 20) / 2, 1000, (6 << 20) / 2, 37, (2 << 20) / 2 + 5, 20000};
  constexpr int kSteps = 48;
  constexpr int kStepsPerSample = 2;
  std::vector<std::vector<float>> in(counts.size()), out(counts.size());
  for (std::size_t t = 0; t < counts.size(); ++t) {
    in[t].resize(static_cast<std::size_t>(counts[t]));
    out[t].resize(static_cast<std::size_t>(counts[t]));
    FillInput(DataType::kFloat32, in[t].data(), counts[t], rt.rank());
  }
  int sample = 0;
  for (int step = 0; step < kSteps; ++step) {
    if (rt.rank() == 0 && step % kStepsPerSample == 0) {
      KnobSettings k = rt.knobs();
      k.Set(KnobId::kAllreduceAlgorithm,
            static_cast<double>(
                served[static_cast<std::size_t>(sample) % served.size()]));
      k.Set(KnobId::kRingSegmentBytes,
            static_cast<double>(kSegments[sample % 4]));
      k.Set(KnobId::kFusionThreshold,
            static_cast<double>(kFusion[(sample / 2) % 3]));
      rt.RequestKnobUpdate(k);
      ++sample;
    }
    std::vector<Handle> handles;
    for (std::size_t t = 0; t < counts.size(); ++t) {
      std::fill(out[t].begin(), out[t].end(), 0.0f);
      const std::int64_t shape[] = {counts[t]};
      handles.push_back(rt.Allreduce("grad." + std::to_string(t), in[t].data(),
                                     out[t].data(), shape, DataType::kFloat32,
                                     ReduceOp::kSum));
    }
    for (std::size_t t = 0; t < counts.size(); ++t) {
      const Status s = handles[t].Wait();
      ASSERT_TRUE(s.ok()) << "step " << step << " tensor " << t << ": "
                          << s.ToString();
      ASSERT_EQ(CountWrong(DataType::kFloat32, ReduceOp::kSum, rt.size(),
                           out[t].data(), counts[t]),
                0)
          << "step " << step << " tensor " << t << " algorithm "
          << rt.knobs().allreduce_algorithm();
    }
  }
  // Every rank applied the switches.
  EXPECT_GE(rt.knob_version(), static_cast<std::uint64_t>(kSteps / 4));
}

}  // namespace
}  // namespace hvdtune
