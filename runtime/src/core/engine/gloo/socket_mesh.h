// The Gloo engine's own TCP connections among the ranks of one group, for
// the bulk data of the hierarchical allreduce's phase across nodes
// (mesh_allreduce.h).
//
// Gloo's TCP transport reads every socket on an event-loop thread of its
// own. A thread writing a large message holds that pair's lock; the loop
// thread, finding the lock taken, leaves the event pending and calls
// epoll_wait again at once, so it spins for as long as the write lasts
// (docs/benchmarks.md measured 98.7% of its calls failing that way). On
// ranks that share their cores that spinning is time taken from the ranks
// themselves. These connections have no thread: the rank that waits for
// them polls them itself, and sleeps in poll while nothing can move.
//
// The connections are made once, collectively, over a connected Gloo
// context of the same ranks: every rank listens on the address its Gloo
// device listens on (so on the interface HOROVOD_GLOO_IFACE names), the
// addresses travel by an allgather on that context, each rank connects to
// the ranks above it and accepts the ranks below it, and every connection
// starts with the connecting rank's number. Every wait is bounded.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <memory>
#include <vector>

namespace hvdtune::internal {

class SocketMesh {
 public:
  /// Connects every pair of ranks of `ctx` (collective over its ranks; `ctx`
  /// must run on Gloo's TCP transport). Throws std::runtime_error naming the
  /// step and the peer when a connection cannot be made within `timeout`.
  SocketMesh(const std::shared_ptr<gloo::Context>& ctx,
             std::chrono::milliseconds timeout);
  ~SocketMesh();
  SocketMesh(const SocketMesh&) = delete;
  SocketMesh& operator=(const SocketMesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The non-blocking socket to `peer` (-1 for this rank).
  int fd(int peer) const { return fds_[static_cast<std::size_t>(peer)]; }

 private:
  int rank_;
  int size_;
  std::vector<int> fds_;
};

}  // namespace hvdtune::internal
