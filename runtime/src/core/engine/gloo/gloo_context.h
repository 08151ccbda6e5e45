// The Gloo engine's groups: the world, local and cross gloo::Contexts, all
// connected through the rendezvous store, in this one place (so that a
// later change of world rebuilds them here). Every gloo call goes through
// Guard(), which turns Gloo's exceptions into an error Status naming the
// ranks the launcher saw die: nothing Gloo throws crosses this boundary.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/gloo/rendezvous_client.h"
#include "core/engine/gloo/socket_mesh.h"

namespace hvdtune::internal {

class GlooGroups {
 public:
  /// Connects the world of `ranks` (launched ranks, ascending; empty: all)
  /// through the store. Gloo's event-loop thread (named hvdtune-gloo) gets
  /// a scheduler time slice of `loop_slice_us` microseconds (0: the
  /// kernel's), as the cycle thread does. Throws ConfigError.
  GlooGroups(const GlooSettings& settings, const std::vector<int>& ranks,
             int loop_slice_us);
  ~GlooGroups();

  const World& world() const { return world_; }
  const std::shared_ptr<gloo::Context>& all() const { return all_; }
  /// Null where the group would be this rank alone.
  const std::shared_ptr<gloo::Context>& local() const { return local_; }
  const std::shared_ptr<gloo::Context>& cross() const { return cross_; }
  /// The engine's own connections among the cross context's ranks
  /// (socket_mesh.h; SplitNodes makes them with the cross context). Null
  /// where there is no cross context.
  const SocketMesh* cross_mesh() const { return cross_mesh_.get(); }
  /// Cross rank c's world rank (SplitNodes; empty before).
  const std::vector<int>& cross_world_ranks() const {
    return cross_world_ranks_;
  }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// How many nodes the world spans (SplitNodes; 1 before).
  int nodes() const { return nodes_; }
  /// This rank's node, numbered as SplitNodes was given them (0 before).
  int node() const { return node_; }

  /// Collective over the ranks that share `group` (a name they agree on,
  /// such as "local1"): the root's `*blob` to the others through the
  /// rendezvous store, under a key of this world, the group and how many
  /// shares of that group came before (no wait for ranks outside it).
  /// Throws what the store throws (a get that times out names its key).
  void ShareThroughStore(const std::string& group, bool root,
                         std::vector<char>* blob);

  /// Makes the local and cross contexts, and the cross context's
  /// SocketMesh (collective). node_of[r] is rank
  /// r's node; ranks of a node in rank order, nodes numbered by their
  /// first rank. Throws ConfigError.
  void SplitNodes(const std::vector<int>& node_of);

  /// Runs `call` (gloo calls), catching everything: an error Status saying
  /// `what` failed, why, and which ranks the launcher saw die.
  Status Guard(const char* what, const std::function<void()>& call) const;
  /// "; lost: rank 2 (killed by signal 9)", or "" when none is known.
  std::string DescribeLost() const;

 private:
  /// The one place contexts are made: `group`-scoped keys in the store.
  std::shared_ptr<gloo::Context> Connect(const std::string& group, int rank,
                                         int size);

  GlooSettings settings_;
  /// Launched ranks of this world (world rank -> launched rank).
  std::vector<int> launched_;
  /// Store keys of this world's contexts start with it.
  std::string prefix_;
  World world_;
  int nodes_ = 1;
  int node_ = 0;
  std::vector<int> cross_world_ranks_;
  /// Shares so far per group name (ShareThroughStore's keys).
  std::map<std::string, int> shares_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<RendezvousClient> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> all_, local_, cross_;
  std::unique_ptr<SocketMesh> cross_mesh_;
};

}  // namespace hvdtune::internal
