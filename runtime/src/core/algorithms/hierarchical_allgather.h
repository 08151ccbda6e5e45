// Hierarchical allgather (HOROVOD_HIERARCHICAL_ALLGATHER): gather inside each
// node to its leader, allgatherv among the leaders, broadcast inside each
// node. The output is the flat allgather's, byte for byte.
#pragma once

#include <cstdint>
#include <vector>

#include "core/algorithms/algorithm.h"
#include "core/algorithms/node_layout.h"

namespace hvdtune::internal {

class HierarchicalAllgather {
 public:
  /// Same contract as Backend::Allgatherv over ctx.mpi.data: concatenates
  /// every rank's `bytes` into `out` in data-rank order; bytes_per_rank[r]
  /// is rank r's contribution. With a single node, or one rank per node,
  /// there is nothing to gain and it calls ctx.backend.Allgatherv. When node
  /// members are not consecutive ranks the leaders gather node blocks into a
  /// staging buffer and reorder them. Collective over the data communicator.
  Status Run(const AlgorithmContext& ctx, const void* in, std::int64_t bytes,
             void* out, const std::vector<std::int64_t>& bytes_per_rank);

 private:
  NodeLayoutCache layout_;
  std::vector<std::uint8_t> staging_;
  std::vector<int> counts_, displs_;
};

}  // namespace hvdtune::internal
