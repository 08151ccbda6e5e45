// A shared-memory segment among the ranks of one node of the Gloo engine,
// for the hierarchical allreduce's node-local phases (gloo_hierarchical.h):
// the ranks of a node would otherwise exchange their bytes through TCP
// sockets on the loopback, one kernel copy at each end and two thread
// wake-ups per message.
//
// Lifetime: the node's first rank creates a POSIX shared-memory object with
// a name of its own (process id, a count, a random nonce: no two worlds or
// generations share one), the others map it, and the creator unlinks the
// name as soon as every rank of the world has tried to map it (success or
// not), so a crash afterwards leaks nothing: the memory goes with the last
// mapping.
//
// Waits: each rank publishes monotonic counters in its own slot of the
// header; a waiter spins briefly, then sleeps on a futex in the header in
// slices, checking between slices whether a rank of the node flagged a
// failure, whether the process it waits for is gone, and the engine's
// timeout. Nothing waits unbounded.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hvdtune/status.h"

namespace hvdtune::internal {

class GlooGroups;

/// The per-rank counters a rank publishes (index into its slot).
enum class ShmCounter : int {
  kArrived = 0,   ///< pieces whose input this rank copied in
  kRead = 1,      ///< pieces whose inputs this rank finished reading
  kReduced = 2,   ///< pieces whose shard this rank wrote reduced in full
  kConsumed = 3,  ///< pieces this rank copied out of the result buffer
};
inline constexpr int kShmCounters = 4;

class NodeShm {
 public:
  /// Collective over the whole world of `groups` (every rank calls it, in
  /// the same order as its other collectives): maps a segment of
  /// `data_bytes` per node where every node has the same number of ranks,
  /// more than one, and every rank of every node could map its node's
  /// segment; otherwise *shm is left null on every rank (the caller falls
  /// back). An error Status when a collective of the set-up failed.
  static Status Open(const GlooGroups& groups, std::size_t data_bytes,
                     std::unique_ptr<NodeShm>* shm);
  ~NodeShm();
  NodeShm(const NodeShm&) = delete;
  NodeShm& operator=(const NodeShm&) = delete;

  /// The data area (data_bytes, 64-byte aligned), the same on every rank of
  /// the node.
  std::uint8_t* data() const { return data_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  /// Sets this rank's counter (release) and wakes the node's waiters.
  void Publish(ShmCounter counter, std::uint64_t value);
  /// Waits until every rank of the node has `counter` >= `value`; an error
  /// naming the rank when one flagged a failure, died or the engine's
  /// timeout passed (`what` names the step in the message).
  Status WaitAll(ShmCounter counter, std::uint64_t value, const char* what);
  /// Tells the node's other ranks this rank failed (they stop waiting).
  void FlagFailure();

  /// The segment's header (shared; laid out by the .cc).
  struct Header;

 private:
  NodeShm(const GlooGroups& groups, void* base, std::size_t bytes,
          int local_rank, int local_size);
  bool Satisfied(ShmCounter counter, std::uint64_t value, int* laggard) const;
  std::string DescribeLocal(int local_rank) const;

  const GlooGroups& groups_;
  void* base_;
  std::size_t bytes_;
  Header* header_;
  std::uint8_t* data_;
  int local_rank_;
  int local_size_;
};

}  // namespace hvdtune::internal
