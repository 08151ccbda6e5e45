// GoogleTest main for the multi-rank suites: every rank runs the same tests
// in the same order; rank 0 prints the usual report, the other ranks print
// only their failures (see mpi_harness.h: a failure on any rank, an uncaught
// exception, a crash or a test running too long ends the whole job).
//
// --hvdtune_source=FILE runs only the suites defined in source file FILE
// (how CTest gives each suite file its own entry).
//
// HVDTUNE_TEST_ENGINE=gloo runs the same suites on the Gloo engine: rank 0
// serves a rendezvous store and every rank sets the variables a Gloo
// launcher would (HOROVOD_GLOO=1, HOROVOD_RANK, ...) before any runtime is
// made; HVDTUNE_TEST_GLOO_IFACE names the interface of the Gloo traffic
// (lo; eth0 on the emulated cluster). MPI stays up for the harness and the
// tests' own checks; the runtimes never call it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "hvdtune/mpi.h"
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

// Rank 0's store for the Gloo variants (lives until exit).
std::unique_ptr<hvdtune::RendezvousServer> ServeGlooIfAsked() {
  const char* engine = std::getenv("HVDTUNE_TEST_ENGINE");
  if (engine == nullptr || std::string_view(engine) != "gloo") return nullptr;
  std::map<std::string, std::string> vars;
  const char* iface = std::getenv("HVDTUNE_TEST_GLOO_IFACE");
  auto server = hvdtune::ServeGlooBesideMpi(
      &vars, iface != nullptr && *iface != '\0' ? iface : "lo");
  for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  return server;
}

int main(int argc, char** argv) {
  namespace tu = hvdtune::testing_util;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const auto gloo_store = ServeGlooIfAsked();
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
