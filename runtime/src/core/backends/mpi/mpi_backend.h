// Backend on MPI collectives over the runtime's data communicator.
#pragma once

#include "core/backends/backend.h"
#include "core/backends/mpi/mpi_context.h"

namespace hvdtune::internal {

class MpiBackend final : public Backend {
 public:
  MpiBackend(MPI_Comm comm, const MpiTypes& types)
      : comm_(comm), types_(types) {}
  std::string_view name() const override { return "mpi"; }
  Status Allreduce(const void* in, void* out, std::int64_t count,
                   DataType dtype, ReduceOp op) override;
  Status Broadcast(void* buffer, std::int64_t bytes, int root) override;
  Status Allgatherv(const void* in, std::int64_t bytes, void* out,
                    const std::vector<std::int64_t>& bytes_per_rank) override;
  Status Reducescatter(const void* in, void* out,
                       const std::vector<std::int64_t>& counts, DataType dtype,
                       ReduceOp op) override;
  Status Alltoallv(const void* in, const std::vector<std::int64_t>& send_bytes,
                   void* out,
                   const std::vector<std::int64_t>& recv_bytes) override;

 private:
  MPI_Comm comm_;
  const MpiTypes& types_;
};

}  // namespace hvdtune::internal
