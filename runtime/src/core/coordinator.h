// Rank 0's side of negotiation, free of MPI (unit-tested without it): it
// collects every rank's request for each tensor, answers once all ranks
// asked (checking that they agree), and watches for tensors some ranks never
// submit. GroupRelease holds grouped allreduce members back until the whole
// group is ready. Both are deterministic functions of their inputs, so every
// rank that runs them on the same inputs agrees.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/message.h"
#include "hvdtune/events.h"

namespace hvdtune::internal {

/// HOROVOD_STALL_CHECK_TIME_SECONDS / HOROVOD_STALL_SHUTDOWN_TIME_SECONDS
/// (0 = off).
struct StallSettings {
  double check_seconds = 0;
  double shutdown_seconds = 0;
};

/// The wait after which a cached tensor is renegotiated in full so rank 0
/// can see who is missing: the earlier of the two stall times in use
/// (0 = no stall handling).
double StallThreshold(const StallSettings& s);

class Coordinator {
 public:
  Coordinator(int world_size, StallSettings stall = {});

  /// Adds requests (each names its rank); returns responses for tensors
  /// now requested by every rank, in the order they were first requested.
  /// `now` is rank 0's clock; a request's waited_seconds moves the start of
  /// its wait back. A join request marks its rank joined: a tensor is then
  /// ready once every rank that has not joined asked for it, and once every
  /// rank joined the join's response (root: the last rank to join) comes
  /// last.
  std::vector<Response> Add(std::vector<Request> requests, double now);

  /// Warnings for tensors waiting longer than the check time (again every
  /// check time), and, past the shutdown time, error responses that end
  /// them on the ranks that submitted them (the tensors leave the table),
  /// oldest first; a tensor that waits only for ranks that submitted one
  /// failing in the same call starts a new wait instead (they were blocked,
  /// not absent).
  void CheckStalls(double now, std::vector<StallEvent>* stalls,
                   std::vector<Response>* failed);

  /// Tensors some ranks asked for and others not yet.
  std::size_t waiting() const { return table_.size(); }

  /// The response for one request per rank: run, or an error naming the
  /// first disagreement with the first rank that asked. Ranks without a
  /// request (an empty name) have joined.
  Response BuildResponse(const std::vector<Request>& by_rank) const;

 private:
  struct TableEntry {
    std::vector<Request> by_rank;
    int received = 0;
    /// When the first rank's wait began (rank 0's clock).
    double since = 0;
    /// When the stall warning was last given (0 = never).
    double warned = 0;
  };
  int size_;
  StallSettings stall_;
  /// Ranks that joined, until every rank did.
  std::vector<bool> joined_;
  int joined_count_ = 0;
  int last_joined_ = -1;
  std::string join_name_;
  std::unordered_map<std::string, TableEntry> table_;
  std::vector<std::string> table_order_;
};

class GroupRelease {
 public:
  /// Holds members of a grouped allreduce back until the whole group is
  /// ready everywhere, then releases them together (consecutively, so they
  /// fuse); a failed member fails the whole group. Ungrouped responses pass
  /// through in order.
  /// Works on `ready` in place (the ungrouped list passes through).
  void Release(std::vector<Response>* ready);
  std::vector<Response> Release(std::vector<Response> ready) {
    Release(&ready);
    return ready;
  }

 private:
  struct GroupState {
    int arrived = 0;
    std::vector<Response> members;
    std::string error;
  };
  std::unordered_map<std::string, GroupState> groups_;
  std::vector<Response> out_;
};

}  // namespace hvdtune::internal
