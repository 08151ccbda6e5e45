#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "hvdtune/status.h"

namespace hvdtune::internal {

/// Completion state shared by a Handle and the cycle thread.
struct HandleState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status = Status::InProgress();
  std::vector<std::uint8_t> output;
  std::vector<std::int64_t> output_shape;
  /// Tensors still to finish (a grouped allreduce shares one state).
  int parts_left = 1;
  Status first_error;

  /// Records one tensor's result; the handle is done after the last one,
  /// with the first failure (if any) as its status.
  void Complete(Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (done) return;
      if (!s.ok() && first_error.ok()) first_error = std::move(s);
      if (--parts_left > 0) return;
      status = first_error;
      done = true;
    }
    cv.notify_all();
  }
};

}  // namespace hvdtune::internal
