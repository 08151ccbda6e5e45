// GoogleTest main for the multi-rank suites: every rank runs the same tests
// in the same order; rank 0 prints the usual report, the other ranks print
// only their failures (see mpi_harness.h: a failure on any rank, an uncaught
// exception, a crash or a test running too long ends the whole job).
//
// --hvdtune_source=FILE runs only the suites defined in source file FILE
// (how CTest gives each suite file its own entry).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "mpi_harness.h"
#include "mpi_test_util.h"

namespace hvdtune::testing_util {
namespace {
std::unique_ptr<Runtime>& SharedSlot() {
  static std::unique_ptr<Runtime> runtime;
  return runtime;
}
}  // namespace

Runtime& SharedRuntime() {
  auto& slot = SharedSlot();
  if (!slot) slot = std::make_unique<Runtime>(RuntimeOptions{});
  return *slot;
}

void ShutdownSharedRuntime() { SharedSlot().reset(); }
}  // namespace hvdtune::testing_util

namespace {

// Settles the command line left after MPI's and GoogleTest's flags; returns
// an error message or "".
std::string ApplyOwnFlags(int argc, char** argv) {
  constexpr std::string_view kSource = "--hvdtune_source=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(kSource)) {
      const std::string error = hvdtune::testing_util::SelectTestsFromSource(
          arg.substr(kSource.size()));
      if (!error.empty()) return error;
    } else {
      return "unknown argument " + std::string(arg) +
             " (GoogleTest flags, or --hvdtune_source=FILE)";
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  namespace tu = hvdtune::testing_util;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  testing::InitGoogleTest(&argc, argv);
  const int rank = tu::WorldRank();
  tu::HarnessSettings settings;
  std::string error;
  try {
    settings = tu::ParseHarnessSettings();
    error = ApplyOwnFlags(argc, argv);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) {
    // Every rank has the same command line and environment: one copy.
    if (rank == 0) std::fprintf(stderr, "%s: %s\n", argv[0], error.c_str());
    MPI_Finalize();
    return 2;
  }
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int worst = 0;
  {
    tu::MpiHarness harness(rank, settings);
    const int rc = RUN_ALL_TESTS();
    harness.Enter("shutdown after the last test");
    tu::ShutdownSharedRuntime();
    // A failure on any rank fails the run on every rank.
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return worst;
}
