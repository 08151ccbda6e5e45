// The event stream under several ranks: what sinks see, a failing sink,
// and the stall check (HOROVOD_STALL_*).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_util.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using namespace testing_util;

// Counts what it sees; the cycle thread writes, the test reads after a
// Wait() or after shutdown.
class CountingSink : public EventSink {
 public:
  void OnStart(const RuntimeInfo& info) override { started = info.size; }
  void OnCycle(const CycleEvent& e) override {
    ++cycles;
    tensors_in_cycles += e.tensors;
    bytes_in_cycles += e.bytes;
  }
  void OnCollective(const CollectiveEvent& e) override {
    ++collectives;
    collective_tensors += e.tensors;
    if (e.tensors > 1) ++fused;
  }
  void OnTensor(const TensorEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    names.emplace_back(e.name);
    ordered &= e.enqueued <= e.negotiated && e.negotiated <= e.started &&
               e.started <= e.finished;
  }
  void OnKnobsApplied(const KnobsAppliedEvent& e) override {
    last_version = e.version;
    last_cycle_time = e.values.cycle_time_ms();
  }
  void OnStall(const StallEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    stalls.push_back(e);
  }
  void OnError(const ErrorEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back(e);
  }
  void OnStop() override { stopped = true; }

  std::atomic<int> started{0}, cycles{0}, collectives{0}, collective_tensors{0},
      fused{0}, tensors_in_cycles{0};
  std::atomic<std::int64_t> bytes_in_cycles{0};
  std::atomic<std::uint64_t> last_version{0};
  std::atomic<double> last_cycle_time{0};
  std::atomic<bool> stopped{false};
  std::mutex mu;
  std::vector<std::string> names;
  std::vector<StallEvent> stalls;
  std::vector<ErrorEvent> errors;
  bool ordered = true;
};

class ThrowingSink : public EventSink {
 public:
  void OnTensor(const TensorEvent&) override {
    throw std::runtime_error("sink is broken");
  }
};

std::vector<Handle> Allreduces(Runtime& rt, const std::string& prefix, int n,
                               std::vector<std::vector<float>>& bufs) {
  bufs.assign(static_cast<std::size_t>(n), std::vector<float>(64, 1.0f));
  std::vector<Handle> hs;
  const std::int64_t shape[] = {64};
  for (int i = 0; i < n; ++i) {
    auto& b = bufs[static_cast<std::size_t>(i)];
    hs.push_back(rt.Allreduce(prefix + std::to_string(i), b.data(), b.data(),
                              shape, DataType::kFloat32, ReduceOp::kSum));
  }
  return hs;
}

TEST(EventStream, SinksSeeEveryTensorCollectiveAndCycle) {
  auto sink = std::make_shared<CountingSink>();
  {
    RuntimeOptions opt{MapEnv({})};
    opt.sinks.push_back(sink);
    Runtime rt(opt);
    EXPECT_EQ(sink->started.load(), rt.size());
    std::vector<std::vector<float>> bufs;
    for (int step = 0; step < 3; ++step) {
      for (Handle& h : Allreduces(rt, "ev.", 20, bufs)) {
        ASSERT_TRUE(h.Wait().ok());
      }
    }
    KnobSettings k = rt.knobs();
    k.Set(KnobId::kCycleTime, 2.5);
    if (rt.rank() == 0) rt.RequestKnobUpdate(k);
    for (int i = 0; i < 200 && rt.knobs().cycle_time_ms() != 2.5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(rt.knobs().cycle_time_ms(), 2.5);
    rt.Shutdown();
    const RuntimeStats stats = rt.stats();
    EXPECT_EQ(sink->names.size(), 60u);
    EXPECT_TRUE(sink->ordered);
    EXPECT_EQ(sink->collective_tensors.load(), 60);
    EXPECT_EQ(static_cast<std::uint64_t>(sink->collectives.load()),
              stats.collective_calls);
    EXPECT_EQ(sink->tensors_in_cycles.load(), 60);
    EXPECT_EQ(static_cast<std::uint64_t>(sink->cycles.load()), stats.cycles);
    EXPECT_EQ(sink->bytes_in_cycles.load(), 60 * 64 * 4);
    EXPECT_EQ(sink->last_version.load(), stats.knob_version);
    EXPECT_EQ(sink->last_cycle_time.load(), 2.5);
    EXPECT_TRUE(sink->stopped.load());
  }
}

// HOROVOD_TIMELINE=DYNAMIC starts no timeline (and names no file
// "DYNAMIC"); StartTimeline / StopTimeline make rank 0 write what ran
// between them, and a second start writes a second file, closed at
// shutdown.
TEST(DynamicTimeline, StartAndStopWriteWhatRanBetween) {
  namespace fs = std::filesystem;
  long id = static_cast<long>(::getpid());
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const fs::path dir =
      fs::temp_directory_path() / ("hvdtune_timeline_" + std::to_string(id));
  if (WorldRank() == 0) {
    fs::create_directories(dir);
    fs::remove("DYNAMIC");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Runtime rt(RuntimeOptions{MapEnv({{"HOROVOD_TIMELINE", "DYNAMIC"}})});
  const auto reduce = [&](const std::string& name) {
    float x = 1, y = 0;
    const std::int64_t one[] = {1};
    ASSERT_TRUE(
        rt.Allreduce(name, &x, &y, one, DataType::kFloat32, ReduceOp::kSum)
            .Wait()
            .ok());
  };
  reduce("tl.before");
  EXPECT_EQ(rt.StartTimeline("").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(rt.StartTimeline((dir / "a.json").string()).ok());
  reduce("tl.during.a");
  ASSERT_TRUE(rt.StopTimeline().ok());
  ASSERT_TRUE(rt.StopTimeline().ok());  // none running: fine
  reduce("tl.after.a");
  ASSERT_TRUE(rt.StartTimeline((dir / "b.json").string(), true).ok());
  reduce("tl.during.b");
  rt.Shutdown();
  EXPECT_EQ(rt.StartTimeline((dir / "c.json").string()).code(),
            StatusCode::kAborted);
  if (rt.rank() == 0) {
    EXPECT_FALSE(fs::exists("DYNAMIC"));
    const auto read = [](const fs::path& p) {
      std::ifstream f(p);
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    };
    const std::string a = read(dir / "a.json"), b = read(dir / "b.json");
    EXPECT_NE(a.find("tl.during.a"), std::string::npos) << a;
    EXPECT_EQ(a.find("tl.before"), std::string::npos);
    EXPECT_EQ(a.find("tl.after.a"), std::string::npos);
    EXPECT_EQ(a.find_last_not_of(" \n"), a.rfind(']')) << "a is not closed";
    EXPECT_NE(b.find("tl.during.b"), std::string::npos) << b;
    EXPECT_EQ(b.find("tl.during.a"), std::string::npos);
    EXPECT_EQ(b.find_last_not_of(" \n"), b.rfind(']')) << "b is not closed";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (WorldRank() == 0) fs::remove_all(dir);
}

TEST(EventStream, FailingSinkIsDetachedAndTheJobGoesOn) {
  auto counting = std::make_shared<CountingSink>();
  RuntimeOptions opt{MapEnv({})};
  opt.sinks.push_back(std::make_shared<ThrowingSink>());
  opt.sinks.push_back(counting);
  Runtime rt(opt);
  std::vector<std::vector<float>> bufs;
  for (int step = 0; step < 2; ++step) {
    for (Handle& h : Allreduces(rt, "bad.", 5, bufs)) {
      ASSERT_TRUE(h.Wait().ok());
    }
    EXPECT_EQ(bufs[0][0], static_cast<float>(rt.size()));
  }
  rt.Shutdown();
  EXPECT_EQ(counting->names.size(), 10u);
}

// Rank 1 never submits "late": rank 0 warns naming it, and with a shutdown
// time the tensor fails on the ranks that submitted it.
TEST(StallCheck, WarnsNamingTheMissingRankThenFailsTheTensor) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto sink = std::make_shared<CountingSink>();
  RuntimeOptions opt{MapEnv({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "0.3"},
                             {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "1"}})};
  opt.sinks.push_back(sink);
  Runtime rt(opt);
  std::vector<float> buf(16, 1.0f);
  const std::int64_t shape[] = {16};
  Handle late;
  const auto t0 = std::chrono::steady_clock::now();
  if (rt.rank() != 1) {
    late = rt.Allreduce("late", buf.data(), buf.data(), shape,
                        DataType::kFloat32, ReduceOp::kSum);
  }
  // Other tensors still run while "late" waits.
  std::vector<float> ok(16, 1.0f);
  Handle after = rt.Allreduce("after", ok.data(), ok.data(), shape,
                              DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(after.Wait().ok());
  EXPECT_EQ(ok[0], static_cast<float>(rt.size()));
  if (rt.rank() != 1) {
    const Status s = late.Wait();
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_EQ(s.code(), StatusCode::kStalled) << s.ToString();
    EXPECT_NE(s.message().find("'late'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank 1 "), std::string::npos) << s.message();
    EXPECT_GE(waited, 0.9);
    EXPECT_LT(waited, 10.0);
  }
  // The runtime still works for everyone afterwards (rank 1 waits until the
  // others saw the failure, or its tensor would stall too).
  MPI_Barrier(MPI_COMM_WORLD);
  Handle again = rt.Allreduce("late2", ok.data(), ok.data(), shape,
                              DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(again.Wait().ok());
  rt.Shutdown();
  if (rt.rank() == 0) {
    ASSERT_FALSE(sink->stalls.empty());
    const StallEvent& first = sink->stalls.front();
    EXPECT_EQ(first.tensor, "late");
    EXPECT_EQ(first.missing_ranks, std::vector<int>{1});
    EXPECT_FALSE(first.shutdown);
    EXPECT_TRUE(sink->stalls.back().shutdown);
  }
}

// A cached tensor (same name and shape every step) that one rank stops
// submitting is found too: its cache bit is dropped after the check time
// and rank 0 then sees who is missing.
TEST(StallCheck, CachedTensorThatStallsIsReported) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto sink = std::make_shared<CountingSink>();
  RuntimeOptions opt{MapEnv({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "0.3"},
                             {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "1"}})};
  opt.sinks.push_back(sink);
  Runtime rt(opt);
  std::vector<float> buf(16, 1.0f);
  const std::int64_t shape[] = {16};
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(rt.Allreduce("cached", buf.data(), buf.data(), shape,
                             DataType::kFloat32, ReduceOp::kSum)
                    .Wait()
                    .ok());
  }
  EXPECT_GT(rt.stats().cache_hits, 0u);
  Handle stalled;
  if (rt.rank() != rt.size() - 1) {
    stalled = rt.Allreduce("cached", buf.data(), buf.data(), shape,
                           DataType::kFloat32, ReduceOp::kSum);
  }
  std::vector<float> ok(16, 1.0f);
  ASSERT_TRUE(rt.Allreduce("after2", ok.data(), ok.data(), shape,
                           DataType::kFloat32, ReduceOp::kSum)
                  .Wait()
                  .ok());
  if (stalled.valid()) {
    const Status s = stalled.Wait();
    EXPECT_EQ(s.code(), StatusCode::kStalled) << s.ToString();
  }
  // The last rank keeps its runtime up until the others saw the failure.
  MPI_Barrier(MPI_COMM_WORLD);
  rt.Shutdown();
  if (rt.rank() == 0) {
    ASSERT_FALSE(sink->stalls.empty());
    EXPECT_EQ(sink->stalls.front().tensor, "cached");
    EXPECT_EQ(sink->stalls.front().missing_ranks,
              std::vector<int>{rt.size() - 1});
  }
}

}  // namespace
}  // namespace hvdtune
