// The NCCL entry points in a build without CUDA (HVDTUNE_HAVE_CUDA == 0),
// so that the runtime can call them unconditionally.
#include <string>

#include "core/backends/nccl/nccl_backend.h"

namespace hvdtune::internal {

std::unique_ptr<Backend> MakeNcclBackend(NcclBootstrap& /*boot*/,
                                         Status* why_not) {
  if (why_not != nullptr) {
    *why_not = Status::Internal(
        "hvdtune was built without CUDA (HVDTUNE_HAVE_CUDA=0): no NCCL "
        "backend");
  }
  return nullptr;
}

bool IsDevicePointer(const void* /*ptr*/) { return false; }

bool HaveCudaDevice() { return false; }

void GetNcclHandles(Backend& /*backend*/, NcclHandles* /*out*/) {}

bool NcclBuilt() { return false; }

int NcclVersionCode() { return 0; }

Status NcclHierarchicalAllreduce(Backend& backend, const MpiContext& /*mpi*/,
                                 const MpiTypes& /*types*/, const void* /*in*/,
                                 void* /*out*/, std::int64_t /*count*/,
                                 DataType /*dtype*/, ReduceOp /*op*/) {
  return Status::InvalidArgument(
      "hierarchical NCCL allreduce needs the NCCL backend, not '" +
      std::string(backend.name()) + "' (built without CUDA)");
}

}  // namespace hvdtune::internal
