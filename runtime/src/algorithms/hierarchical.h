// Hierarchical allreduce: inside each node, then across nodes, then inside
// each node again, so that only 1/local_size of the data per rank crosses
// the (slower) network between nodes.
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/node_layout.h"
#include "algorithms/ring.h"

namespace hvdtune::internal {

/// With every node holding the same number of ranks L (the usual layout):
///   1. ring reduce-scatter on the node's local communicator: local rank i
///      ends with chunk (i + 1) % L of the node's sum;
///   2. ring allreduce of that chunk on the cross communicator (the ranks
///      with the same local rank, one per node, all holding the same chunk);
///   3. ring allgather on the local communicator.
/// One node is a plain ring on the local communicator; one rank per node a
/// plain ring on the cross communicator.
///
/// Nodes of different sizes (e.g. 3 ranks at 2 per node) leave cross
/// communicators of different sizes whose shards would not line up, so then
/// it falls back to: MPI_Reduce to the node leader, ring allreduce among the
/// leaders, MPI_Bcast inside the node. Correct, not bandwidth-optimal.
///
/// Every step that produces a value other ranks copy is done once by one
/// rank (or by the ring, which is deterministic), so results are
/// bit-identical on every rank.
class HierarchicalAllreduce final : public AllreduceAlgorithm {
 public:
  std::string_view name() const override { return "hierarchical"; }
  Status Run(const AlgorithmContext& ctx, const void* in, void* out,
             std::int64_t count, DataType dtype, ReduceOp op) override;
  bool uses_node_layout() const override { return true; }
  /// NCCL inside nodes, MPI across them (NcclHierarchicalAllreduce).
  bool has_device_version() const override { return true; }
  Status RunDevice(const AlgorithmContext& ctx, const void* in, void* out,
                   std::int64_t count, DataType dtype, ReduceOp op) override;

 private:
  Status RunUneven(const AlgorithmContext& ctx, const void* in, void* out,
                   std::int64_t count, DataType dtype, ReduceOp op);

  NodeLayoutCache layout_;
  RingEngine ring_;
};

}  // namespace hvdtune::internal
