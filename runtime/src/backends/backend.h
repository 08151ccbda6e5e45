// The engine under the algorithms: a backend moves and reduces bytes among
// the ranks of one communicator. MPI for host memory; NCCL for device memory.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "hvdtune/status.h"
#include "hvdtune/types.h"

namespace hvdtune::internal {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  /// out = reduce over ranks of in (count elements). `in` may equal `out`.
  /// op is kSum, kMin or kMax (kAverage is done by the caller).
  virtual Status Allreduce(const void* in, void* out, std::int64_t count,
                           DataType dtype, ReduceOp op) = 0;
  virtual Status Broadcast(void* buffer, std::int64_t bytes, int root) = 0;
  /// Concatenates each rank's `bytes` into `out` in rank order;
  /// bytes_per_rank[r] is what rank r contributes.
  virtual Status Allgatherv(
      const void* in, std::int64_t bytes, void* out,
      const std::vector<std::int64_t>& bytes_per_rank) = 0;
};

}  // namespace hvdtune::internal
