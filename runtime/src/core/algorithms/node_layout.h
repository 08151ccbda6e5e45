// Which ranks of the runtime's data communicator share a node, as needed by
// the hierarchical algorithms.
#pragma once

#include <optional>
#include <vector>

#include "core/backends/mpi/mpi_context.h"
#include "hvdtune/status.h"

namespace hvdtune::internal {

/// The node layout every rank agrees on. Node n is the node whose local
/// rank 0 has cross rank n (leaders are ordered by data rank); members are in
/// local-rank order, which is data-rank order.
struct NodeLayout {
  int num_nodes = 1;
  /// Every node has the same number of ranks.
  bool uniform = true;
  /// Node n holds the consecutive data ranks following those of node n - 1,
  /// so node blocks in node order are the data ranks in order.
  bool blocked = true;
  /// Per node: its data ranks in local-rank order.
  std::vector<std::vector<int>> members;

  /// Collective over mpi.local and mpi.data (a broadcast and an allgather).
  static Status Build(const MpiContext& mpi, NodeLayout* out);
};

/// A NodeLayout computed on first use and kept while the communicators stay
/// the same, so the collective runs once per runtime. Every rank must call
/// Get at the same point (it is collective the first time).
class NodeLayoutCache {
 public:
  /// The layout, or an error status (then nothing is cached).
  Status Get(const MpiContext& mpi, const NodeLayout** layout);

 private:
  std::optional<NodeLayout> layout_;
  MPI_Comm data_ = MPI_COMM_NULL;
  MPI_Comm local_ = MPI_COMM_NULL;
};

}  // namespace hvdtune::internal
