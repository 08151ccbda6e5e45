#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "hvdtune/status.h"

namespace hvdtune::internal {

/// How an application thread tells the cycle thread that it has stopped
/// submitting for now (it waits for, or polls, a result): a cycle that is
/// gathering a burst of submissions can start. The runtime's; its handles
/// point to it and use it only while unfinished (HandleState::AboutToWait),
/// and the runtime finishes every handle before it goes away.
struct WaitSignal {
  /// Counts waits and polls on unfinished handles.
  std::atomic<std::uint64_t> waits{0};
  /// The cycle thread sleeps on `cv` while this is set.
  std::atomic<bool> gathering{false};
  std::mutex mu;
  std::condition_variable cv;

  void Notify() {
    waits.fetch_add(1);
    if (gathering.load()) {
      std::lock_guard<std::mutex> lock(mu);
      cv.notify_one();
    }
  }
};

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
  /// The runtime's where it gathers bursts (RuntimeImpl::GatherArrivals);
  /// null elsewhere, and for handles that never entered a queue.
  WaitSignal* signal = nullptr;

  /// Before blocking on the handle: tells the runtime, if unfinished.
  void AboutToWait() {
    if (!signal) return;
    std::lock_guard<std::mutex> lock(mu);
    NotifyIfUnfinishedLocked();
  }
  /// The same with `mu` held (polling).
  void NotifyIfUnfinishedLocked() {
    if (!done && signal) signal->Notify();
  }

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
