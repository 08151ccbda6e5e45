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
#include "hvdtune/events.h"
#include "message.h"
#include "response_cache.h"

namespace hvdtune::internal {

/// HOROVOD_STALL_CHECK_TIME_SECONDS / HOROVOD_STALL_SHUTDOWN_TIME_SECONDS
/// (0 = off).
struct StallSettings {
  double check_seconds = 0;
  double shutdown_seconds = 0;
};

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
  /// Rank 0: adds requests to the table; returns responses for tensors
  /// now requested by every rank, in the order they were first requested.
  std::vector<Response> Coordinate(std::vector<Request> requests, double now);
  Response BuildResponse(const std::vector<Request>& requests) const;
  /// Holds members of a grouped allreduce back until the whole group is
  /// ready everywhere, then releases them together (consecutively, so they
  /// fuse); a failed member fails the whole group.
  std::vector<Response> ReleaseGroups(std::vector<Response> ready);
  Status Broadcast(std::vector<std::uint8_t>* bytes);
  /// Cached tensors that waited past the stall threshold, to invalidate so
  /// they are renegotiated in full (where rank 0 sees who is missing).
  void InvalidateStalledHits(double now);
  /// Rank 0: warnings for stalled table entries; with a shutdown time, the
  /// error responses that end them.
  void CheckStalls(double now, std::vector<StallEvent>* stalls,
                   std::vector<Response>* failed);
  /// Rank 0: some table entry is past the shutdown time.
  bool StallShutdownDue(double now) const;

  const MpiContext& mpi_;
  ResponseCache cache_;
  StallSettings stall_;
  double (*clock_)();
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

  struct GroupState {
    int arrived = 0;
    std::vector<Response> members;
    std::string error;
  };
  std::unordered_map<std::string, GroupState> groups_;

  // Rank 0 only: requests received so far per tensor.
  struct TableEntry {
    std::vector<Request> by_rank;
    int received = 0;
    /// Rank 0's clock when the first rank's wait began.
    double since = 0;
    /// When the stall warning was last given (0 = never).
    double warned = 0;
  };
  std::unordered_map<std::string, TableEntry> table_;
  std::vector<std::string> table_order_;
};

}  // namespace hvdtune::internal
