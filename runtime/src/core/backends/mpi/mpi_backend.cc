#include "core/backends/mpi/mpi_backend.h"

#include <algorithm>
#include <climits>

namespace hvdtune::internal {
namespace {

// MPI counts are int: larger buffers go in chunks.
constexpr std::int64_t kMaxChunk = INT_MAX / 2;

}  // namespace

Status MpiBackend::Allreduce(const void* in, void* out, std::int64_t count,
                             DataType dtype, ReduceOp op) {
  const std::int64_t esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  for (std::int64_t done = 0; done < count;) {
    const std::int64_t n = std::min(count - done, kMaxChunk);
    char* o = static_cast<char*>(out) + done * esize;
    const void* i =
        in == out ? MPI_IN_PLACE : static_cast<const char*>(in) + done * esize;
    const int rc = MPI_Allreduce(i, o, static_cast<int>(n), types_.Type(dtype),
                                 types_.Op(dtype, op), comm_);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Allreduce", rc);
    done += n;
  }
  return Status::Ok();
}

Status MpiBackend::Broadcast(void* buffer, std::int64_t bytes, int root) {
  for (std::int64_t done = 0; done < bytes;) {
    const std::int64_t n = std::min(bytes - done, kMaxChunk);
    const int rc = MPI_Bcast(static_cast<char*>(buffer) + done,
                             static_cast<int>(n), MPI_BYTE, root, comm_);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast", rc);
    done += n;
  }
  return Status::Ok();
}

Status MpiBackend::Allgatherv(const void* in, std::int64_t bytes, void* out,
                              const std::vector<std::int64_t>& bytes_per_rank) {
  std::int64_t total = 0;
  std::vector<int> counts(bytes_per_rank.size()), displs(bytes_per_rank.size());
  for (std::size_t r = 0; r < bytes_per_rank.size(); ++r) {
    displs[r] = static_cast<int>(total);
    counts[r] = static_cast<int>(bytes_per_rank[r]);
    total += bytes_per_rank[r];
  }
  if (total > INT_MAX) {
    return Status::InvalidArgument(
        "allgather output of " + std::to_string(total) +
        " bytes exceeds the MPI backend's 2 GiB limit");
  }
  const int rc =
      MPI_Allgatherv(bytes == 0 ? static_cast<const void*>(&total) : in,
                     static_cast<int>(bytes), MPI_BYTE, out, counts.data(),
                     displs.data(), MPI_BYTE, comm_);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Allgatherv", rc);
  return Status::Ok();
}

Status MpiBackend::Reducescatter(const void* in, void* out,
                                 const std::vector<std::int64_t>& counts,
                                 DataType dtype, ReduceOp op) {
  std::vector<int> c(counts.size());
  bool equal = true;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > INT_MAX) {
      return Status::InvalidArgument(
          "reducescatter block of " + std::to_string(counts[r]) +
          " elements exceeds the MPI backend's limit of 2^31 - 1");
    }
    c[r] = static_cast<int>(counts[r]);
    equal = equal && c[r] == c[0];
  }
  // Equal blocks take MPI's own block variant (its algorithms differ from
  // the general one's).
  const int rc = equal
                     ? MPI_Reduce_scatter_block(in, out, c.empty() ? 0 : c[0],
                                                types_.Type(dtype),
                                                types_.Op(dtype, op), comm_)
                     : MPI_Reduce_scatter(in, out, c.data(), types_.Type(dtype),
                                          types_.Op(dtype, op), comm_);
  if (rc != MPI_SUCCESS) {
    return MpiError(equal ? "MPI_Reduce_scatter_block" : "MPI_Reduce_scatter",
                    rc);
  }
  return Status::Ok();
}

Status MpiBackend::Alltoallv(const void* in,
                             const std::vector<std::int64_t>& send_bytes,
                             void* out,
                             const std::vector<std::int64_t>& recv_bytes) {
  const std::size_t n = send_bytes.size();
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  std::int64_t st = 0, rt = 0;
  for (std::size_t r = 0; r < n; ++r) {
    sc[r] = static_cast<int>(send_bytes[r]);
    sd[r] = static_cast<int>(st);
    rc[r] = static_cast<int>(recv_bytes[r]);
    rd[r] = static_cast<int>(rt);
    st += send_bytes[r];
    rt += recv_bytes[r];
    if (st > INT_MAX || rt > INT_MAX) {
      return Status::InvalidArgument(
          "alltoall of more than 2 GiB per rank exceeds the MPI backend's "
          "limit");
    }
  }
  // MPI wants valid addresses even for empty buffers.
  std::uint8_t none = 0;
  const int code = MPI_Alltoallv(st == 0 ? &none : in, sc.data(), sd.data(),
                                 MPI_BYTE, rt == 0 ? &none : out, rc.data(),
                                 rd.data(), MPI_BYTE, comm_);
  if (code != MPI_SUCCESS) return MpiError("MPI_Alltoallv", code);
  return Status::Ok();
}

}  // namespace hvdtune::internal
