#include <mpi.h>

#include <algorithm>
#include <climits>
#include <string>

#include "core/backends/nccl/nccl_backend.h"
#include "core/backends/nccl/nccl_backend_cuda.h"
#include "core/reduce.h"

namespace hvdtune::internal {
namespace {

// MPI counts are int: larger shards go in chunks.
constexpr std::int64_t kMaxMpiChunk = INT_MAX / 2;

}  // namespace

Status NcclHierarchicalAllreduce(Backend& backend, const MpiContext& mpi,
                                 const MpiTypes& types, const void* in,
                                 void* out, std::int64_t count, DataType dtype,
                                 ReduceOp op) {
  auto* nccl = dynamic_cast<NcclBackend*>(&backend);
  if (nccl == nullptr) {
    return Status::InvalidArgument(
        "hierarchical NCCL allreduce needs the NCCL backend, not '" +
        std::string(backend.name()) + "'");
  }
  if (count < 0) return Status::InvalidArgument("negative allreduce count");
  if (count == 0) return Status::Ok();
  // Every rank agreed on uniform_nodes() at creation: all take this branch.
  if (!nccl->uniform_nodes()) return nccl->Allreduce(in, out, count, dtype, op);
  Status s = nccl->Activate();
  if (!s.ok()) return s;

  const cudaStream_t stream = nccl->stream();
  const std::size_t esize = DataTypeSize(dtype);
  const std::int64_t shard =
      (count + mpi.local_size - 1) / static_cast<std::int64_t>(mpi.local_size);
  const std::int64_t padded = shard * mpi.local_size;
  const std::size_t bytes = static_cast<std::size_t>(count) * esize;
  const std::size_t shard_bytes = static_cast<std::size_t>(shard) * esize;

  // The reduce-scatter needs local_size equal shards: work in `out` when the
  // count divides evenly, else in a padded scratch whose zeroed tail is
  // reduced along and never copied out.
  char* work = static_cast<char*>(out);
  cudaError_t e = cudaSuccess;
  if (padded != count) {
    void* scratch = nullptr;
    s = nccl->DeviceScratch(static_cast<std::size_t>(padded) * esize, &scratch);
    if (!s.ok()) return s;
    work = static_cast<char*>(scratch);
    e = cudaMemsetAsync(work + bytes, 0,
                        static_cast<std::size_t>(padded - count) * esize,
                        stream);
    if (e != cudaSuccess) return CudaError("cudaMemsetAsync", e);
  }
  if (work != in) {
    e = cudaMemcpyAsync(work, in, bytes, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return CudaError("cudaMemcpyAsync", e);
  }

  // 1. Inside the node: this rank ends up with the node's reduction of its
  // shard (in place: the receive buffer is the shard's slot in `work`).
  char* mine = work + static_cast<std::size_t>(mpi.local_rank) * shard_bytes;
  const ncclDataType_t type = NcclType(dtype);
  // An average is a sum until the host divides it once, in step 2.
  const ReduceOp wire = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  ncclResult_t r =
      ncclReduceScatter(work, mine, static_cast<std::size_t>(shard), type,
                        NcclReduceOp(wire, dtype), nccl->local(), stream);
  if (r != ncclSuccess) return NcclError("ncclReduceScatter", r);

  // 2. Across nodes: the shard through pinned host memory and MPI on
  // `cross`; the average's division happens here, once, on the full sum.
  const bool across = mpi.cross_size > 1;
  const bool divide = op == ReduceOp::kAverage && mpi.size > 1;
  if (across || divide) {
    void* host = nullptr;
    s = nccl->HostScratch(shard_bytes, &host);
    if (!s.ok()) return s;
    e = cudaMemcpyAsync(host, mine, shard_bytes, cudaMemcpyDeviceToHost,
                        stream);
    if (e != cudaSuccess) return CudaError("cudaMemcpyAsync", e);
    s = nccl->Synchronize("ncclReduceScatter");
    if (!s.ok()) return s;
    for (std::int64_t done = 0; across && done < shard;) {
      const std::int64_t n = std::min(shard - done, kMaxMpiChunk);
      const int rc = MPI_Allreduce(
          MPI_IN_PLACE,
          static_cast<char*>(host) + static_cast<std::size_t>(done) * esize,
          static_cast<int>(n), types.Type(dtype), types.Op(dtype, wire),
          mpi.cross);
      if (rc != MPI_SUCCESS) return MpiError("MPI_Allreduce", rc);
      done += n;
    }
    if (divide) DivideBy(host, shard, dtype, mpi.size);
    e = cudaMemcpyAsync(mine, host, shard_bytes, cudaMemcpyHostToDevice,
                        stream);
    if (e != cudaSuccess) return CudaError("cudaMemcpyAsync", e);
  }

  // 3. Inside the node: every rank gathers all shards (in place).
  r = ncclAllGather(mine, work, static_cast<std::size_t>(shard), type,
                    nccl->local(), stream);
  if (r != ncclSuccess) return NcclError("ncclAllGather", r);
  if (work != out) {
    e = cudaMemcpyAsync(out, work, bytes, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return CudaError("cudaMemcpyAsync", e);
  }
  return nccl->Synchronize("ncclAllGather");
}

}  // namespace hvdtune::internal
