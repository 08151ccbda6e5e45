#include "hvdtune/workloads/mpi_session.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "hvdtune/mpi.h"

namespace hvdtune::workloads {

MpiSession::MpiSession(int* argc, char*** argv) {
  // The MPI settings the runtime uses when it initialises MPI itself, so
  // that raw MPI and hvdtune rows run under the same ones.
  hvdtune::PrepareMpiInit();
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw std::runtime_error(
        "the MPI library does not provide MPI_THREAD_MULTIPLE");
  }
}

MpiSession::~MpiSession() { MPI_Finalize(); }

double NowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void WaitOk(const Handle& handle, std::string_view what) {
  const Status status = handle.Wait();
  if (!status.ok()) {
    throw std::runtime_error(std::string(what) + ": " + status.ToString());
  }
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  if (values.size() % 2 == 1) return values[mid];
  return 0.5 * (values[mid - 1] + values[mid]);
}

}  // namespace hvdtune::workloads
