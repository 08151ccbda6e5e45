// A worker thread that runs one call each time it is handed one: the floor
// of a runtime that runs collectives on a background thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace hvdtune::bench {

/// The worker sleeps on a condition variable until Call() hands it the
/// work, and the caller sleeps until the worker is done: two wake-ups across
/// threads per call and nothing else.
class ThreadHandoff {
 public:
  explicit ThreadHandoff(std::function<void()> work)
      : work_(std::move(work)), worker_([this] { Serve(); }) {}
  ~ThreadHandoff() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  ThreadHandoff(const ThreadHandoff&) = delete;
  ThreadHandoff& operator=(const ThreadHandoff&) = delete;

  /// Runs the work once on the worker and returns when it has finished.
  void Call() {
    std::unique_lock<std::mutex> lock(mu_);
    const std::uint64_t mine = ++asked_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_ >= mine; });
  }

 private:
  void Serve() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || asked_ > done_; });
      if (stop_) return;
      lock.unlock();
      work_();
      lock.lock();
      ++done_;
      cv_.notify_all();
    }
  }

  std::function<void()> work_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t asked_ = 0;
  std::uint64_t done_ = 0;
  bool stop_ = false;
  std::thread worker_;  // last: starts once the rest is initialised
};

}  // namespace hvdtune::bench
