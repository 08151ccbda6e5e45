// The Gloo engine's hierarchical allreduce (a value of the
// allreduce_algorithm knob on this engine).
//
// Where every node holds the same number L > 1 of ranks and the ranks of a
// node can share memory (NodeShm), the buffer goes through a segment of
// their node in pieces of kGlooShmPieceBytes (hierarchical_chunk_bytes when
// smaller, but not below kGlooShmMinPieceBytes), each piece as
//   1. every local rank copies its piece into its own slot (all but its own
//      shard, which it reads from its input);
//   2. local rank i reduces shard i of the piece over the L inputs, in local
//      rank order, into slot 0 (one rank computes each shard: the same bits
//      whoever reads it);
//   3. local rank i allreduces that shard with the ranks of local rank i on
//      the other nodes (DirectAllreduce, gloo_direct_allreduce.h: a direct
//      reduce-scatter and allgather in segments of kGlooCrossSegmentBytes,
//      on the cross context one way and the world's the other): the L
//      shards cross the network at once;
//   4. every local rank copies the whole piece out of slot 0.
// Two sets of slots alternate, so a rank may start piece p + 1 while the
// others still read piece p; no rank waits for a remote node except in its
// own step 3. Ranks of a node never touch the loopback sockets.
//
// Otherwise (one node, one rank per node, nodes of different sizes, or a
// segment that could not be mapped on some node: the ranks agree at the
// first call) it reduces to each node's first rank, runs the ring among
// those, and broadcasts inside each node, as Gloo's own collectives.
#pragma once

#include <cstdint>
#include <memory>

#include "core/engine/engine.h"
#include "core/engine/gloo/gloo_backend.h"
#include "core/engine/gloo/gloo_node_shm.h"

namespace hvdtune::internal {

/// The largest pipeline piece of the shared-memory path (its segment holds
/// 2 L of them per node).
inline constexpr std::int64_t kGlooShmPieceBytes = 4 << 20;
/// The smallest: every piece costs a Gloo ring across nodes and a few
/// waits inside the node, whatever its size.
inline constexpr std::int64_t kGlooShmMinPieceBytes = 64 << 10;
/// The segments of the phase across nodes (a piece's shard is cut into one
/// block per node, each block into segments of at most this): 512 KiB
/// measured as good as 1 MiB and better than 256 KiB on the emulated
/// 10gbe cluster (docs/benchmarks.md).
inline constexpr std::int64_t kGlooCrossSegmentBytes = 512 << 10;

class GlooHierarchical final : public EngineAllreduce {
 public:
  GlooHierarchical(GlooBackend& world, GlooBackend& local, GlooBackend& cross)
      : world_(world), local_(local), cross_(cross) {}
  std::string_view name() const override { return "hierarchical"; }
  Status Run(const KnobSettings& knobs, const void* in, void* out,
             std::int64_t count, DataType dtype, ReduceOp op) override;

 private:
  Status RunShared(const KnobSettings& knobs, const void* in, void* out,
                   std::int64_t count, DataType dtype, ReduceOp op);
  Status RunThroughLeaders(const KnobSettings& knobs, const void* in, void* out,
                           std::int64_t count, DataType dtype, ReduceOp op);
  /// Piece q's slot of local rank r in the segment.
  std::uint8_t* Slot(std::uint64_t q, int r) const;

  enum class Path { kUntried, kShared, kLeaders, kBroken };

  GlooBackend& world_;
  GlooBackend& local_;
  GlooBackend& cross_;
  Path path_ = Path::kUntried;
  std::unique_ptr<NodeShm> shm_;
  /// Pieces through the segment so far (the counters NodeShm publishes).
  std::uint64_t pieces_ = 0;
  /// Why the shared path failed (every later call returns it: the node's
  /// counters no longer agree).
  Status broken_;
};

}  // namespace hvdtune::internal
