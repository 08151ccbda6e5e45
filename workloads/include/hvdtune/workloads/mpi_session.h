// MPI set up around a program that trains a workload (the benchmarks,
// `hvd-tune sweep`), and the clock and statistics they read it with.
#pragma once

#include <string_view>
#include <vector>

#include "hvdtune/runtime.h"

namespace hvdtune::workloads {

/// MPI_Init_thread(MPI_THREAD_MULTIPLE) on construction, MPI_Finalize on
/// destruction. Throws when the library cannot give MPI_THREAD_MULTIPLE.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

/// Wall-clock seconds (steady clock).
double NowSeconds();
/// Waits for `handle`; throws std::runtime_error naming `what` if it failed.
void WaitOk(const Handle& handle, std::string_view what);
/// Median; the mean of the two middle values for an even count. 0 if empty.
double Median(std::vector<double> values);

}  // namespace hvdtune::workloads
