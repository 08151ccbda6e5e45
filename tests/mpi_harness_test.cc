// The harness's own proof (see mpi_harness.h): each test goes wrong on rank
// 1 while the other ranks wait for it in a collective (the last one on
// every rank), and CTest checks that the job ends quickly with the failing
// ranks' messages (tests/expect_job_abort.sh).
// They are disabled, so they only run when asked for by name with
// --gtest_also_run_disabled_tests.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "mpi_test_util.h"

namespace hvdtune {
namespace {

using namespace testing_util;

TEST(HarnessSelfTest, DISABLED_AssertFailsOnRankOneOthersInBarrier) {
  ASSERT_TRUE(WorldSize() > 1) << "needs two ranks";
  if (WorldRank() == 1) {
    ASSERT_EQ(WorldRank(), 0) << "deliberate failure on rank 1";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(HarnessSelfTest, DISABLED_ExpectFailsOnRankOneOthersInAllreduce) {
  ASSERT_TRUE(WorldSize() > 1) << "needs two ranks";
  Runtime& rt = SharedRuntime();
  if (rt.rank() == 1) {
    EXPECT_EQ(rt.rank(), 0) << "deliberate failure on rank 1";
    return;
  }
  std::vector<float> in(1024, 1.0f), out(in.size());
  const std::int64_t shape[] = {static_cast<std::int64_t>(in.size())};
  Handle h = rt.Allreduce("harness.stranded", in.data(), out.data(), shape,
                          DataType::kFloat32, ReduceOp::kSum);
  EXPECT_TRUE(h.Wait().ok());
}

TEST(HarnessSelfTest, DISABLED_ThrowsOnRankOneOthersInBarrier) {
  ASSERT_TRUE(WorldSize() > 1) << "needs two ranks";
  if (WorldRank() == 1) {
    throw std::runtime_error("deliberate exception on rank 1");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(HarnessSelfTest, DISABLED_CrashesOnRankOneOthersInBarrier) {
  ASSERT_TRUE(WorldSize() > 1) << "needs two ranks";
  if (WorldRank() == 1) std::raise(SIGSEGV);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(HarnessSelfTest, DISABLED_HangsOnRankOneOthersInBarrier) {
  ASSERT_TRUE(WorldSize() > 1) << "needs two ranks";
  if (WorldRank() == 1) std::this_thread::sleep_for(std::chrono::minutes(10));
  MPI_Barrier(MPI_COMM_WORLD);
}

// Every rank fails, and none waits for another: all three messages come
// out, and the job ends without waiting for a timeout.
TEST(HarnessSelfTest, DISABLED_FailsOnEveryRank) {
  EXPECT_EQ(WorldRank(), -1) << "deliberate failure on rank " << WorldRank();
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace hvdtune
