// The NCCL backend's bootstrap on the Gloo engine: the ranks agree over the
// world's Gloo context, and each communicator's unique id travels from its
// group's rank 0 through the rendezvous store (no MPI anywhere).
#pragma once

#include "core/backends/nccl/nccl_bootstrap.h"
#include "core/engine/gloo/gloo_context.h"

namespace hvdtune::internal {

class GlooNcclBootstrap final : public NcclBootstrap {
 public:
  /// Over `groups` after SplitNodes (it must outlive this).
  explicit GlooNcclBootstrap(GlooGroups& groups) : groups_(groups) {}

  Place place(Group group) const override;
  Status Agree(const Status& local) override;
  /// Through the store: the group's rank 0 sets a key that its other ranks
  /// get (waiting up to HOROVOD_GLOO_TIMEOUT_SECONDS).
  Status Broadcast(Group group, void* data, std::size_t bytes) override;
  Status UniformNodes(bool* uniform) override;

 private:
  GlooGroups& groups_;
};

}  // namespace hvdtune::internal
