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

  void Complete(Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      status = std::move(s);
      done = true;
    }
    cv.notify_all();
  }
};

}  // namespace hvdtune::internal
