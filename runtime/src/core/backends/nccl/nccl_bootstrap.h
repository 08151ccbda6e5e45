// How the NCCL backend's ranks meet, whatever the engine: the groups it
// makes communicators for, agreement on every rank's outcome, and the
// broadcast that carries each communicator's unique id from the group's
// rank 0. The MPI engine's goes over its communicators; the Gloo engine's
// (core/engine/gloo/gloo_nccl_bootstrap.h) over its contexts and the
// rendezvous store. Needs no CUDA: built and tested everywhere.
#pragma once

#include <cstddef>
#include <memory>

#include "core/backends/mpi/mpi_context.h"
#include "hvdtune/status.h"

namespace hvdtune::internal {

class NcclBootstrap {
 public:
  /// The groups of an NCCL backend: all ranks, the ranks of this node, the
  /// ranks with this rank's local rank across nodes.
  enum class Group { kWorld, kLocal, kCross };
  /// This rank in a group.
  struct Place {
    int rank = 0;
    int size = 1;
  };

  virtual ~NcclBootstrap() = default;
  virtual Place place(Group group) const = 0;
  /// Collective over the world: Ok on every rank when `local` is Ok on
  /// every rank; otherwise, on every rank, the first failing rank's message
  /// with " (rank R of N)" appended when N > 1 (as Internal). So all ranks
  /// take the same branch afterwards: one rank entering an NCCL
  /// initialisation alone would hang.
  virtual Status Agree(const Status& local) = 0;
  /// Collective over `group`: its rank 0's `bytes` bytes at `data` to its
  /// other ranks.
  virtual Status Broadcast(Group group, void* data, std::size_t bytes) = 0;
  /// Collective over the world: whether every node holds the same number
  /// of ranks.
  virtual Status UniformNodes(bool* uniform) = 0;
};

/// The MPI engine's bootstrap, over the communicators of `mpi` (which must
/// outlive it).
std::unique_ptr<NcclBootstrap> MakeMpiNcclBootstrap(const MpiContext& mpi);

}  // namespace hvdtune::internal
