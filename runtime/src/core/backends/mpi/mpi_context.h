// MPI communicators owned by one Runtime: control traffic (negotiation) and
// data traffic use separate duplicates of MPI_COMM_WORLD; local and cross
// communicators describe the node layout.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hvdtune/mpi.h"
#include "hvdtune/status.h"
#include "hvdtune/types.h"

namespace hvdtune::internal {

struct MpiContext {
  MPI_Comm control = MPI_COMM_NULL;
  MPI_Comm data = MPI_COMM_NULL;
  /// Ranks on this node (MPI_Comm_split_type SHARED, or the override).
  MPI_Comm local = MPI_COMM_NULL;
  /// Ranks with the same local rank, one per node.
  MPI_Comm cross = MPI_COMM_NULL;
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int cross_rank = 0, cross_size = 1;
  /// Whether this context called MPI_Init_thread.
  bool initialized_mpi = false;

  /// Initialises MPI if needed (MPI_THREAD_MULTIPLE requested) and creates
  /// the control and data communicators over `world_ranks` of
  /// MPI_COMM_WORLD (ascending; empty: all), collectively over those ranks
  /// only. Throws ConfigError on failure.
  static MpiContext Create(const std::vector<int>& world_ranks = {});
  /// Creates the local and cross communicators (collective on `data`).
  /// ranks_per_node > 0 groups consecutive ranks into emulated nodes
  /// instead of asking MPI; every rank must pass the same value. Throws
  /// ConfigError on failure.
  void SplitNodes(int ranks_per_node);
  /// Create() and SplitNodes() (the ranks must agree on ranks_per_node).
  static MpiContext Create(int ranks_per_node) {
    MpiContext ctx = Create(std::vector<int>{});
    ctx.SplitNodes(ranks_per_node);
    return ctx;
  }
  /// Frees the communicators (MPI itself stays initialised; see Create).
  void Free();
};

// PrepareMpiInit, NativeMpiType and MpiLibraryVersion are public
// (hvdtune/mpi.h).
using ::hvdtune::NativeMpiType;
using ::hvdtune::PrepareMpiInit;

/// MPI type and op for a dtype; half types use committed byte pairs and
/// user-defined ops created by MpiTypes.
class MpiTypes {
 public:
  MpiTypes();
  ~MpiTypes();
  MpiTypes(const MpiTypes&) = delete;
  MpiTypes& operator=(const MpiTypes&) = delete;

  MPI_Datatype Type(DataType dtype) const;
  MPI_Op Op(DataType dtype, ReduceOp op) const;

 private:
  MPI_Datatype half_ = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16_ = MPI_DATATYPE_NULL;
  // Indexed sum, min, max, product.
  MPI_Op half_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op bfloat16_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL,
                             MPI_OP_NULL};
};

/// How many ranks of `comm` run on this machine (the same kernel boot, so
/// emulated nodes on one host count together). Collective over `comm`.
int RanksOnThisMachine(MPI_Comm comm);

/// Every rank's bytes, in rank order (collective on `comm`). Throws
/// ConfigError on an MPI failure.
std::vector<std::vector<std::uint8_t>> AllgatherBytes(
    MPI_Comm comm, const std::vector<std::uint8_t>& mine);

/// "MPI_Allreduce failed: <MPI error string>".
Status MpiError(const char* call, int code);

}  // namespace hvdtune::internal
