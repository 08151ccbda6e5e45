#include "core/algorithms/node_layout.h"

#include <algorithm>

namespace hvdtune::internal {

Status NodeLayout::Build(const MpiContext& mpi, NodeLayout* out) {
  // A node is named by its leader's cross rank: the leaders' cross
  // communicator holds exactly one rank per node.
  int node = mpi.local_rank == 0 ? mpi.cross_rank : 0;
  int rc = MPI_Bcast(&node, 1, MPI_INT, 0, mpi.local);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Bcast (node layout)", rc);
  const int mine[2] = {node, mpi.local_rank};
  std::vector<int> all(2 * static_cast<std::size_t>(mpi.size));
  rc = MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, mpi.data);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Allgather (node layout)", rc);
  NodeLayout layout;
  layout.num_nodes = 0;
  for (int r = 0; r < mpi.size; ++r) {
    layout.num_nodes = std::max(layout.num_nodes, all[2 * r] + 1);
  }
  layout.members.assign(static_cast<std::size_t>(layout.num_nodes), {});
  for (int r = 0; r < mpi.size; ++r) {
    auto& m = layout.members[static_cast<std::size_t>(all[2 * r])];
    const auto lr = static_cast<std::size_t>(all[2 * r + 1]);
    if (m.size() <= lr) m.resize(lr + 1, -1);
    m[lr] = r;
  }
  int next = 0;
  for (const auto& m : layout.members) {
    if (m.size() != layout.members.front().size()) layout.uniform = false;
    for (int r : m) {
      if (r != next++) layout.blocked = false;
    }
  }
  *out = std::move(layout);
  return Status::Ok();
}

Status NodeLayoutCache::Get(const MpiContext& mpi, const NodeLayout** layout) {
  if (!layout_ || data_ != mpi.data || local_ != mpi.local) {
    NodeLayout fresh;
    Status s = NodeLayout::Build(mpi, &fresh);
    if (!s.ok()) return s;
    layout_ = std::move(fresh);
    data_ = mpi.data;
    local_ = mpi.local;
  }
  *layout = &*layout_;
  return Status::Ok();
}

}  // namespace hvdtune::internal
