// GoogleTest main for the multi-rank suites: every rank runs the same tests
// in the same order; rank 0 prints the usual report, other ranks print only
// their failures (prefixed with the rank).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "mpi_test_util.h"

namespace {

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
    }
  }

 private:
  int rank_;
};

}  // namespace

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

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int rc = RUN_ALL_TESTS();
  hvdtune::testing_util::ShutdownSharedRuntime();
  // A failure on any rank fails the run on every rank.
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
