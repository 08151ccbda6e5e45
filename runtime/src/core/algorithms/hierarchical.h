// Hierarchical allreduce: inside each node, then across nodes, then inside
// each node again, so that only 1/local_size of the data per rank crosses
// the (slower) network between nodes.
#pragma once

#include "core/algorithms/algorithm.h"
#include "core/algorithms/node_layout.h"
#include "core/algorithms/ring.h"

namespace hvdtune::internal {

/// With every node holding the same number of ranks L (the usual layout),
/// the buffer is cut into pieces of hierarchical_chunk_bytes (0: one piece)
/// and each piece goes through
///   1. ring reduce-scatter on the node's local communicator: local rank i
///      ends with chunk (i + 1) % L of the piece's node sum;
///   2. ring allreduce of that chunk on the cross communicator (the ranks
///      with the same local rank, one per node, all holding the same chunk);
///   3. ring allgather on the local communicator.
/// The pieces are pipelined: while piece p crosses the network (2), piece
/// p + 1 is reduce-scattered and piece p - 1 allgathered inside the node, so
/// the slow link between nodes stays busy. One thread drives both rings
/// (RingEngine::Start/Progress); each communicator carries one ring at a
/// time, in the same order on every rank.
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
  Status RunPipelined(const AlgorithmContext& ctx, const void* in, void* out,
                      std::int64_t count, DataType dtype, ReduceOp op);
  Status RunUneven(const AlgorithmContext& ctx, const void* in, void* out,
                   std::int64_t count, DataType dtype, ReduceOp op);

  NodeLayoutCache layout_;
  RingEngine ring_;
  // The pipelined path's node-local and cross-node rings, driven together.
  RingEngine local_;
  RingEngine cross_;
};

}  // namespace hvdtune::internal
