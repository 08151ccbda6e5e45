// Runtime behaviour under several ranks: topology, fusion, the
// response cache, knob updates, errors, shutdown and re-initialisation.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_scheduling.h"
#include "hvdtune/c_api.h"
#include "mpi_test_util.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using namespace testing_util;

TEST(RuntimeTopology, RanksAndNodes) {
  Runtime& rt = SharedRuntime();
  EXPECT_EQ(rt.rank(), WorldRank());
  EXPECT_EQ(rt.size(), WorldSize());
  EXPECT_GE(rt.local_rank(), 0);
  EXPECT_LT(rt.local_rank(), rt.local_size());
  EXPECT_LT(rt.cross_rank(), rt.cross_size());
  EXPECT_EQ(rt.local_size() * rt.cross_size(), rt.size());
}

TEST(RuntimeTopology, RanksPerNodeOverrideEmulatesNodes) {
  Runtime rt(RuntimeOptions{MapEnv({{"HVDTUNE_RANKS_PER_NODE", "2"}})});
  const int size = WorldSize();
  EXPECT_EQ(rt.local_rank(), WorldRank() % 2);
  EXPECT_EQ(rt.local_size(), std::min(2, size - WorldRank() / 2 * 2));
  EXPECT_EQ(rt.cross_rank(), WorldRank() / 2);
  EXPECT_EQ(rt.cross_size(), rt.local_rank() == 0 ? (size + 1) / 2 : size / 2);
  std::vector<std::vector<float>> outs;
  RunSet(rt, "rpn", 5, Iota(5), &outs);
}

// f(thread id) for each of this process's threads named `thread`.
template <typename F>
auto OfThreadsNamed(const std::string& thread, F f) {
  std::vector<decltype(f(0))> values;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return values;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream file(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(file, name);
    if (name == thread) values.push_back(f(std::atoi(e->d_name)));
  }
  closedir(d);
  return values;
}

// The scheduler slices in us of the threads named `thread`, and the cycle
// threads' nice values.
std::vector<std::int64_t> ThreadSlices(const std::string& thread) {
  return OfThreadsNamed(thread, [](int tid) {
    return internal::SchedulerSliceMicroseconds(tid);
  });
}
std::vector<std::int64_t> CycleThreadSlices() {
  return ThreadSlices("hvdtune-cycle");
}
std::vector<int> CycleThreadNices() {
  return OfThreadsNamed("hvdtune-cycle", [](int tid) {
    return getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  });
}

// Whether this kernel keeps a slice a thread asks for (Linux 6.12+).
bool KernelHonoursSlices() {
  std::int64_t got = -1;
  std::thread([&] {
    if (internal::RequestSchedulerSlice(400).empty()) {
      got = internal::SchedulerSliceMicroseconds();
    }
  }).join();
  return got == 400;
}

// On the Gloo engine, Gloo's event-loop thread (hvdtune-gloo) gets the
// cycle thread's slice too: it wakes first for every message.
TEST(RuntimeThreads, CycleThreadIsNamedAndAsksForItsSlice) {
  const auto count = [](std::int64_t us) {
    const auto s = CycleThreadSlices();
    return std::count(s.begin(), s.end(), us);
  };
  const auto gloo_count = [](std::int64_t us) {
    const auto s = ThreadSlices("hvdtune-gloo");
    return std::count(s.begin(), s.end(), us);
  };
  const bool gloo = TestEngine() == EngineKind::kGloo;
  const bool honoured = KernelHonoursSlices();
  const std::int64_t before = count(250);
  const std::int64_t gloo_before = gloo_count(250);
  {
    Runtime rt(
        RuntimeOptions{MapEnv({{"HVDTUNE_CYCLE_THREAD_SLICE_US", "250"}})});
    // The thread asks as it starts: give it a moment.
    for (int i = 0; honoured && i < 200 && count(250) == before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(CycleThreadSlices().size(), 1u)
        << "no thread named hvdtune-cycle";
    if (honoured) {
      EXPECT_EQ(count(250), before + 1);
    }
    if (gloo) {
      EXPECT_GE(ThreadSlices("hvdtune-gloo").size(), 1u)
          << "no thread named hvdtune-gloo";
      if (honoured) {
        EXPECT_EQ(gloo_count(250), gloo_before + 1);
      }
    }
    std::vector<std::vector<float>> outs;
    RunSet(rt, "slice", 3, Iota(3), &outs);
  }
  EXPECT_EQ(count(250), before) << "the thread ended with its runtime";
  if (gloo) {
    EXPECT_EQ(gloo_count(250), gloo_before)
        << "Gloo's loop thread ended with its runtime";
  }
  if (!honoured) {
    GTEST_SKIP() << "this kernel keeps its own slice (Linux 6.12 or later "
                    "honours a requested one); only the name was checked";
  }
}

TEST(RuntimeThreads, CycleThreadBoostFollowsTheKnobAndNoOtherThreadChanges) {
  // A boost lowers the nice value: that needs CAP_SYS_NICE or RLIMIT_NICE.
  // Every rank decides alike, so that all of them create the runtime.
  int can = 1;
  std::thread([&] {
    can = internal::CanRaiseThreadPriority(3) ? 1 : 0;
  }).join();
  MPI_Allreduce(MPI_IN_PLACE, &can, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (can == 0) {
    GTEST_SKIP() << "this process may not raise a thread's priority "
                    "(no CAP_SYS_NICE, RLIMIT_NICE too low)";
  }
  const int mine = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  const auto count = [&](int nice) {
    const auto n = CycleThreadNices();
    return std::count(n.begin(), n.end(), nice);
  };
  const auto wait_count = [&](int nice, std::int64_t want) {
    for (int i = 0; i < 200 && count(nice) != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return count(nice);
  };
  const int boosted = std::max(mine - 3, -20);
  const int reboosted = std::max(mine - 1, -20);
  const std::int64_t before = count(boosted);
  const std::int64_t before_re = count(reboosted);
  {
    Runtime rt(RuntimeOptions{MapEnv({{"HVDTUNE_CYCLE_THREAD_BOOST", "3"}})});
    EXPECT_EQ(rt.knobs().cycle_thread_boost(), 3);
    EXPECT_EQ(wait_count(boosted, before + 1), before + 1);
    EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), mine)
        << "the application's thread keeps its nice value";
    std::vector<std::vector<float>> outs;
    RunSet(rt, "boost", 3, Iota(3), &outs);

    // A knob update moves it, on every rank.
    KnobSettings next = rt.knobs();
    next.Set(KnobId::kCycleThreadBoost, 1);
    std::uint64_t version = 0;
    if (rt.rank() == 0) version = rt.RequestKnobUpdate(next);
    MPI_Bcast(&version, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    ASSERT_TRUE(WaitFor([&] { return rt.knob_version() == version; }));
    EXPECT_EQ(wait_count(reboosted, before_re + 1), before_re + 1);
    EXPECT_EQ(count(boosted), before);
    RunSet(rt, "boost.updated", 3, Iota(3), &outs);
  }
  EXPECT_EQ(count(reboosted), before_re) << "the thread ended with its runtime";
}

TEST(RuntimeErrors, MismatchedShapeFailsOnEveryRankAndOthersGoOn) {
  Runtime& rt = SharedRuntime();
  if (rt.size() == 1) GTEST_SKIP() << "a mismatch needs two ranks";
  std::vector<float> a(8, 1.0f), b(8);
  const std::int64_t bad_shape[] = {rt.rank() == 1 ? 4 : 8};
  const std::int64_t good_shape[] = {8};
  Handle bad = rt.Allreduce("mismatch.shape", a.data(), b.data(), bad_shape,
                            DataType::kFloat32, ReduceOp::kSum);
  std::vector<float> c(8, 1.0f), d(8);
  Handle good = rt.Allreduce("mismatch.good", c.data(), d.data(), good_shape,
                             DataType::kFloat32, ReduceOp::kSum);
  const Status s = bad.Wait();
  EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
  EXPECT_NE(s.message().find("mismatch.shape"), std::string::npos);
  EXPECT_NE(s.message().find("[8]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[4]"), std::string::npos) << s.message();
  ASSERT_TRUE(good.Wait().ok());
  EXPECT_EQ(d[0], static_cast<float>(rt.size()));
}

TEST(RuntimeErrors, MismatchedDtypeOpAndRootFail) {
  Runtime& rt = SharedRuntime();
  if (rt.size() == 1) GTEST_SKIP() << "a mismatch needs two ranks";
  std::vector<double> a(4, 1.0), b(4);
  const std::int64_t shape[] = {2};
  const DataType dt = rt.rank() == 0 ? DataType::kFloat64 : DataType::kInt64;
  Status s = rt.Allreduce("mismatch.dtype", a.data(), b.data(), shape, dt,
                          ReduceOp::kSum)
                 .Wait();
  EXPECT_EQ(s.code(), StatusCode::kMismatch);
  EXPECT_NE(s.message().find("dtype"), std::string::npos) << s.message();
  s = rt.Allreduce("mismatch.op", a.data(), b.data(), shape, DataType::kFloat64,
                   rt.rank() == 0 ? ReduceOp::kSum : ReduceOp::kMax)
          .Wait();
  EXPECT_EQ(s.code(), StatusCode::kMismatch);
  s = rt.Broadcast("mismatch.root", a.data(), shape, DataType::kFloat64,
                   rt.rank() == 0 ? 0 : 1)
          .Wait();
  EXPECT_EQ(s.code(), StatusCode::kMismatch);
  // A name used for allreduce on one rank and broadcast on another.
  s = (rt.rank() == 0 ? rt.Broadcast("mismatch.kind", a.data(), shape,
                                     DataType::kFloat64, 0)
                      : rt.Allreduce("mismatch.kind", a.data(), b.data(), shape,
                                     DataType::kFloat64, ReduceOp::kSum))
          .Wait();
  EXPECT_EQ(s.code(), StatusCode::kMismatch);
  // And the runtime still works, with the same name reused correctly.
  s = rt.Allreduce("mismatch.dtype", a.data(), b.data(), shape,
                   DataType::kFloat64, ReduceOp::kSum)
          .Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(b[0], rt.size());
}

TEST(RuntimeErrors, BadArgumentsFailAtOnce) {
  Runtime& rt = SharedRuntime();
  std::vector<float> a(4);
  const std::int64_t shape[] = {4};
  const std::int64_t negative[] = {-1};
  EXPECT_EQ(rt.Allreduce("", a.data(), a.data(), shape, DataType::kFloat32,
                         ReduceOp::kSum)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rt.Allreduce("null", nullptr, a.data(), shape, DataType::kFloat32,
                         ReduceOp::kSum)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rt.Allreduce("neg", a.data(), a.data(), negative,
                         DataType::kFloat32, ReduceOp::kSum)
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  const Status root =
      rt.Broadcast("badroot", a.data(), shape, DataType::kFloat32, rt.size())
          .status();
  EXPECT_EQ(root.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(root.message().find("root"), std::string::npos);
}

TEST(RuntimeErrors, DuplicateNameInFlightIsRejected) {
  Runtime& rt = SharedRuntime();
  std::vector<float> a(4, 1.0f), b(4), c(4);
  const std::int64_t shape[] = {4};
  // Rank 0 submits "dup" only after every other rank has tried to submit it
  // twice, so there the first cannot have completed before the second.
  const bool hold_back = rt.rank() == 0 && rt.size() > 1;
  Handle first, second;
  if (!hold_back) {
    first = rt.Allreduce("dup", a.data(), b.data(), shape, DataType::kFloat32,
                         ReduceOp::kSum);
    second = rt.Allreduce("dup", a.data(), c.data(), shape, DataType::kFloat32,
                          ReduceOp::kSum);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (hold_back) {
    first = rt.Allreduce("dup", a.data(), b.data(), shape, DataType::kFloat32,
                         ReduceOp::kSum);
  }
  const Status s1 = first.Wait();
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  if (rt.size() > 1 && !hold_back) {
    const Status s2 = second.Wait();
    ASSERT_FALSE(s2.ok());
    EXPECT_EQ(s2.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s2.message().find("already in flight"), std::string::npos);
  } else if (second.valid()) {
    // One rank: the first may have completed before the second came.
    const Status s2 = second.Wait();
    if (!s2.ok()) {
      EXPECT_EQ(s2.code(), StatusCode::kInvalidArgument);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(RuntimeFusion, FusionOnAndOffGiveIdenticalResults) {
  std::vector<std::vector<float>> fused, unfused, tiny;
  {
    Runtime rt(RuntimeOptions{MapEnv({})});
    RunSet(rt, "fusion", 120, Iota(120), &fused);
    EXPECT_LT(rt.stats().collective_calls, 120u) << "nothing was fused";
  }
  {
    Runtime rt(RuntimeOptions{MapEnv({{"HOROVOD_FUSION_THRESHOLD", "0"}})});
    RunSet(rt, "fusion", 120, Iota(120), &unfused);
    EXPECT_EQ(rt.stats().collective_calls, 120u);
  }
  {
    Runtime rt(RuntimeOptions{MapEnv({{"HOROVOD_FUSION_THRESHOLD", "4096"}})});
    RunSet(rt, "fusion", 120, Iota(120), &tiny);
  }
  std::vector<std::vector<float>> chunked;
  {
    // Chunks of 1025 floats: chunk edges fall inside and across tensors.
    Runtime rt(
        RuntimeOptions{MapEnv({{"HVDTUNE_PIPELINE_CHUNK_BYTES", "4100"}})});
    RunSet(rt, "fusion", 120, Iota(120), &chunked);
  }
  EXPECT_EQ(fused, unfused);
  EXPECT_EQ(fused, tiny);
  EXPECT_EQ(fused, chunked);
}

TEST(RuntimeFusion, FlatBufferViewsOnSomeRanksGiveTheSameSums) {
  // Even ranks submit views of one flat buffer in backward order (their
  // fused groups are reduced without copies), odd ranks separate buffers
  // (copied): the ranks' layouts differ, the sums may not. In place and
  // not, and with chunk edges inside and across tensors.
  constexpr int kN = 60;
  const bool flat = WorldRank() % 2 == 0;
  for (const bool in_place : {false, true}) {
    for (const char* chunk : {"4194304", "4100"}) {
      Runtime rt(
          RuntimeOptions{MapEnv({{"HVDTUNE_PIPELINE_CHUNK_BYTES", chunk}})});
      std::vector<std::int64_t> at(kN + 1, 0);
      for (int i = 0; i < kN; ++i) at[i + 1] = at[i] + SetCount(i);
      std::vector<float> flat_in(flat ? at[kN] : 0), flat_out(flat_in.size());
      std::vector<std::vector<float>> apart_in(kN), apart_out(kN);
      std::vector<Handle> handles(kN);
      std::vector<std::span<float>> outs(kN);
      for (int i = kN; i-- > 0;) {
        const std::int64_t count = SetCount(i);
        float* x = flat_in.data() + at[i];
        float* y = flat_out.data() + at[i];
        if (!flat) {
          apart_in[i].resize(count);
          apart_out[i].resize(count);
          x = apart_in[i].data();
          y = apart_out[i].data();
        }
        if (in_place) y = x;
        FillInput(DataType::kFloat32, x, count, rt.rank() + i);
        const std::int64_t shape[] = {count};
        handles[i] = rt.Allreduce("flat." + std::to_string(i), x, y, shape,
                                  DataType::kFloat32, ReduceOp::kSum);
        outs[i] = {y, static_cast<std::size_t>(count)};
      }
      for (int i = 0; i < kN; ++i) {
        ASSERT_TRUE(handles[i].Wait().ok());
        ASSERT_TRUE(IsSetSum(rt, i, outs[i]))
            << "in place " << in_place << ", chunk " << chunk;
      }
      EXPECT_LT(rt.stats().collective_calls, static_cast<std::uint64_t>(kN))
          << "nothing was fused";
    }
  }
}

TEST(RuntimeCache, RepeatedTensorsHitTheCache) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  std::vector<std::vector<float>> outs;
  RunSet(rt, "cached", 50, Iota(50), &outs);
  const RuntimeStats first = rt.stats();
  EXPECT_EQ(first.cache_hits, 0u);
  for (int step = 0; step < 3; ++step)
    RunSet(rt, "cached", 50, Iota(50), &outs);
  EXPECT_EQ(rt.stats().cache_hits, 150u);
}

TEST(RuntimeCache, SmallCacheEvictsAndStaysCorrect) {
  Runtime rt(RuntimeOptions{MapEnv({{"HOROVOD_CACHE_CAPACITY", "8"}})});
  std::vector<int> order = Iota(20);
  std::mt19937 rng(static_cast<unsigned>(rt.rank() + 3));
  std::vector<std::vector<float>> outs;
  for (int step = 0; step < 4; ++step) {
    std::shuffle(order.begin(), order.end(), rng);
    RunSet(rt, "evict", 20, order, &outs);
    RunSet(rt, "evict.small", 6, Iota(6), &outs);
    // Six names just cached in eight entries: these hit however the
    // tensors above were split into cycles.
    RunSet(rt, "evict.small", 6, Iota(6), &outs);
  }
  EXPECT_GE(rt.stats().cache_hits, 4u * 6u);
}

TEST(RuntimeCache, ChangedShapeOfCachedNameIsRenegotiated) {
  Runtime& rt = SharedRuntime();
  for (int n : {4, 4, 9, 9, 4}) {
    std::vector<std::int32_t> a(static_cast<std::size_t>(n), 2), b(a.size());
    const std::int64_t shape[] = {n};
    const Status s = rt.Allreduce("reshaped", a.data(), b.data(), shape,
                                  DataType::kInt32, ReduceOp::kSum)
                         .Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(b, std::vector<std::int32_t>(a.size(), 2 * rt.size()));
  }
}

TEST(RuntimeCache, CacheOffStillCorrect) {
  Runtime rt(RuntimeOptions{MapEnv({{"HOROVOD_CACHE_CAPACITY", "0"}})});
  std::vector<std::vector<float>> outs;
  for (int step = 0; step < 2; ++step)
    RunSet(rt, "nocache", 30, Iota(30), &outs);
  EXPECT_EQ(rt.stats().cache_hits, 0u);
}

TEST(RuntimeKnobs, UpdateAppliedAtTheSameCycleOnAllRanks) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  KnobSettings next = rt.knobs();
  next.Set(KnobId::kFusionThreshold, 1 << 20);
  next.Set(KnobId::kCycleTime, 2.0);
  next.Set(KnobId::kCacheCapacity, 16);
  std::uint64_t version = 0;
  if (rt.rank() == 0) {
    version = rt.RequestKnobUpdate(next);
    EXPECT_EQ(version, 1u);
  } else {
    EXPECT_THROW(rt.RequestKnobUpdate(next), std::logic_error);
  }
  MPI_Bcast(&version, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  ASSERT_TRUE(WaitFor([&] { return rt.knob_version() == version; }));
  EXPECT_EQ(rt.knobs(), next);
  std::uint64_t cycle = rt.stats().knob_update_cycle;
  EXPECT_GT(cycle, 0u);
  std::vector<std::uint64_t> cycles(static_cast<std::size_t>(rt.size()));
  MPI_Allgather(&cycle, 1, MPI_UINT64_T, cycles.data(), 1, MPI_UINT64_T,
                MPI_COMM_WORLD);
  for (std::uint64_t c : cycles) EXPECT_EQ(c, cycles[0]);
  std::vector<std::vector<float>> outs;
  RunSet(rt, "after.update", 40, Iota(40), &outs);
}

TEST(RuntimeKnobs, OutOfRangeUpdateIsRejected) {
  Runtime& rt = SharedRuntime();
  if (rt.rank() != 0) return;
  KnobSettings bad = rt.knobs();
  bad.Set(KnobId::kCycleTime, 0);
  EXPECT_THROW(rt.RequestKnobUpdate(bad), ConfigError);
  bad = rt.knobs();
  bad.Set(KnobId::kAllreduceAlgorithm, 7);
  EXPECT_THROW(rt.RequestKnobUpdate(bad), ConfigError);
}

TEST(RuntimeKnobs, KnobsChangingUnderTrafficNeverChangeResults) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  std::vector<std::vector<float>> reference, outs;
  RunSet(rt, "churn", 60, Iota(60), &reference);
  const std::int64_t thresholds[] = {0, 4096, 1 << 16, 128 << 20};
  for (int step = 0; step < 8; ++step) {
    if (rt.rank() == 0) {
      KnobSettings k = rt.knobs();
      k.Set(KnobId::kFusionThreshold,
            static_cast<double>(thresholds[step % 4]));
      k.Set(KnobId::kCacheCapacity, step % 3 == 0 ? 0 : 1024);
      k.Set(KnobId::kCycleTime, 0.5 + step % 2);
      rt.RequestKnobUpdate(k);
    }
    RunSet(rt, "churn", 60, Iota(60), &outs);
    ASSERT_EQ(outs, reference) << "step " << step;
  }
}

TEST(RuntimeLifecycle, InitShutdownInit) {
  for (int round = 0; round < 3; ++round) {
    Runtime rt(RuntimeOptions{MapEnv({})});
    std::vector<std::vector<float>> outs;
    RunSet(rt, "round", 10, Iota(10), &outs);
    rt.Shutdown();
    rt.Shutdown();  // twice is fine
    EXPECT_FALSE(rt.running());
  }
}

// One rank shuts down: the others stop too (their collectives fail with
// kAborted) but stay initialised until they shut down themselves, so that a
// binding's init() there returns at once instead of waiting in a collective
// construction for a rank that may have exited. Afterwards every rank can
// initialise again.
TEST(RuntimeLifecycle, OnlyALocalShutdownEndsThisRanksInitialisation) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  const bool first = rt.rank() == rt.size() - 1;
  if (first) rt.Shutdown();
  ASSERT_TRUE(WaitFor([&] { return !rt.running(); }));
  EXPECT_EQ(rt.shut_down(), first);
  float a = 1, b = 0;
  const std::int64_t one[] = {1};
  EXPECT_EQ(rt.Allreduce("after.peer.shutdown", &a, &b, one, DataType::kFloat32,
                         ReduceOp::kSum)
                .Wait()
                .code(),
            StatusCode::kAborted);
  rt.Shutdown();
  EXPECT_TRUE(rt.shut_down());
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime again(RuntimeOptions{MapEnv({})});
  ASSERT_TRUE(again.running());
  EXPECT_FALSE(again.shut_down());
  ASSERT_TRUE(again
                  .Allreduce("after.reinit", &a, &b, one, DataType::kFloat32,
                             ReduceOp::kSum)
                  .Wait()
                  .ok());
  EXPECT_EQ(b, static_cast<float>(again.size()));
}

TEST(RuntimeLifecycle, ShutdownFailsPendingHandles) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  if (rt.size() == 1) GTEST_SKIP() << "a lonely tensor needs two ranks";
  std::vector<float> a(4), b(4);
  const std::int64_t shape[] = {4};
  // Only this rank ever asks for this name: it can never run.
  Handle lonely =
      rt.Allreduce("lonely." + std::to_string(rt.rank()), a.data(), b.data(),
                   shape, DataType::kFloat32, ReduceOp::kSum);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(lonely.Poll());
  MPI_Barrier(MPI_COMM_WORLD);
  rt.Shutdown();
  const Status s = lonely.Wait();
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(rt.Allreduce("after", a.data(), b.data(), shape, DataType::kFloat32,
                         ReduceOp::kSum)
                .Wait()
                .code(),
            StatusCode::kAborted);
}

TEST(RuntimeLifecycle, BadConfigurationStopsInitOnEveryRank) {
  try {
    Runtime rt(RuntimeOptions{MapEnv({{"HOROVOD_CYCLE_TIME", "0"}})});
    ADD_FAILURE() << "init accepted HOROVOD_CYCLE_TIME=0";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("HOROVOD_CYCLE_TIME"),
              std::string::npos)
        << e.what();
  }
}

TEST(RuntimeLifecycle, SettingThatDiffersBetweenRanksIsRejected) {
  if (WorldSize() == 1) GTEST_SKIP() << "needs two ranks";
  const std::string value = WorldRank() == 1 ? "1048576" : "2097152";
  try {
    Runtime rt(RuntimeOptions{MapEnv({{"HOROVOD_FUSION_THRESHOLD", value}})});
    ADD_FAILURE() << "init accepted different fusion thresholds";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("differs"), std::string::npos)
        << e.what();
  }
  // Only rank 1 has a bad value: every rank refuses, nobody hangs.
  try {
    Runtime rt(RuntimeOptions{MapEnv(
        {{"HOROVOD_CACHE_CAPACITY", WorldRank() == 1 ? "lots" : "64"}})});
    ADD_FAILURE() << "init accepted a bad value on rank 1";
  } catch (const ConfigError& e) {
    if (WorldRank() == 1) {
      EXPECT_NE(std::string(e.what()).find("'lots'"), std::string::npos);
    } else {
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos);
    }
  }
}

TEST(CApi, AllreduceAndAllgather) {
  hvdtune_runtime* rt = nullptr;
  char err[256] = {};
  ASSERT_EQ(hvdtune_init(&rt, err, sizeof err), HVDTUNE_OK) << err;
  EXPECT_EQ(hvdtune_rank(rt), WorldRank());
  EXPECT_EQ(hvdtune_size(rt), WorldSize());
  std::int64_t in[3] = {1, 2, 3}, out[3] = {};
  const std::int64_t shape[] = {3};
  hvdtune_handle* h = nullptr;
  ASSERT_EQ(hvdtune_allreduce(rt, "c.ar", in, out, 1, shape, 2, 0, &h),
            HVDTUNE_OK);
  ASSERT_EQ(hvdtune_wait(h), HVDTUNE_OK) << hvdtune_handle_error(h);
  EXPECT_EQ(out[2], 3 * WorldSize());
  hvdtune_handle_release(h);
  ASSERT_EQ(hvdtune_allgather(rt, "c.ag", in, 1, shape, 2, &h), HVDTUNE_OK);
  ASSERT_EQ(hvdtune_wait(h), HVDTUNE_OK);
  const void* data = nullptr;
  std::size_t bytes = 0;
  std::int64_t oshape[4] = {};
  int ndim = 0;
  ASSERT_EQ(hvdtune_handle_output(h, &data, &bytes, oshape, 4, &ndim),
            HVDTUNE_OK);
  EXPECT_EQ(ndim, 1);
  EXPECT_EQ(oshape[0], 3 * WorldSize());
  EXPECT_EQ(bytes, 3u * 8u * static_cast<std::size_t>(WorldSize()));
  hvdtune_handle_release(h);
  EXPECT_EQ(hvdtune_allreduce(rt, "c.bad", in, out, 1, shape, 99, 0, &h),
            HVDTUNE_INVALID_ARGUMENT);
  EXPECT_EQ(hvdtune_shutdown(rt), HVDTUNE_OK);
  hvdtune_destroy(rt);
}

}  // namespace
}  // namespace hvdtune
