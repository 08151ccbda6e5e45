// The engine under the algorithms: a backend moves and reduces bytes among
// the ranks of one communicator. MPI for host memory; NCCL for device memory.
#pragma once

#include <cstdint>
#include <string>
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
  /// Reduces every rank's `in` (the sum of `counts` elements, in rank-major
  /// blocks) and leaves rank r block r in `out` (counts[r] elements). op is
  /// kSum, kMin, kMax or kProduct.
  virtual Status Reducescatter(const void* in, void* out,
                               const std::vector<std::int64_t>& counts,
                               DataType dtype, ReduceOp op) {
    (void)in, (void)out, (void)counts, (void)dtype, (void)op;
    return Status::InvalidArgument("the " + std::string(name()) +
                                   " backend has no reducescatter");
  }
  /// Sends send_bytes[d] bytes of `in` (in rank order) to rank d and
  /// receives recv_bytes[s] bytes from rank s into `out` (in rank order).
  virtual Status Alltoallv(const void* in,
                           const std::vector<std::int64_t>& send_bytes,
                           void* out,
                           const std::vector<std::int64_t>& recv_bytes) {
    (void)in, (void)send_bytes, (void)out, (void)recv_bytes;
    return Status::InvalidArgument("the " + std::string(name()) +
                                   " backend has no alltoall");
  }
};

}  // namespace hvdtune::internal
