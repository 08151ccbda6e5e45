// Agreeing on what to run: many small tensors in one step, bursts gathered
// into one cycle, enqueue order and timing that differ between ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_util.h"

namespace hvdtune {
namespace {

using namespace testing_util;

TEST(RuntimeNegotiation, ThousandSmallTensorsInOneStep) {
  Runtime& rt = SharedRuntime();
  const int n = 1000;
  std::vector<std::vector<float>> in(n, std::vector<float>(1024));
  std::vector<std::vector<float>> out(n, std::vector<float>(1024));
  std::vector<Handle> h(n);
  const std::int64_t shape[] = {1024};
  for (int i = 0; i < n; ++i) {
    std::fill(in[i].begin(), in[i].end(), static_cast<float>(rt.rank() + i));
    h[i] =
        rt.Allreduce("small." + std::to_string(i), in[i].data(), out[i].data(),
                     shape, DataType::kFloat32, ReduceOp::kSum);
  }
  const float base = static_cast<float>(rt.size() * (rt.size() - 1) / 2);
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(h[i].Wait().ok());
    ASSERT_EQ(out[i][0], base + static_cast<float>(rt.size() * i));
    ASSERT_EQ(out[i][1023], out[i][0]);
  }
}

// With a hardware thread per rank, a burst of submissions that the caller
// then waits on is gathered into one cycle (cycle_loop.cc); elsewhere the
// runtime negotiates what has arrived, and only the results are checked.
TEST(RuntimeNegotiation, AWaitedBurstIsNegotiatedInOneCycle) {
  Runtime& rt = SharedRuntime();
  const int n = 200, steps = 20;
  std::vector<float> in(static_cast<std::size_t>(n) * 4), out(in.size());
  std::vector<Handle> h(static_cast<std::size_t>(n));
  const std::int64_t shape[] = {4};
  int one_cycle = 0;
  for (int step = 0; step < steps; ++step) {
    std::fill(in.begin(), in.end(), static_cast<float>(rt.rank() + step));
    const std::uint64_t before = rt.stats().active_cycles;
    for (int i = 0; i < n; ++i) {
      h[static_cast<std::size_t>(i)] =
          rt.Allreduce("burst." + std::to_string(i), &in[4 * i], &out[4 * i],
                       shape, DataType::kFloat32, ReduceOp::kSum);
    }
    for (Handle& x : h) ASSERT_TRUE(x.Wait().ok());
    if (rt.stats().active_cycles - before == 1) ++one_cycle;
    const float want =
        static_cast<float>(rt.size() * (rt.size() - 1) / 2 + rt.size() * step);
    for (float v : out) ASSERT_EQ(v, want);
  }
  if (static_cast<unsigned>(rt.size()) <= std::thread::hardware_concurrency()) {
    // Without gathering a step takes two cycles or more (the first wakes
    // on the first tensor); allow for the odd step split by preemption.
    EXPECT_GE(one_cycle, steps / 2);
  }
}

// Submissions nobody waits on or polls are not held back by the gathering:
// they run once the submissions pause.
TEST(RuntimeNegotiation, AnUnwaitedBurstStillRuns) {
  Runtime& rt = SharedRuntime();
  const int n = 50;
  std::vector<float> in(static_cast<std::size_t>(n), 1.0f), out(in.size());
  std::vector<Handle> h(static_cast<std::size_t>(n));
  const std::int64_t shape[] = {1};
  const std::uint64_t before = rt.stats().tensors_completed;
  for (int i = 0; i < n; ++i) {
    h[static_cast<std::size_t>(i)] =
        rt.Allreduce("unwaited." + std::to_string(i), &in[i], &out[i], shape,
                     DataType::kFloat32, ReduceOp::kSum);
  }
  // stats() does not count as waiting.
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rt.stats().tensors_completed - before < n &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(rt.stats().tensors_completed - before,
            static_cast<std::uint64_t>(n));
  for (Handle& x : h) ASSERT_TRUE(x.Wait().ok());
  for (float v : out) ASSERT_EQ(v, static_cast<float>(rt.size()));
}

TEST(RuntimeNegotiation, DifferentEnqueueOrderOnEveryRank) {
  Runtime& rt = SharedRuntime();
  std::vector<int> order = Iota(300);
  std::mt19937 rng(static_cast<unsigned>(rt.rank() * 7919 + 1));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::vector<float>> outs;
  RunSet(rt, "shuffled", 300, order, &outs);
}

TEST(RuntimeNegotiation, RanksEnqueueAtDifferentTimes) {
  Runtime& rt = SharedRuntime();
  // Rank r waits r * 20 ms before enqueuing: the early ones must wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(20 * rt.rank()));
  std::vector<std::vector<float>> outs;
  RunSet(rt, "staggered", 20, Iota(20), &outs);
}

// Waiters share one wake-up per batch of completions: threads that each
// wait on their own handles, by Wait, by WaitFor with short timeouts and by
// polling, are all woken with the right sums, and none is left asleep.
TEST(RuntimeNegotiation, ThreadsWaitingOnTheirOwnHandlesAllWake) {
  Runtime& rt = SharedRuntime();
  constexpr int kThreads = 3;
  constexpr int kSteps = 40;
  constexpr int kPerStep = 8;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> in(kPerStep), out(kPerStep);
      std::vector<Handle> h(kPerStep);
      const std::int64_t shape[] = {1};
      for (int step = 0; step < kSteps; ++step) {
        for (int i = 0; i < kPerStep; ++i) {
          in[i] = static_cast<float>(rt.rank() + step + i);
          out[i] = -1;
          h[i] = rt.Allreduce(
              "waiters." + std::to_string(t) + "." + std::to_string(i), &in[i],
              &out[i], shape, DataType::kFloat32, ReduceOp::kSum);
        }
        for (int i = 0; i < kPerStep; ++i) {
          if (t == 0) {
            if (!h[i].Wait().ok()) ++bad[t];
          } else if (t == 1) {
            while (!h[i].WaitFor(50e-6)) {
            }
            if (!h[i].status().ok()) ++bad[t];
          } else {
            while (!h[i].Poll()) std::this_thread::yield();
            if (!h[i].status().ok()) ++bad[t];
          }
          const int n = rt.size();
          const float want =
              static_cast<float>(n * (n - 1) / 2 + n * (step + i));
          if (out[i] != want) ++bad[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace hvdtune
