#include "core/algorithms/hierarchical.h"

#include <algorithm>
#include <climits>

#include "core/backends/nccl/nccl_backend.h"

namespace hvdtune::internal {
namespace {

// MPI counts are int: the fallback's collectives go in pieces.
constexpr std::int64_t kMaxPiece = INT_MAX / 2;

}  // namespace

Status HierarchicalAllreduce::RunDevice(const AlgorithmContext& ctx,
                                        const void* in, void* out,
                                        std::int64_t count, DataType dtype,
                                        ReduceOp op) {
  return NcclHierarchicalAllreduce(*ctx.device, ctx.mpi, ctx.types, in, out,
                                   count, dtype, op);
}

Status HierarchicalAllreduce::Run(const AlgorithmContext& ctx, const void* in,
                                  void* out, std::int64_t count, DataType dtype,
                                  ReduceOp op) {
  if (count <= 0) return Status::Ok();
  const MpiContext& mpi = ctx.mpi;
  const NodeLayout* layout = nullptr;
  Status s = layout_.Get(mpi, &layout);
  if (!s.ok()) return s;
  const std::int64_t segment = ctx.knobs.ring_segment_bytes();
  if (layout->num_nodes == 1) {
    return ring_.Run(mpi.local, in, out, count, dtype, op, segment,
                     RingEngine::kBoth);
  }
  if (!layout->uniform) return RunUneven(ctx, in, out, count, dtype, op);
  if (mpi.local_size == 1) {
    return ring_.Run(mpi.cross, in, out, count, dtype, op, segment,
                     RingEngine::kBoth);
  }
  return RunPipelined(ctx, in, out, count, dtype, op);
}

Status HierarchicalAllreduce::RunPipelined(const AlgorithmContext& ctx,
                                           const void* in, void* out,
                                           std::int64_t count, DataType dtype,
                                           ReduceOp op) {
  const MpiContext& mpi = ctx.mpi;
  const std::int64_t segment = ctx.knobs.ring_segment_bytes();
  const auto esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  const std::int64_t chunk_bytes = ctx.knobs.hierarchical_chunk_bytes();
  // Pieces of at least one element per local rank; 0 = one piece.
  const std::int64_t piece =
      chunk_bytes <= 0
          ? count
          : std::max<std::int64_t>(mpi.local_size, chunk_bytes / esize);
  const std::int64_t pieces = (count + piece - 1) / piece;
  if (pieces == 1) {
    Status s = ring_.Run(mpi.local, in, out, count, dtype, op, segment,
                         RingEngine::kReduceScatter);
    if (!s.ok()) return s;
    const RingEngine::Range r = RingEngine::ChunkRange(
        count, mpi.local_size,
        RingEngine::OwnedChunk(mpi.local_rank, mpi.local_size));
    auto* shard_ptr = static_cast<std::uint8_t*>(out) + r.offset * esize;
    s = ring_.Run(mpi.cross, shard_ptr, shard_ptr, r.count, dtype, op, segment,
                  RingEngine::kBoth);
    if (!s.ok()) return s;
    return ring_.Run(mpi.local, out, out, count, dtype, op, segment,
                     RingEngine::kAllgather);
  }
  const auto* const src = static_cast<const std::uint8_t*>(in);
  auto* const dst = static_cast<std::uint8_t*>(out);
  const auto range = [&](std::int64_t p) {
    const std::int64_t begin = p * piece;
    return RingEngine::Range{begin, std::min(piece, count - begin)};
  };
  // Every member of a cross communicator has the same local rank, hence
  // owns the same chunk of the same length of every piece.
  const auto shard = [&](std::int64_t p) {
    const RingEngine::Range r = range(p);
    const RingEngine::Range c = RingEngine::ChunkRange(
        r.count, mpi.local_size,
        RingEngine::OwnedChunk(mpi.local_rank, mpi.local_size));
    return RingEngine::Range{r.offset + c.offset, c.count};
  };

  // Node-local operations, one at a time in this order on every rank of the
  // node: RS 0, then RS p + 1 before AG p, then the last AG. Cross-node
  // allreduces, one at a time in piece order: X p starts once RS p and
  // X p - 1 are done, and AG p waits for X p. So while piece p crosses the
  // link, piece p + 1 is reduce-scattered and piece p - 1 allgathered.
  const std::int64_t local_ops = 2 * pieces;
  const auto local_op = [&](std::int64_t i, bool* allgather) {
    // i = 0: RS 0; odd i = 2p + 1 < 2 * pieces - 1: RS p + 1; even i = 2p:
    // AG p - 1; the last one AG pieces - 1.
    if (i == 0) {
      *allgather = false;
      return std::int64_t{0};
    }
    if (i == local_ops - 1) {
      *allgather = true;
      return pieces - 1;
    }
    *allgather = i % 2 == 0;
    return *allgather ? i / 2 - 1 : (i + 1) / 2;
  };
  std::int64_t next_local = 0, rs_done = 0, next_cross = 0, cross_done = 0;
  bool local_busy = false, local_is_rs = false, cross_busy = false;
  const auto fail = [&](const Status& s) {
    local_.Cancel();
    cross_.Cancel();
    return s;
  };
  while (cross_done < pieces || next_local < local_ops || local_busy) {
    bool done = false;
    if (cross_busy) {
      // Block on the link when nothing node-local can run meanwhile.
      bool block = !local_busy;
      if (block && next_local < local_ops) {
        bool ag = false;
        const std::int64_t p = local_op(next_local, &ag);
        block = ag && p >= cross_done;
      }
      Status s = cross_.Progress(block, &done);
      if (!s.ok()) return fail(s);
      if (done) {
        cross_busy = false;
        ++cross_done;
      }
    }
    if (!cross_busy && next_cross < rs_done) {
      const RingEngine::Range r = shard(next_cross);
      std::uint8_t* p = dst + r.offset * esize;
      Status s = cross_.Start(mpi.cross, p, p, r.count, dtype, op, segment,
                              RingEngine::kBoth);
      if (!s.ok()) return fail(s);
      ++next_cross;
      cross_busy = true;
    }
    if (local_busy) {
      // Node-local pieces are short: run each to its end (its waits progress
      // the cross-node transfers too) rather than spinning on both rings.
      Status s = local_.Progress(/*block=*/true, &done);
      if (!s.ok()) return fail(s);
      if (done) {
        local_busy = false;
        if (local_is_rs) ++rs_done;
        continue;  // the next cross-node piece may start now
      }
    }
    if (!local_busy && next_local < local_ops) {
      bool ag = false;
      const std::int64_t p = local_op(next_local, &ag);
      if (ag && p >= cross_done) continue;  // X p still running
      const RingEngine::Range r = range(p);
      Status s = ag ? local_.Start(mpi.local, dst + r.offset * esize,
                                   dst + r.offset * esize, r.count, dtype, op,
                                   segment, RingEngine::kAllgather)
                    : local_.Start(mpi.local, src + r.offset * esize,
                                   dst + r.offset * esize, r.count, dtype, op,
                                   segment, RingEngine::kReduceScatter);
      if (!s.ok()) return fail(s);
      ++next_local;
      local_busy = true;
      local_is_rs = !ag;
    }
  }
  return Status::Ok();
}

Status HierarchicalAllreduce::RunUneven(const AlgorithmContext& ctx,
                                        const void* in, void* out,
                                        std::int64_t count, DataType dtype,
                                        ReduceOp op) {
  const MpiContext& mpi = ctx.mpi;
  const auto esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  const bool leader = mpi.local_rank == 0;
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t n = std::min(count - done, kMaxPiece);
    const auto* i = static_cast<const std::uint8_t*>(in) + done * esize;
    auto* o = static_cast<std::uint8_t*>(out) + done * esize;
    const void* send = leader && in == out ? MPI_IN_PLACE : i;
    const int rc =
        MPI_Reduce(send, o, static_cast<int>(n), ctx.types.Type(dtype),
                   ctx.types.Op(dtype, op), 0, mpi.local);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Reduce", rc);
    done += n;
  }
  // The leaders' cross communicator holds exactly one rank per node.
  if (leader) {
    const Status s =
        ring_.Run(mpi.cross, out, out, count, dtype, op,
                  ctx.knobs.ring_segment_bytes(), RingEngine::kBoth);
    if (!s.ok()) return s;
  }
  const std::int64_t bytes = count * esize;
  for (std::int64_t done = 0; done < bytes;) {
    const std::int64_t n = std::min(bytes - done, kMaxPiece);
    const int rc = MPI_Bcast(static_cast<std::uint8_t*>(out) + done,
                             static_cast<int>(n), MPI_BYTE, 0, mpi.local);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast", rc);
    done += n;
  }
  return Status::Ok();
}

}  // namespace hvdtune::internal
