// Negotiation: every cycle the ranks agree which named tensors are ready on
// all of them, in one order, and check that they agree on what each tensor
// is. Tensors seen before are agreed on through the response cache with one
// bit each (a single MPI_Allreduce of a bit vector per cycle); new ones go
// to rank 0, which answers once every rank has asked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backends/mpi/mpi_context.h"
#include "core/coordinator.h"
#include "core/message.h"
#include "core/response_cache.h"
#include "hvdtune/events.h"

namespace hvdtune::internal {

class Controller {
 public:
  /// `clock` returns seconds (the runtime clock; tests inject their own).
  Controller(const MpiContext& mpi, std::size_t cache_capacity,
             StallSettings stall = {}, double (*clock)() = nullptr);

  struct CycleResult {
    /// Tensors to run (or fail) now, in the same order on every rank; each
    /// carries this rank's tensor id. Responses of cached tensors come
    /// without their name (look it up by id).
    std::vector<Response> ready;
    /// Some rank asked to shut down.
    bool shutdown = false;
    /// Rank 0's knob update, identical bytes on every rank.
    std::optional<std::vector<std::uint8_t>> knob_update;
    /// Requests that went through the cache this cycle / were negotiated.
    std::size_t cache_hits = 0;
    std::size_t cache_misses = 0;
    /// A failure of the control traffic itself (the runtime must stop).
    Status status;
    /// Rank 0: tensors waiting for some ranks past the stall check time.
    std::vector<StallEvent> stalls;
  };

  /// One negotiation round, filling `result` (cleared first; pass the same
  /// object every cycle so its buffers are reused). `requests` are this
  /// rank's tensors enqueued since the last cycle, each with a local id
  /// (Request::id) not pending already; the controller keeps the pointers
  /// until it returns the tensor in `ready`, so they must stay valid and
  /// unchanged until then. `knob_update` is only looked at on rank 0.
  void RunCycle(const std::vector<const Request*>& requests, bool shutdown,
                const std::vector<std::uint8_t>* knob_update,
                CycleResult* result);

  /// Changes the cache capacity (at a cycle boundary, on every rank): the
  /// cache is emptied and tensors waiting on a cache bit are renegotiated.
  void ResizeCache(std::size_t capacity);

  std::size_t cache_size() const { return cache_.size(); }
  /// Tensors this rank enqueued that are not yet ready everywhere.
  std::size_t pending() const { return pending_count_; }
  /// A negotiation was given up past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS
  /// with its allreduce still posted: this controller's buffers (and the
  /// control communicator) must never be freed.
  bool abandoned() const { return abandoned_; }

 private:
  /// Sends a tensor waiting on a cache bit to full negotiation instead.
  void Reroute(std::uint32_t bit);
  /// Queues a pending tensor for full negotiation with rank 0.
  void SendInFull(TensorId id);
  void AddHit(std::uint32_t bit, TensorId id);
  /// Waits for a nonblocking collective of the negotiation (`rc`: what
  /// posting it returned). Past the stall shutdown time the collective is
  /// given up (left posted) with a Stalled status.
  Status Await(int rc, MPI_Request* req, const char* what);
  /// Asked while a negotiation collective waits: warns every stall check
  /// time (and records a StallEvent), false past the stall shutdown time.
  bool KeepWaiting(double waited);
  void ClearHits();
  Status Negotiate(std::vector<Response>* ready);
  Status Broadcast(std::vector<std::uint8_t>* bytes);
  /// Cached tensors that waited past the stall threshold, to invalidate so
  /// they are renegotiated in full (where rank 0 sees who is missing).
  void InvalidateStalledHits(double now);

  const MpiContext& mpi_;
  ResponseCache cache_;
  StallSettings stall_;
  double (*clock_)();
  double next_stall_scan_ = 0;
  int wait_warnings_ = 0;
  bool abandoned_ = false;
  /// This rank's join is pending: it raises the joined flag every round.
  bool joined_ = false;
  /// Some rank had joined at the last round: new tensors skip the cache
  /// (a joined rank sets no cache bits).
  bool join_active_ = false;
  /// The cycle's result, for stall events recorded while waiting.
  CycleResult* current_ = nullptr;
  // Buffers of the negotiation's collectives (members, so that one given
  // up while posted never writes to freed memory).
  std::int64_t bcast_len_ = 0;
  std::vector<std::uint8_t> bcast_buf_;
  int gather_len_ = 0;
  std::vector<std::uint8_t> gather_mine_;
  std::vector<int> gather_lens_;
  std::vector<int> gather_displs_;
  std::vector<std::uint8_t> gather_all_;
  /// Response errors produced by the stall check, sent at the next
  /// negotiation (rank 0).
  std::vector<Response> stalled_;
  /// This rank's tensors not yet ready everywhere, by id (null = not
  /// pending); the requests live in the runtime until they are returned.
  std::vector<const Request*> pending_;
  std::size_t pending_count_ = 0;
  /// Tensors waiting on a cache bit: bit -> id, and the bits as words.
  std::vector<TensorId> hit_id_;
  std::vector<std::uint64_t> hit_words_;
  std::size_t hit_count_ = 0;
  /// Tensors in full negotiation (sent, or to send), by name.
  std::unordered_map<std::string, TensorId> negotiating_;
  /// Requests to send to rank 0 at the next negotiation.
  std::vector<Request> to_send_;
  std::vector<std::uint32_t> invalid_;
  std::vector<std::uint64_t> bits_;
  std::vector<Response> responses_;

  GroupRelease groups_;
  /// Rank 0's table of requests.
  Coordinator coordinator_;
};

}  // namespace hvdtune::internal
