#include "core/backends/nccl/nccl_bootstrap.h"

#include <string>

namespace hvdtune::internal {
namespace {

class MpiNcclBootstrap final : public NcclBootstrap {
 public:
  explicit MpiNcclBootstrap(const MpiContext& mpi) : mpi_(mpi) {}

  Place place(Group group) const override {
    switch (group) {
      case Group::kLocal:
        return {mpi_.local_rank, mpi_.local_size};
      case Group::kCross:
        return {mpi_.cross_rank, mpi_.cross_size};
      case Group::kWorld:
        break;
    }
    return {mpi_.rank, mpi_.size};
  }

  Status Agree(const Status& local) override {
    const int mine = local.ok() ? mpi_.size : mpi_.rank;
    int first = mpi_.size;
    int rc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, mpi_.control);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Allreduce", rc);
    if (first == mpi_.size) return Status::Ok();
    std::string text = local.message();
    int len = static_cast<int>(text.size());
    rc = MPI_Bcast(&len, 1, MPI_INT, first, mpi_.control);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast", rc);
    text.resize(static_cast<std::size_t>(len));
    rc = MPI_Bcast(text.data(), len, MPI_CHAR, first, mpi_.control);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast", rc);
    if (mpi_.size > 1) {
      text += " (rank " + std::to_string(first) + " of " +
              std::to_string(mpi_.size) + ")";
    }
    return Status::Internal(text);
  }

  Status Broadcast(Group group, void* data, std::size_t bytes) override {
    const MPI_Comm comm = group == Group::kLocal   ? mpi_.local
                          : group == Group::kCross ? mpi_.cross
                                                   : mpi_.control;
    const int rc = MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, comm);
    return rc == MPI_SUCCESS ? Status::Ok() : MpiError("MPI_Bcast", rc);
  }

  Status UniformNodes(bool* uniform) override {
    int sizes[2] = {mpi_.local_size, -mpi_.local_size};
    const int rc =
        MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MIN, mpi_.control);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Allreduce", rc);
    *uniform = sizes[0] == -sizes[1];
    return Status::Ok();
  }

 private:
  const MpiContext& mpi_;
};

}  // namespace

std::unique_ptr<NcclBootstrap> MakeMpiNcclBootstrap(const MpiContext& mpi) {
  return std::make_unique<MpiNcclBootstrap>(mpi);
}

}  // namespace hvdtune::internal
