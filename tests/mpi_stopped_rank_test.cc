// A rank that stops calling into hvdtune while the others wait for it in the
// negotiation: a process stopped with SIGSTOP (as a debugger or a job
// scheduler's suspend does). The others warn every
// HOROVOD_STALL_CHECK_TIME_SECONDS while they wait and, past
// HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, fail their handles with STALLED
// instead of waiting forever. Needs two ranks or more.
//
// Inside a collective (the data phase) a rank that stops leaves the others
// blocked in MPI: their watchdog asks every rank whether it is still there
// (PeerProbe) and names those that do not answer.
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/backends/mpi/peer_probe.h"
#include "hvdtune/runtime.h"
#include "hvdtune/services.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using testing_util::MapEnv;

int WorldSize() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Stops this whole process (every thread, the cycle thread included) for
// `seconds`: a forked child sends SIGCONT, since a stopped process cannot
// resume itself.
void StopFor(double seconds) {
  const pid_t self = getpid();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    usleep(static_cast<useconds_t>(seconds * 1e6));
    kill(self, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
  waitpid(child, nullptr, 0);
}

class StallRecorder : public EventSink {
 public:
  EventMask interests() const override { return EventBit(EventKind::kStall); }
  void OnStall(const StallEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
  }
  std::vector<StallEvent> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<StallEvent> events_;
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

TEST(StoppedRank, OthersWarnWhileWaitingAndGoOnWhenItResumes) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  auto recorder = std::make_shared<StallRecorder>();
  RuntimeOptions options{MapEnv({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "0.5"}})};
  options.sinks.push_back(recorder);
  Runtime rt(std::move(options));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rt.rank() == 1) StopFor(2.0);
  std::vector<std::int32_t> in(4, rt.rank() + 1), out(4, 0);
  const std::int64_t shape[] = {4};
  const Status s = rt.Allreduce("stopped.resumes", in.data(), out.data(), shape,
                                DataType::kInt32, ReduceOp::kSum)
                       .Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  const int n = rt.size();
  EXPECT_EQ(out, std::vector<std::int32_t>(4, n * (n + 1) / 2));
  if (rt.rank() != 1) {
    const std::vector<StallEvent> stalls = recorder->events();
    ASSERT_FALSE(stalls.empty()) << "no warning while rank 1 was stopped";
    EXPECT_EQ(stalls.front().tensor, "");  // the negotiation itself
    EXPECT_GE(stalls.front().waited_seconds, 0.5);
    EXPECT_FALSE(stalls.front().shutdown);
  }
  rt.Shutdown();
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(StoppedRank, PastTheShutdownTimeHandlesFailWithStalled) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  Runtime rt(
      RuntimeOptions{MapEnv({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "0.5"},
                             {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "1"}})});
  MPI_Barrier(MPI_COMM_WORLD);
  if (rt.rank() == 1) StopFor(4.0);
  std::vector<float> in(8, 1.0f), out(8, 0.0f);
  const std::int64_t shape[] = {8};
  const auto start = std::chrono::steady_clock::now();
  const Status s = rt.Allreduce("stopped.gives_up", in.data(), out.data(),
                                shape, DataType::kFloat32, ReduceOp::kSum)
                       .Wait();
  const double waited = Seconds(start);
  // Every rank fails with the reason: the waiting ones with STALLED after
  // about a second. Rank 1 resumes with its own negotiation wait already
  // past the limit, so its runtime stops at once too: its call fails with
  // STALLED if it got in first, else as a call to a stopped runtime
  // (ABORTED); both threads resume together, so either may come first.
  if (rt.rank() == 1) {
    ASSERT_TRUE(s.code() == StatusCode::kStalled ||
                s.code() == StatusCode::kAborted)
        << s.ToString();
  } else {
    ASSERT_EQ(s.code(), StatusCode::kStalled) << s.ToString();
  }
  EXPECT_NE(s.message().find("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"),
            std::string::npos)
      << s.message();
  if (rt.rank() != 1) {
    EXPECT_LT(waited, 3.5) << "waited for the stopped rank to resume";
  }
  // The runtime has stopped; later collectives fail at once with the reason.
  const Status later = rt.Allreduce("stopped.later", in.data(), out.data(),
                                    shape, DataType::kFloat32, ReduceOp::kSum)
                           .Wait();
  EXPECT_EQ(later.code(), StatusCode::kAborted);
  EXPECT_NE(later.message().find("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"),
            std::string::npos)
      << later.message();
  rt.Shutdown();  // returns: nothing joins a thread stuck in MPI
  MPI_Barrier(MPI_COMM_WORLD);
}

// Nodes of two consecutive ranks (0-1, 2-3, ...), for the messages.
MPI_Comm PairsAsNodes() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &local);
  return local;
}

// A barrier that keeps answering: a rank done asking must still answer
// the ranks whose questions reach it later (the runtime's watchdog answers
// every 0.25 s).
void AnsweringBarrier(internal::PeerProbe& probe) {
  MPI_Request barrier = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
  for (int done = 0; !done;) {
    probe.Answer();
    MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
    if (!done) usleep(1000);
  }
}

TEST(PeerProbe, EveryRankThatIsThereAnswers) {
  MPI_Comm local = PairsAsNodes();
  {
    internal::PeerProbe probe(MPI_COMM_WORLD, local);
    // Every rank asks at once: each answers the others while it waits.
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(probe.Unanswered(30.0), std::vector<int>{});
    EXPECT_LT(Seconds(start), 10.0);
    AnsweringBarrier(probe);
  }
  MPI_Comm_free(&local);
}

TEST(PeerProbe, AStoppedRankIsNamedAndAnswersAgainOnceResumed) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  MPI_Comm local = PairsAsNodes();
  {
    internal::PeerProbe probe(MPI_COMM_WORLD, local);
    const int rank = [] {
      int r = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &r);
      return r;
    }();
    const int last = WorldSize() - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == last) {
      StopFor(3.0);
    } else {
      usleep(300000);  // the last rank has stopped by now
      EXPECT_EQ(probe.Unanswered(1.0), std::vector<int>{last});
    }
    AnsweringBarrier(probe);
    // The questions it missed are answered late, and those late answers
    // count for nothing now: every rank is there again.
    EXPECT_EQ(probe.Unanswered(30.0), std::vector<int>{});
    AnsweringBarrier(probe);
  }
  MPI_Comm_free(&local);
}

TEST(PeerProbe, DescribesRanksByNode) {
  if (WorldSize() < 4) GTEST_SKIP() << "needs four ranks";
  MPI_Comm local = PairsAsNodes();
  {
    internal::PeerProbe probe(MPI_COMM_WORLD, local);
    EXPECT_EQ(probe.Describe({2, 3}), "ranks 2, 3 (node 1)");
    EXPECT_EQ(probe.Describe({1, 2, 3}),
              "rank 1 (node 0); ranks 2, 3 (node 1)");
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Comm_free(&local);
}

// Run by itself (tests/CMakeLists.txt): the job must end. The last rank
// stops (SIGSTOP, never resumed) while its cycle thread is inside a large
// allreduce, so the others are blocked inside MPI for it. Their watchdog
// must name it and end the job with MPI_Abort.
TEST(StoppedRank, DISABLED_InsideACollectiveTheOthersNameItAndEndTheJob) {
  ASSERT_GE(WorldSize(), 2) << "needs two ranks";
  RuntimeConfig config = ParseConfig(
      testing_util::MapEnv({{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "2"}}));
  Services services = DefaultServices(config);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool last = rank == WorldSize() - 1;
  services.report_backend_wait = [rank, last](double waited, int unreachable) {
    // The watchdog's thread: stopping here stops the whole process, with
    // its cycle thread inside the collective.
    if (last && waited > 0) raise(SIGSTOP);
    if (unreachable > 0) {
      std::fprintf(stderr,
                   "[rank %d] reported: waited %.1f s, %d unreachable\n", rank,
                   waited, unreachable);
    }
  };
  Runtime rt(std::move(config), std::move(services));
  // 128 MiB: long enough for the watchdog's 0.25 s turn to find it running.
  const std::int64_t n = 32 << 20;
  std::vector<float> in(static_cast<std::size_t>(n), 1.0f),
      out(static_cast<std::size_t>(n), 0.0f);
  const std::int64_t shape[] = {n};
  for (int i = 0; i < 100; ++i) {
    const Status s = rt.Allreduce("stopped.inside", in.data(), out.data(),
                                  shape, DataType::kFloat32, ReduceOp::kSum)
                         .Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  FAIL() << "the last rank was never found inside a collective";
}

}  // namespace
}  // namespace hvdtune
