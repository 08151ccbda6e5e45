#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
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
    if (Finish(std::move(s))) cv.notify_all();
  }
  /// Complete() without waking the waiters: true when the handle is done
  /// now, and then the caller notifies `cv` (after finishing a batch, so
  /// that a thread waiting on one handle after another finds the rest done
  /// instead of sleeping and waking once per handle).
  bool Finish(Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return false;
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
    if (--parts_left > 0) return false;
    status = first_error;
    done = true;
    return true;
  }
};

/// Handle states without a heap allocation per collective: the block of
/// each state (shared_ptr's control block and the state together) goes back
/// to a free list when its last owner lets go, on whatever thread, and the
/// next Make() takes it from there. Handles may outlive the runtime; the
/// blocks are freed when the pool and every handle of it are gone.
class HandleStatePool {
 public:
  HandleStatePool() : blocks_(std::make_shared<Blocks>()) {}
  std::shared_ptr<HandleState> Make() const {
    return std::allocate_shared<HandleState>(Allocator<HandleState>(blocks_));
  }

 private:
  class Blocks {
   public:
    ~Blocks() {
      for (void* p : free_) ::operator delete(p);
    }
    void* Get(std::size_t bytes) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (bytes == size_ && !free_.empty()) {
          void* p = free_.back();
          free_.pop_back();
          return p;
        }
        if (size_ == 0) size_ = bytes;
      }
      return ::operator new(bytes);
    }
    void Put(void* p, std::size_t bytes) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (bytes == size_) {
          free_.push_back(p);
          return;
        }
      }
      ::operator delete(p);
    }

   private:
    std::mutex mu_;
    std::size_t size_ = 0;  // the one block size pooled
    std::vector<void*> free_;
  };
  template <typename T>
  struct Allocator {
    using value_type = T;
    std::shared_ptr<Blocks> blocks;
    explicit Allocator(std::shared_ptr<Blocks> b) : blocks(std::move(b)) {}
    template <typename U>
    Allocator(const Allocator<U>& o) : blocks(o.blocks) {}  // NOLINT
    T* allocate(std::size_t n) {
      static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
      return static_cast<T*>(blocks->Get(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) { blocks->Put(p, n * sizeof(T)); }
    template <typename U>
    bool operator==(const Allocator<U>& o) const {
      return blocks == o.blocks;
    }
  };
  std::shared_ptr<Blocks> blocks_;
};

}  // namespace hvdtune::internal
