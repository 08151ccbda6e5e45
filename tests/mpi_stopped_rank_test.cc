// A rank that stops calling into hvdtune while the others wait for it in the
// negotiation: a process stopped with SIGSTOP (as a debugger or a job
// scheduler's suspend does). The others warn every
// HOROVOD_STALL_CHECK_TIME_SECONDS while they wait and, past
// HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, fail their handles with STALLED
// instead of waiting forever. Needs two ranks or more.
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hvdtune/runtime.h"
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
  // Every rank fails: the waiting ones after about a second, rank 1 once it
  // resumes and finds the others gone from the negotiation.
  ASSERT_EQ(s.code(), StatusCode::kStalled) << s.ToString();
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

}  // namespace
}  // namespace hvdtune
