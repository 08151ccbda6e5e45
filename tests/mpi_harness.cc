#include "mpi_harness.h"

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace hvdtune::testing_util {
namespace {

using Clock = std::chrono::steady_clock;

// The crash handlers cannot reach the harness object, so what they print
// lives here: the "[rank R] " prefix and what the process is doing. Written
// by the main thread between tests, read by a handler when things go wrong.
char g_prefix[32] = "[rank ?] ";
char g_doing[512] = "start-up";
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_previous[NSIG];

void SetDoing(const std::string& what) {
  std::snprintf(g_doing, sizeof g_doing, "%s", what.c_str());
}

// One write per message, so that lines of ranks failing together do not
// interleave mid-line in mpirun's output.
void PrintLines(const std::string& text) {
  std::string out;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    out += g_prefix;
    out.append(text, begin, end - begin);
    out += '\n';
    begin = end + 1;
  }
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

[[noreturn]] void AbortJob() {
  // Give mpirun a moment to forward what was just printed: the abort tears
  // down the output channels of every rank.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // not reached
}

double SecondsFromEnv(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(x >= 0) || x > 1e6) {
    throw std::invalid_argument(std::string(name) + "=" + v +
                                ": want a number of seconds from 0 to 1e6");
  }
  return x;
}

void WriteString(const char* s) {
  std::size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    default:
      return "a fatal signal";
  }
}

// Async-signal-safe: write(2) only, then the handler that was there before
// (Open MPI prints a backtrace), then the default action.
void OnFatalSignal(int sig, siginfo_t* info, void* context) {
  // One write(2) for the whole line: mpirun forwards each read of a rank's
  // stderr as it comes, so separate writes can be split by the rank's stdout.
  char line[640];
  std::size_t n = 0;
  for (const char* part :
       {static_cast<const char*>(g_prefix), "fatal signal ", SignalName(sig),
        " in ", static_cast<const char*>(g_doing)}) {
    for (; *part != '\0' && n + 2 < sizeof line; ++part) line[n++] = *part;
  }
  line[n++] = '\n';
  line[n] = '\0';
  WriteString(line);
  const struct sigaction& prev = g_previous[sig];
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, context);
  } else if ((prev.sa_flags & SA_SIGINFO) == 0 && prev.sa_handler != SIG_DFL &&
             prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  }
  // Returning re-raises a fault; a raised signal is pending until then.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void OnTerminate() {
  std::string what = "std::terminate called without an active exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = std::string("uncaught exception: ") + x.what();
    } catch (...) {
      what = "uncaught exception of a type not derived from std::exception";
    }
  }
  PrintLines(what + " in " + g_doing + "; aborting the job");
  AbortJob();
}

std::string FormatSeconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

std::string TestName(const testing::TestInfo& t) {
  return std::string(t.test_suite_name()) + "." + t.name();
}

}  // namespace

HarnessSettings ParseHarnessSettings() {
  HarnessSettings s;
  s.test_timeout_seconds =
      SecondsFromEnv("HVDTUNE_TEST_TIMEOUT_SECONDS", s.test_timeout_seconds);
  s.failure_wait_seconds = SecondsFromEnv("HVDTUNE_TEST_FAILURE_WAIT_SECONDS",
                                          s.failure_wait_seconds);
  return s;
}

// Aborts the job when what the process is doing takes too long. Armed for
// the whole run, re-armed at each test's start and end.
class MpiHarness::Watchdog {
 public:
  explicit Watchdog(double seconds) : seconds_(seconds) {
    if (seconds_ > 0) thread_ = std::thread([this] { Run(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void Arm(std::string what) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      what_ = std::move(what);
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(seconds_));
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (what_.empty()) {
        cv_.wait(lock);
      } else if (Clock::now() < deadline_) {
        cv_.wait_until(lock, deadline_);
      } else {
        const std::string what = what_;
        lock.unlock();
        const std::string limit = FormatSeconds(seconds_);
        PrintLines(what + " is still running after " + limit +
                   " s (HVDTUNE_TEST_TIMEOUT_SECONDS=" + limit +
                   "); aborting the job");
        AbortJob();
      }
    }
  }

  const double seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string what_;  // empty: not armed yet
  Clock::time_point deadline_;
  std::thread thread_;
};

class MpiHarness::Listener : public testing::EmptyTestEventListener {
 public:
  Listener(double failure_wait_seconds, Watchdog* watchdog)
      : failure_wait_seconds_(failure_wait_seconds), watchdog_(watchdog) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  }
  ~Listener() override { MPI_Comm_free(&comm_); }

  void OnTestStart(const testing::TestInfo& test) override {
    test_location_ =
        std::string(test.file()) + ":" + std::to_string(test.line());
    const std::string what = "test " + TestName(test);
    SetDoing(what);
    watchdog_->Arm(what);
  }

  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::string where;
    if (r.file_name() != nullptr) {
      where = r.file_name();
      if (r.line_number() >= 0) where += ":" + std::to_string(r.line_number());
    } else {
      // An exception escaped the test: point at the test itself.
      where = test_location_;
    }
    PrintLines(where + ": Failure\n" + r.message());
  }

  void OnTestEnd(const testing::TestInfo& test) override {
    const bool failed = test.result()->Failed();
    if (failed) {
      PrintLines(TestName(test) +
                 " failed here; aborting the job once every rank has ended "
                 "this test (at most " +
                 FormatSeconds(failure_wait_seconds_) + " s)");
    }
    if (AnyRankFailed(failed)) {
      // The ranks that failed abort; the others wait for it, so that the
      // abort names a failing rank. The watchdog stays armed meanwhile.
      if (failed) AbortJob();
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const std::string what = "the code after test " + TestName(test) +
                             " (suite tear-down, next set-up or shutdown)";
    SetDoing(what);
    watchdog_->Arm(what);
  }

 private:
  // Every rank takes part at the end of every test. A rank that passed waits
  // as long as it takes (a rank stuck in the test is the watchdog's); a rank
  // that failed waits at most failure_wait_seconds_, since the others may be
  // stuck waiting for it.
  bool AnyRankFailed(bool failed) {
    int mine = failed ? 1 : 0, any = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm_, &request);
    if (!failed) {
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      return any != 0;
    }
    const auto end = Clock::now() +
                     std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(failure_wait_seconds_));
    int done = 0;
    while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
           !done && Clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!done) {
      PrintLines("not every rank ended the test within " +
                 FormatSeconds(failure_wait_seconds_) +
                 " s (some may be waiting for this one)");
    }
    return true;
  }

  const double failure_wait_seconds_;
  Watchdog* const watchdog_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  // Where the running test is defined (the listener may not ask GoogleTest
  // from OnTestPartResult: it holds its own lock there).
  std::string test_location_ = "(outside any test)";
};

MpiHarness::MpiHarness(int rank, const HarnessSettings& settings)
    : watchdog_(std::make_unique<Watchdog>(settings.test_timeout_seconds)) {
  std::snprintf(g_prefix, sizeof g_prefix, "[rank %d] ", rank);
  Enter("start-up");
  listener_ = new Listener(settings.failure_wait_seconds, watchdog_.get());
  testing::UnitTest::GetInstance()->listeners().Append(listener_);
  previous_terminate_ = std::set_terminate(OnTerminate);
  for (int sig : kFatalSignals) {
    struct sigaction action = {};
    action.sa_sigaction = OnFatalSignal;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, &g_previous[sig]);
  }
}

MpiHarness::~MpiHarness() {
  std::set_terminate(previous_terminate_);
  for (int sig : kFatalSignals) sigaction(sig, &g_previous[sig], nullptr);
  delete testing::UnitTest::GetInstance()->listeners().Release(listener_);
  watchdog_.reset();
}

void MpiHarness::Enter(std::string what) {
  SetDoing(what);
  watchdog_->Arm(std::move(what));
}

std::string SelectTestsFromSource(std::string_view source) {
  if (std::string_view(GTEST_FLAG_GET(filter)) != "*") {
    return "--hvdtune_source selects the tests itself; drop --gtest_filter";
  }
  const auto from_source = [&](const char* file) {
    const std::string_view f = file != nullptr ? file : "";
    const std::size_t slash = f.find_last_of('/');
    return f.substr(slash == std::string_view::npos ? 0 : slash + 1) == source;
  };
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  std::string filter;
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const testing::TestSuite& suite = *unit.GetTestSuite(i);
    int here = 0;
    const char* elsewhere = nullptr;
    for (int j = 0; j < suite.total_test_count(); ++j) {
      const testing::TestInfo& t = *suite.GetTestInfo(j);
      if (from_source(t.file())) {
        ++here;
      } else {
        elsewhere = t.file();
      }
    }
    if (here == 0) continue;
    if (elsewhere != nullptr) {
      return "test suite " + std::string(suite.name()) + " has tests in " +
             std::string(source) + " and in " + elsewhere +
             "; give each file its own suite names";
    }
    if (!filter.empty()) filter += ':';
    filter += std::string(suite.name()) + ".*";
  }
  if (filter.empty()) return "no test comes from " + std::string(source);
  GTEST_FLAG_SET(filter, filter);
  return "";
}

}  // namespace hvdtune::testing_util
