// The NCCL backend class itself, with CUDA and NCCL types in its interface.
// Only for code built when HVDTUNE_HAVE_CUDA is 1 (nccl_*.cc and the
// GPU tests); everything else uses nccl_backend.h.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/backends/backend.h"
#include "core/backends/mpi/mpi_context.h"
#include "core/backends/nccl/nccl_backend.h"

namespace hvdtune::internal {

/// Backend on NCCL collectives over CUDA device buffers. Every call enqueues
/// on the backend's own stream and synchronises it before returning, so a
/// collective is complete when the cycle thread finishes its handle.
///
/// Allreduce also accepts ReduceOp::kAverage, because the caller cannot
/// divide device memory on the host: float types use ncclAvg; integer types
/// are summed and divided on the host (truncating toward zero, as the MPI
/// backend does). float16/bfloat16 are reduced by NCCL in its own precision.
class NcclBackend final : public Backend {
 public:
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::string_view name() const override { return kNcclBackendName; }
  Status Allreduce(const void* in, void* out, std::int64_t count,
                   DataType dtype, ReduceOp op) override;
  /// In place on the device buffer `buffer`.
  Status Broadcast(void* buffer, std::int64_t bytes, int root) override;
  /// `in` is device memory. `out` may be device or host memory: host output
  /// is gathered into device scratch and copied back. Equal sizes use
  /// ncclAllGather, unequal ones a group of one ncclBroadcast per rank.
  Status Allgatherv(const void* in, std::int64_t bytes, void* out,
                    const std::vector<std::int64_t>& bytes_per_rank) override;

  /// Makes the backend's device current on the calling thread (the cycle
  /// thread is not the thread that created the backend).
  Status Activate() const;
  /// Waits for the stream; reports a CUDA error or an asynchronous NCCL
  /// error of any communicator, naming `what`.
  Status Synchronize(const char* what) const;
  /// Device scratch of at least `bytes`, grown on demand and kept.
  Status DeviceScratch(std::size_t bytes, void** ptr);
  /// Pinned host scratch of at least `bytes`, grown on demand and kept.
  Status HostScratch(std::size_t bytes, void** ptr);
  /// device_buffer[i] /= divisor on the host (through the pinned scratch),
  /// with the runtime's rounding: integers truncate toward zero.
  Status DivideOnHost(void* device_buffer, std::int64_t count, DataType dtype,
                      int divisor);

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  /// All ranks of the runtime (ranks as in MpiContext::rank).
  ncclComm_t world() const { return world_; }
  /// The ranks of this node (MpiContext::local_rank / local_size).
  ncclComm_t local() const { return local_; }
  /// The ranks with this local rank, one per node (MpiContext::cross_*).
  ncclComm_t cross() const { return cross_; }
  /// Whether every node holds the same number of ranks (agreed by all).
  bool uniform_nodes() const { return uniform_nodes_; }

 private:
  friend std::unique_ptr<Backend> MakeNcclBackend(NcclBootstrap& boot,
                                                  Status* why_not);
  NcclBackend() = default;

  int rank_ = 0, size_ = 1;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  ncclComm_t world_ = nullptr, local_ = nullptr, cross_ = nullptr;
  bool uniform_nodes_ = false;
  void* device_scratch_ = nullptr;
  std::size_t device_scratch_bytes_ = 0;
  void* host_scratch_ = nullptr;
  std::size_t host_scratch_bytes_ = 0;
};

/// "<call> failed: <cudaGetErrorString>".
Status CudaError(const char* call, cudaError_t code);
/// "<call> failed: <ncclGetErrorString>[: <ncclGetLastError>]".
Status NcclError(const char* call, ncclResult_t code);
/// NCCL's reduction for op: kAverage is ncclAvg for float types and
/// ncclSum for integer types (whose division the caller does).
ncclRedOp_t NcclReduceOp(ReduceOp op, DataType dtype);
/// NCCL's type for a dtype (every DataType has one).
ncclDataType_t NcclType(DataType dtype);

}  // namespace hvdtune::internal
