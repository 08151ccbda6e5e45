// Writes to a Store from a thread of its own, behind a bounded queue: the
// caller (the runtime's cycle thread) never waits for SQLite. On overflow
// a write is dropped and counted; the first failure of a write is reported
// once through `warn` and later writes still try.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "hvdtune/store/store.h"

namespace hvdtune::store {

class Writer {
 public:
  using Op = std::function<void(Store&)>;
  using Warn = std::function<void(const std::string&)>;

  Writer(std::unique_ptr<Store> store, std::size_t capacity, Warn warn);
  /// Finish() with its default timeout.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  /// Never blocks on SQLite: false (and counted) when the queue is full or
  /// the writer finished.
  bool Push(Op op);
  /// Runs what is queued, then stops the thread. Writes still queued after
  /// `timeout_seconds` are dropped and counted.
  void Finish(double timeout_seconds = 10);

  std::uint64_t dropped() const;
  std::uint64_t failed() const;
  std::uint64_t written() const;

 private:
  void Loop();

  std::unique_ptr<Store> store_;
  std::size_t capacity_;
  Warn warn_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stop_ = false;
  bool abandon_ = false;
  std::uint64_t dropped_ = 0, failed_ = 0, written_ = 0;
  std::thread thread_;
};

}  // namespace hvdtune::store
