#include "core/algorithms/hierarchical_allgather.h"

#include <climits>
#include <cstring>

namespace hvdtune::internal {

Status HierarchicalAllgather::Run(
    const AlgorithmContext& ctx, const void* in, std::int64_t bytes, void* out,
    const std::vector<std::int64_t>& bytes_per_rank) {
  const MpiContext& mpi = ctx.mpi;
  const NodeLayout* layout = nullptr;
  Status s = layout_.Get(mpi, &layout);
  if (!s.ok()) return s;
  const int nodes = layout->num_nodes;
  if (nodes == 1 || nodes == mpi.size) {
    return ctx.backend.Allgatherv(in, bytes, out, bytes_per_rank);
  }
  // Offsets of each rank's block in the output (data-rank order).
  std::vector<std::int64_t> rank_offset(bytes_per_rank.size() + 1, 0);
  for (std::size_t r = 0; r < bytes_per_rank.size(); ++r) {
    rank_offset[r + 1] = rank_offset[r] + bytes_per_rank[r];
  }
  const std::int64_t total = rank_offset.back();
  if (total > INT_MAX) {
    return Status::InvalidArgument(
        "allgather output of " + std::to_string(total) +
        " bytes exceeds the MPI backend's 2 GiB limit");
  }
  // Offsets of each node's block when blocks are laid out in node order. If
  // the layout is blocked this is the output itself; otherwise a staging
  // buffer that the leaders reorder afterwards.
  std::vector<std::int64_t> node_offset(static_cast<std::size_t>(nodes) + 1, 0);
  for (int n = 0; n < nodes; ++n) {
    std::int64_t b = 0;
    for (int r : layout->members[static_cast<std::size_t>(n)]) {
      b += bytes_per_rank[static_cast<std::size_t>(r)];
    }
    node_offset[static_cast<std::size_t>(n) + 1] =
        node_offset[static_cast<std::size_t>(n)] + b;
  }
  std::uint8_t* blocks = static_cast<std::uint8_t*>(out);
  if (!layout->blocked && mpi.local_rank == 0) {
    if (staging_.size() < static_cast<std::size_t>(total)) {
      staging_.resize(static_cast<std::size_t>(total));
    }
    blocks = staging_.data();
  }
  const bool leader = mpi.local_rank == 0;
  const auto& members =
      layout->members[static_cast<std::size_t>(leader ? mpi.cross_rank : 0)];

  // 1. Gather the node's contributions at the leader, in local-rank order
  //    (its own block copied into place first: MPI_IN_PLACE at the root).
  if (leader) {
    const int node = mpi.cross_rank;
    counts_.assign(members.size(), 0);
    displs_.assign(members.size(), 0);
    std::int64_t at = node_offset[static_cast<std::size_t>(node)];
    for (std::size_t j = 0; j < members.size(); ++j) {
      counts_[j] = static_cast<int>(
          bytes_per_rank[static_cast<std::size_t>(members[j])]);
      displs_[j] = static_cast<int>(at);
      at += counts_[j];
    }
    if (bytes > 0)
      std::memcpy(blocks + displs_[0], in, static_cast<std::size_t>(bytes));
  }
  int rc = MPI_Gatherv(leader ? MPI_IN_PLACE : in, static_cast<int>(bytes),
                       MPI_BYTE, blocks, counts_.data(), displs_.data(),
                       MPI_BYTE, 0, mpi.local);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Gatherv", rc);

  // 2. Leaders exchange node blocks (the leaders' cross communicator holds
  //    one rank per node, node n at cross rank n).
  if (leader) {
    counts_.assign(static_cast<std::size_t>(nodes), 0);
    displs_.assign(static_cast<std::size_t>(nodes), 0);
    for (int n = 0; n < nodes; ++n) {
      const auto i = static_cast<std::size_t>(n);
      counts_[i] = static_cast<int>(node_offset[i + 1] - node_offset[i]);
      displs_[i] = static_cast<int>(node_offset[i]);
    }
    rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, blocks, counts_.data(),
                        displs_.data(), MPI_BYTE, mpi.cross);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Allgatherv", rc);
    if (!layout->blocked) {
      auto* o = static_cast<std::uint8_t*>(out);
      for (int n = 0; n < nodes; ++n) {
        std::int64_t at = node_offset[static_cast<std::size_t>(n)];
        for (int r : layout->members[static_cast<std::size_t>(n)]) {
          const auto i = static_cast<std::size_t>(r);
          if (bytes_per_rank[i] > 0) {
            std::memcpy(o + rank_offset[i], blocks + at,
                        static_cast<std::size_t>(bytes_per_rank[i]));
          }
          at += bytes_per_rank[i];
        }
      }
    }
  }

  // 3. The leader's complete output to the rest of the node.
  if (mpi.local_size > 1 && total > 0) {
    rc = MPI_Bcast(out, static_cast<int>(total), MPI_BYTE, 0, mpi.local);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast", rc);
  }
  return Status::Ok();
}

}  // namespace hvdtune::internal
