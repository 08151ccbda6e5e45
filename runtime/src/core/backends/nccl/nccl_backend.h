// NCCL backend for CUDA device buffers: the part of it that the runtime and
// the algorithms may call whether or not CUDA was found at configure time.
// In a build without CUDA (HVDTUNE_HAVE_CUDA == 0) these are stubs: no
// backend, no device pointers, hierarchical allreduce unavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "core/backends/backend.h"
#include "core/backends/mpi/mpi_context.h"
#include "core/backends/nccl/nccl_bootstrap.h"
#include "hvdtune/runtime.h"
#include "hvdtune/status.h"
#include "hvdtune/types.h"

namespace hvdtune::internal {

/// What NcclBackend::name() returns.
inline constexpr std::string_view kNcclBackendName = "nccl";

/// Creates the NCCL backend of one runtime: picks the CUDA device
/// local_rank % device count, creates one CUDA stream, and three NCCL
/// communicators (all ranks, the ranks of this node, the ranks with the same
/// local rank across nodes) whose unique ids travel through `boot` (over
/// MPI on the MPI engine, through the rendezvous store on Gloo).
///
/// Collective over the world: every rank must call it at the same point.
/// The ranks agree on the outcome, so either every rank gets a backend or
/// every rank gets nullptr with the same `*why_not` — never a hang. The
/// reason is the first failing rank's CUDA/NCCL error text (with "(rank R of
/// N)" appended when N > 1): a build without CUDA, "no CUDA device:
/// <cudaGetDeviceCount error text>", more ranks on a node than devices, ...
///
/// `boot` is needed only while it runs. The backend's calls may come from
/// any one thread at a time (the cycle thread); each makes the backend's
/// device current first.
std::unique_ptr<Backend> MakeNcclBackend(NcclBootstrap& boot, Status* why_not);

/// The same over the communicators of `mpi` (the MPI engine's bootstrap).
inline std::unique_ptr<Backend> MakeNcclBackend(const MpiContext& mpi,
                                                Status* why_not) {
  return MakeNcclBackend(*MakeMpiNcclBootstrap(mpi), why_not);
}

/// True when `ptr` is CUDA device or managed memory. False for host memory
/// (pinned or not), on any CUDA error (no driver, no device), and in a build
/// without CUDA.
bool IsDevicePointer(const void* ptr);

/// Whether this process sees at least one CUDA device (false on any CUDA
/// error or in a build without CUDA). Without one no buffer can be device
/// memory, so the runtime skips the per-tensor pointer check.
bool HaveCudaDevice();

/// Fills `out` from an NCCL backend made by MakeNcclBackend (nothing for
/// another backend or in a build without CUDA).
void GetNcclHandles(Backend& backend, NcclHandles* out);

/// Whether this build has the NCCL backend, and the loaded NCCL's version
/// code (0 without).
bool NcclBuilt();
int NcclVersionCode();

/// Hierarchical allreduce of device buffers on an NCCL backend made by
/// MakeNcclBackend: NCCL reduce-scatter inside the node, MPI_Allreduce of
/// each rank's shard across nodes on `mpi.cross` (staged through pinned host
/// memory), NCCL allgather inside the node. `in` may equal `out`.
///
/// op may be kSum, kMin, kMax or kAverage (sum, then the shard is divided on
/// the host, so integers truncate toward zero as with the MPI backend). When
/// the nodes hold different numbers of ranks the shards would not line up
/// across nodes, so every rank runs the flat ncclAllReduce instead (they
/// agreed on this when the backend was created). Returns InvalidArgument when
/// `backend` is not an NCCL backend, Internal with the CUDA/NCCL/MPI error
/// text on failure.
Status NcclHierarchicalAllreduce(Backend& backend, const MpiContext& mpi,
                                 const MpiTypes& types, const void* in,
                                 void* out, std::int64_t count, DataType dtype,
                                 ReduceOp op);

}  // namespace hvdtune::internal
