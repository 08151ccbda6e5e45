// Negotiation: every cycle the ranks agree which named tensors are ready on
// all of them, in one order, and check that they agree on what each tensor
// is. Tensors seen before are agreed on through the response cache with one
// bit each (a single MPI_Allreduce of a bit vector per cycle); new ones go
// to rank 0, which answers once every rank has asked.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/mpi/mpi_context.h"
#include "coordinator.h"
#include "hvdtune/events.h"
#include "message.h"
#include "response_cache.h"

namespace hvdtune::internal {

class Controller {
 public:
  /// `clock` returns seconds (the runtime clock; tests inject their own).
  Controller(const MpiContext& mpi, std::size_t cache_capacity,
             StallSettings stall = {}, double (*clock)() = nullptr);

  struct CycleResult {
    /// Tensors to run (or fail) now, in the same order on every rank.
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

  /// One negotiation round. `requests` are this rank's tensors enqueued
  /// since the last cycle; `knob_update` is only looked at on rank 0.
  CycleResult RunCycle(std::vector<Request> requests, bool shutdown,
                       const std::vector<std::uint8_t>* knob_update);

  /// Changes the cache capacity (at a cycle boundary, on every rank): the
  /// cache is emptied and tensors waiting on a cache bit are renegotiated.
  void ResizeCache(std::size_t capacity);

  std::size_t cache_size() const { return cache_.size(); }
  /// Tensors this rank enqueued that are not yet ready everywhere.
  std::size_t pending() const { return pending_.size(); }

 private:
  void Reroute(std::uint32_t bit);
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
  /// Response errors produced by the stall check, sent at the next
  /// negotiation (rank 0).
  std::vector<Response> stalled_;
  /// This rank's tensors not yet ready everywhere, by name.
  std::unordered_map<std::string, Request> pending_;
  /// Tensors waiting on a cache bit: bit -> name.
  std::map<std::uint32_t, std::string> hit_pending_;
  /// Requests to send to rank 0 at the next negotiation.
  std::vector<Request> to_send_;
  std::vector<std::uint32_t> invalid_;
  std::vector<std::uint64_t> bits_;

  GroupRelease groups_;
  /// Rank 0's table of requests.
  Coordinator coordinator_;
};

}  // namespace hvdtune::internal
