// Keeps a multi-rank GoogleTest run from hanging when one rank goes wrong.
//
// Every rank runs the same tests in the same order, so a rank that leaves a
// test early (a failed ASSERT, an exception) or never leaves it (a hang)
// strands the others in their next collective. The harness turns each of
// these into the end of the whole job, with the culprit named:
//
// - A failed assertion is printed at once to stderr, on every rank, as
//   "[rank R] file:line: Failure" followed by the message (each line
//   prefixed). At the end of the test every rank joins a short agreement
//   on a private communicator: a rank whose test failed waits at most
//   HVDTUNE_TEST_FAILURE_WAIT_SECONDS for the others to end the same test
//   (so that ranks failing together all get their messages out), then calls
//   MPI_Abort. Ranks that passed learn of the failure from the agreement and
//   leave the abort to the failing rank, so Open MPI's banner names it.
// - An uncaught exception outside a test body (another thread, start-up)
//   is printed with the test it happened in, then MPI_Abort. Exceptions in
//   test bodies are failures like any other (GoogleTest catches them).
// - A fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) is printed
//   with the test it happened in; the previous handler (Open MPI's
//   backtrace) then runs and the process dies, which ends the job.
// - A watchdog thread aborts the job when one test, or the start-up or the
//   shutdown, runs longer than HVDTUNE_TEST_TIMEOUT_SECONDS (default 120;
//   0 turns it off), naming the test and the rank.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <string_view>

namespace hvdtune::testing_util {

/// The harness's settings, from the environment.
struct HarnessSettings {
  /// HVDTUNE_TEST_TIMEOUT_SECONDS: the longest one test may run; 0 = no
  /// limit.
  double test_timeout_seconds = 120;
  /// HVDTUNE_TEST_FAILURE_WAIT_SECONDS: how long a rank whose test failed
  /// waits for the other ranks to end that test before aborting the job.
  double failure_wait_seconds = 3;
};

/// Reads the settings above; throws std::invalid_argument naming the
/// variable, its value and what is allowed.
HarnessSettings ParseHarnessSettings();

/// Installs the failure listener, the watchdog and the terminate and
/// signal handlers described above. Create it after MPI_Init and
/// InitGoogleTest, keep it for RUN_ALL_TESTS and the shutdown, and destroy
/// it before MPI_Finalize.
class MpiHarness {
 public:
  MpiHarness(int rank, const HarnessSettings& settings);
  ~MpiHarness();
  MpiHarness(const MpiHarness&) = delete;
  MpiHarness& operator=(const MpiHarness&) = delete;

  /// Names what this process does next outside any test (for the
  /// watchdog's and the crash handlers' messages) and restarts the
  /// watchdog's clock.
  void Enter(std::string what);

 private:
  class Watchdog;
  class Listener;
  std::unique_ptr<Watchdog> watchdog_;
  Listener* listener_;  // owned by GoogleTest's listener list
  std::terminate_handler previous_terminate_ = nullptr;
};

/// Restricts the run to the test suites defined in the source file `source`
/// (a file name such as "mpi_runtime_test.cc", compared with the file name
/// of each registered test). Returns an error message, or an empty string
/// on success. A suite with tests in that file and in another one is an
/// error: a suite belongs to one file.
std::string SelectTestsFromSource(std::string_view source);

}  // namespace hvdtune::testing_util
