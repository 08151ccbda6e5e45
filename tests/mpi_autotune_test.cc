// HOROVOD_AUTOTUNE=1 under several ranks: knob decisions reach every rank at
// the same cycle, pinned knobs stay, results never change while tuning.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mpi_test_util.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using namespace testing_util;

TEST(Autotune, ConvergesAndFreezesWithResultsUnchanged) {
  const std::string log = ::testing::TempDir() + "/hvdtune_mpi_autotune.csv";
  Runtime rt(
      RuntimeOptions{MapEnv({{"HOROVOD_AUTOTUNE", "1"},
                             {"HOROVOD_AUTOTUNE_LOG", log},
                             {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "1"},
                             {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
                             {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "6"},
                             {"HOROVOD_CACHE_CAPACITY", "1024"}})});
  constexpr int kTensors = 24;
  std::vector<std::vector<std::int32_t>> in(kTensors), out(kTensors);
  std::vector<std::vector<std::int32_t>> first_result;
  int frozen = 0, step = 0;
  for (; step < 200 && !frozen; ++step) {
    std::vector<Handle> h;
    for (int i = 0; i < kTensors; ++i) {
      in[i].assign(static_cast<std::size_t>(100 + 500 * i), rt.rank() + i);
      out[i].assign(in[i].size(), -1);
      const std::int64_t shape[] = {static_cast<std::int64_t>(in[i].size())};
      h.push_back(rt.Allreduce("w" + std::to_string(i), in[i].data(),
                               out[i].data(), shape, DataType::kInt32,
                               ReduceOp::kSum));
    }
    for (Handle& x : h) ASSERT_TRUE(x.Wait().ok());
    if (first_result.empty()) {
      first_result = out;
    } else {
      ASSERT_EQ(out, first_result) << "step " << step;  // bit-identical
    }
    frozen = rt.autotune_status().phase == AutotunePhase::kFrozen;
    MPI_Bcast(&frozen, 1, MPI_INT, 0, MPI_COMM_WORLD);
  }
  ASSERT_TRUE(frozen) << "not frozen after " << step << " steps";
  // The frozen configuration travelled to every rank at the same cycle:
  // rank 0 waits until it is in force, then every rank reaches its version.
  std::uint64_t version = 0;
  if (rt.rank() == 0) {
    const KnobSettings best = rt.autotune_status().best;
    EXPECT_TRUE(WaitFor([&] { return rt.knobs() == best; }));
    version = rt.knob_version();
  }
  MPI_Bcast(&version, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  ASSERT_TRUE(WaitFor([&] { return rt.knob_version() == version; }));
  std::uint64_t cycle = rt.stats().knob_update_cycle;
  std::vector<std::uint64_t> cycles(static_cast<std::size_t>(rt.size()));
  MPI_Allgather(&cycle, 1, MPI_UINT64_T, cycles.data(), 1, MPI_UINT64_T,
                MPI_COMM_WORLD);
  for (std::uint64_t c : cycles) EXPECT_EQ(c, cycles[0]);
  EXPECT_GT(rt.knob_version(), 1u);
  // The pinned cache capacity never moved.
  EXPECT_EQ(rt.knobs().cache_capacity(), 1024);
  if (rt.rank() == 0) {
    const AutotuneStatus st = rt.autotune_status();
    EXPECT_EQ(st.samples, 6);
    EXPECT_GE(st.best_score, st.default_score);
    EXPECT_EQ(st.best, rt.knobs());
    EXPECT_EQ(std::count(st.tuned_knobs.begin(), st.tuned_knobs.end(),
                         "cache_capacity"),
              0);
  } else {
    EXPECT_EQ(rt.autotune_status().phase, AutotunePhase::kOff);
  }
}

TEST(Autotune, OffByDefault) {
  Runtime& rt = SharedRuntime();
  EXPECT_EQ(rt.autotune_status().phase, AutotunePhase::kOff);
}

}  // namespace
}  // namespace hvdtune
