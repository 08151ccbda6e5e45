// Writes to a Store from a thread of its own, behind a bounded queue: the
// caller (the runtime's cycle thread) never waits for the store. On
// overflow a write is dropped and counted; the first failure of a write is
// reported once through `warn` and later writes still try.
//
// A server that goes away (StoreUnavailable) loses no write by itself: the
// write goes back to the head of the queue, the outage is reported once,
// and the thread opens the store again with exponential backoff; writes
// queued meanwhile are written once it is back, or dropped and counted when
// the queue is full or Finish() gives up.
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

/// Counts writes as they end: result "written", "dropped" or "failed".
/// Called from the writer thread, and from Push() for a full queue.
using WriteCount = std::function<void(const char* result, std::uint64_t n)>;

struct WriterOptions {
  /// Opens the store again after StoreUnavailable (throws while it
  /// cannot). Empty: no reconnection, an unavailable store fails writes
  /// like any other error.
  std::function<std::unique_ptr<Store>()> open;
  double first_delay_seconds = 0.1;
  double max_delay_seconds = 5;
  /// The outage has been reported already (the store could not be opened
  /// at start and the writer starts without one).
  bool outage_reported = false;
  /// Told (not warned) when the store is back.
  std::function<void(const std::string&)> notice;
  WriteCount count;
};

class Writer {
 public:
  using Op = std::function<void(Store&)>;
  using Warn = std::function<void(const std::string&)>;

  using Options = WriterOptions;

  /// `store` may be null when `options.open` is set: the writer opens it.
  Writer(std::unique_ptr<Store> store, std::size_t capacity, Warn warn,
         Options options = {});
  /// Finish() with its default timeout.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  /// Never blocks on the store: false (and counted) when the queue is full or
  /// the writer finished.
  bool Push(Op op);
  /// Runs what is queued, then stops the thread. Writes still queued after
  /// `timeout_seconds` are dropped and counted.
  void Finish(double timeout_seconds = 10);

  std::uint64_t dropped() const;
  std::uint64_t failed() const;
  std::uint64_t written() const;
  /// Times the store was opened again after an outage.
  std::uint64_t reconnects() const;

 private:
  void Loop();
  // With mu_ held (released while opening): tries to open the store.
  void TryReopen(std::unique_lock<std::mutex>& lock);

  std::unique_ptr<Store> store_;
  std::size_t capacity_;
  Warn warn_;
  Options reconnect_;
  void Counted(const char* result, std::uint64_t n);
  double delay_ = 0;
  bool outage_reported_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;
  bool stop_ = false;
  bool abandon_ = false;
  std::uint64_t dropped_ = 0, failed_ = 0, written_ = 0, reconnects_ = 0;
  std::thread thread_;
};

}  // namespace hvdtune::store
