#pragma once

#include <atomic>
#include <chrono>
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
/// gathering a burst of submissions can start. The runtime's handle pool's,
/// so that it lives as long as any handle that points to it: a thread may
/// poll a handle while another finishes it and shuts the runtime down.
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

/// Where threads wait for handles to finish: one for all the handles of a
/// runtime (its pool's), so that a handle state needs no condition variable
/// of its own to set up and tear down. A thread that blocks marks its
/// handle `waited` first; a batch of completions wakes the sleepers once,
/// and only if it finished a handle somebody waits on (a wake-up for any
/// other would take a core from the application for nothing).
///
/// No lost wake-up: the waiter stores `waited` and then reads `done`; the
/// finisher stores `done` and then reads `waited` (all sequentially
/// consistent), so at least one of them sees the other's store. If the
/// finisher does, it wakes the sleepers after taking `mu`, which the waiter
/// holds from its read of `done` until it sleeps.
struct CompletionSignal {
  std::mutex mu;
  std::condition_variable cv;

  /// Wakes every sleeping waiter (each checks its own handle).
  void NotifyAll() {
    { std::lock_guard<std::mutex> lock(mu); }
    cv.notify_all();
  }
  /// Blocks until `done` is set.
  void Wait(std::atomic<bool>& waited, const std::atomic<bool>& done) {
    std::unique_lock<std::mutex> lock(mu);
    waited.store(true);
    cv.wait(lock, [&] { return done.load(); });
  }
  /// Blocks until `done` is set or `deadline` passes; true if done.
  bool WaitUntil(std::atomic<bool>& waited, const std::atomic<bool>& done,
                 std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu);
    waited.store(true);
    return cv.wait_until(lock, deadline, [&] { return done.load(); });
  }
  /// For handle states made outside a runtime (finished when made).
  static CompletionSignal& Shared() {
    static CompletionSignal signal;
    return signal;
  }
};

/// Completion state shared by a Handle and the cycle thread.
struct HandleState {
  /// Set after everything a waiter reads (the status and an allgather's
  /// output), and read before any of it.
  std::atomic<bool> done{false};
  /// Set by a thread about to sleep on this handle (see CompletionSignal).
  std::atomic<bool> waited{false};
  Status status = Status::InProgress();
  /// What a collective returns besides its status, per member of the
  /// submission (allgather, reducescatter, alltoall); empty for the others.
  struct Output {
    std::vector<std::uint8_t> bytes;
    std::vector<std::int64_t> shape;
    /// Alltoall: the rows received from each rank.
    std::vector<std::int64_t> received_splits;
  };
  std::vector<Output> outputs;
  /// Join: the rank that joined last.
  std::int32_t last_joined_rank = -1;
  /// Tensors still to finish (a grouped allreduce shares one state).
  int parts_left = 1;
  Status first_error;
  /// The runtime's where it gathers bursts (RuntimeImpl::GatherArrivals);
  /// null elsewhere, and for handles that never entered a queue.
  WaitSignal* signal = nullptr;
  /// The runtime's handle pool's; null for states made outside one.
  CompletionSignal* completion = nullptr;

  CompletionSignal& completion_signal() const {
    return completion ? *completion : CompletionSignal::Shared();
  }

  /// Before blocking on, or when polling, the handle: tells the runtime, if
  /// unfinished.
  void NotifyWaiting() {
    if (signal && !done.load(std::memory_order_acquire)) signal->Notify();
  }

  /// Records one tensor's result; the handle is done after the last one,
  /// with the first failure (if any) as its status.
  void Complete(Status s) {
    if (Finish(std::move(s))) completion_signal().NotifyAll();
  }
  /// Complete() without waking the waiters: true when the handle is done
  /// now and a thread sleeps on it, and then the caller notifies its
  /// CompletionSignal (after finishing a batch, so that a thread waiting on
  /// one handle after another finds the rest done instead of sleeping and
  /// waking once per handle).
  ///
  /// Takes no lock: one thread at a time finishes a state (the cycle
  /// thread, or the submitting thread before the handle is returned), and
  /// no other thread reads `status`, `parts_left` or `first_error` before
  /// `done` is set. What else a waiter or poller touches (`signal`,
  /// `completion`) lives in the pool, as long as the handle.
  bool Finish(Status s) {
    if (done.load(std::memory_order_relaxed)) return false;
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
    if (--parts_left > 0) return false;
    status = first_error;
    done.store(true);  // sequentially consistent: see CompletionSignal
    return waited.load();
  }
};

/// Handle states without a heap allocation per collective: the block of
/// each state (shared_ptr's control block and the state together) goes back
/// to a free list when its last owner lets go, on whatever thread, and the
/// next Make() takes it from there. Handles may outlive the runtime; the
/// blocks are freed when the pool and every handle of it are gone.
class HandleStatePool {
 public:
  HandleStatePool() : blocks_(new Blocks) {}
  ~HandleStatePool() { blocks_->Release(); }
  HandleStatePool(const HandleStatePool&) = delete;
  HandleStatePool& operator=(const HandleStatePool&) = delete;

  std::shared_ptr<HandleState> Make() const {
    std::shared_ptr<HandleState> state =
        std::allocate_shared<HandleState>(Allocator<HandleState>(blocks_));
    state->completion = &blocks_->completion;
    return state;
  }
  /// Where the pool's handles are waited for: lives as long as any of them.
  CompletionSignal& completion() const { return blocks_->completion; }
  /// How waits on the pool's handles reach the runtime: the same lifetime.
  WaitSignal& arrivals() const { return blocks_->arrivals; }

 private:
  // Counts its owners itself (the pool, and each block handed out), so
  // that an allocator is a plain pointer: copying one, which
  // allocate_shared does several times per state, touches no shared count.
  class Blocks {
   public:
    /// Touched by the cycle thread once per batch of completions; kept off
    /// the cache lines the submitting thread writes per handle.
    alignas(64) CompletionSignal completion;
    /// The runtime's (see WaitSignal); written by waiting and polling
    /// threads.
    alignas(64) WaitSignal arrivals;

    void* Get(std::size_t bytes) {
      refs_.fetch_add(1, std::memory_order_relaxed);
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
      bool pooled = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (bytes == size_) {
          free_.push_back(p);
          pooled = true;
        }
      }
      if (!pooled) ::operator delete(p);
      Release();
    }
    /// Drops one owner; the last one frees the blocks.
    void Release() {
      if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

   private:
    ~Blocks() {
      for (void* p : free_) ::operator delete(p);
    }

    alignas(64) std::mutex mu_;
    std::atomic<std::size_t> refs_{1};  // the pool's
    std::size_t size_ = 0;              // the one block size pooled
    std::vector<void*> free_;
  };
  template <typename T>
  struct Allocator {
    using value_type = T;
    Blocks* blocks;
    explicit Allocator(Blocks* b) : blocks(b) {}
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
  Blocks* blocks_;
};

}  // namespace hvdtune::internal
