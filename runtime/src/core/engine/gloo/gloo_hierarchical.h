// The Gloo engine's hierarchical allreduce (a value of the
// allreduce_algorithm knob on this engine).
//
// Where every node holds the same number L > 1 of ranks and the ranks of a
// node can share memory (NodeShm), the buffer goes through a segment of
// their node in pieces of kGlooShmDefaultPieceBytes (hierarchical_chunk_bytes
// when set, between kGlooShmMinPieceBytes and kGlooShmPieceBytes), each
// piece as
//   1. every local rank copies its piece into its own slot (all but its own
//      shard, which it reads from its input);
//   2. local rank i reduces shard i of the piece over the L inputs, in local
//      rank order, into slot 0 (one rank computes each shard: the same bits
//      whoever reads it);
//   3. local rank i allreduces that shard with the ranks of local rank i on
//      the other nodes (MeshAllreduce, mesh_allreduce.h: a direct
//      reduce-scatter and allgather in segments of kGlooCrossSegmentBytes,
//      on the engine's own sockets among those ranks, socket_mesh.h), on a
//      thread of its own: the L shards cross the network at once, and the
//      rank goes on with the next piece's steps 1-2 meanwhile;
//   4. every local rank copies the whole piece out of slot 0.
// Two sets of slots alternate, so a rank may start piece p + 1 while the
// others still read piece p; a rank waits for a remote node only through
// step 3 (its own worker's, or its node peers' in step 4). Ranks of a node
// never touch the loopback sockets.
//
// Otherwise (one node, one rank per node, nodes of different sizes, or a
// segment that could not be mapped on some node: the ranks agree at the
// first call) it reduces to each node's first rank, runs the ring among
// those, and broadcasts inside each node, as Gloo's own collectives.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/gloo/gloo_backend.h"
#include "core/engine/gloo/gloo_node_shm.h"
#include "core/engine/gloo/socket_mesh.h"

namespace hvdtune::internal {

/// The largest pipeline piece of the shared-memory path (its segment holds
/// 2 L of them per node).
inline constexpr std::int64_t kGlooShmPieceBytes = 4 << 20;
/// The piece where hierarchical_chunk_bytes is 0: with step 3 on its own
/// thread, 1 MiB pieces measured faster than 4 MiB and 512 KiB on the
/// emulated 10gbe cluster (docs/benchmarks.md).
inline constexpr std::int64_t kGlooShmDefaultPieceBytes = 1 << 20;
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

  /// Step 3 of the shared-memory path on a thread of its own, piece after
  /// piece in the order posted, so that a rank copies piece q + 1 in and
  /// reduces it while piece q crosses the network. It publishes kReduced
  /// for each piece it finishes; on a failure it flags the node's segment
  /// (every wait there ends) and drops what is left.
  class CrossWorker {
   public:
    struct Piece {
      void* data = nullptr;
      std::int64_t count = 0;
      DataType dtype = DataType::kFloat32;
      ReduceOp op = ReduceOp::kSum;
      std::uint64_t q = 0;
    };
    CrossWorker(GlooHierarchical& owner, const SocketMesh& mesh);
    ~CrossWorker();
    void Post(const Piece& piece);
    /// Stops the piece in flight and drops the others; the error that
    /// failed a piece, if one did.
    Status Abort();

   private:
    void Loop();

    GlooHierarchical& owner_;
    const SocketMesh& mesh_;
    /// Readable once Abort ran: the piece in flight stops.
    int abort_fd_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Piece> queue_;
    Status error_;
    bool stop_ = false;
    /// The other nodes' copies of this rank's block (kept between pieces).
    std::vector<std::uint8_t> scratch_;
    std::thread thread_;
  };

  GlooBackend& world_;
  GlooBackend& local_;
  GlooBackend& cross_;
  Path path_ = Path::kUntried;
  std::unique_ptr<NodeShm> shm_;
  /// Pieces through the segment so far (the counters NodeShm publishes).
  std::uint64_t pieces_ = 0;
  /// Made with the segment where a mesh across nodes exists; declared
  /// after shm_, so it stops before the segment goes.
  std::unique_ptr<CrossWorker> cross_worker_;
  /// Why the shared path failed (every later call returns it: the node's
  /// counters no longer agree).
  Status broken_;
};

}  // namespace hvdtune::internal
