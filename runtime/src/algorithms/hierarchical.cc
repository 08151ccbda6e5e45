#include "algorithms/hierarchical.h"

#include <algorithm>
#include <climits>

#include "backends/nccl/nccl_backend.h"

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
  s = ring_.Run(mpi.local, in, out, count, dtype, op, segment,
                RingEngine::kReduceScatter);
  if (!s.ok()) return s;
  // Every member of this cross communicator has the same local rank, hence
  // owns the same chunk of the same length.
  const RingEngine::Range shard = RingEngine::ChunkRange(
      count, mpi.local_size,
      RingEngine::OwnedChunk(mpi.local_rank, mpi.local_size));
  auto* shard_ptr =
      static_cast<std::uint8_t*>(out) +
      shard.offset * static_cast<std::int64_t>(DataTypeSize(dtype));
  s = ring_.Run(mpi.cross, shard_ptr, shard_ptr, shard.count, dtype, op,
                segment, RingEngine::kBoth);
  if (!s.ok()) return s;
  return ring_.Run(mpi.local, out, out, count, dtype, op, segment,
                   RingEngine::kAllgather);
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
