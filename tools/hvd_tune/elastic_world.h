// The elastic launcher's bookkeeping, free of processes and sockets: its
// workers, the blacklist, how the next world is composed from the workers
// and the discovered hosts, and the world's text in the rendezvous store
// (elastic_launcher.h lists the keys).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "elastic_discovery.h"
#include "elastic_launcher.h"

namespace hvdtune::cli {

using ElasticClock = std::chrono::steady_clock;

/// "hvd-tune run: elastic: <what>" on stderr.
void ElasticLog(const std::string& what);

/// Why a world replaced the one before: the label the ranks export as the
/// cause of their last reset (metrics, timeline) and the launcher logs.
enum class ResetCause {
  kStart,            // the job's first world
  kRankLost,         // a rank died or left its world after a failure
  kHostUnreachable,  // a host's ranks stopped answering (no heartbeat)
  kHostsAdded,
  kHostsRemoved,
  kHostsChanged,  // added and removed at once
};
/// "start", "rank_lost", "host_unreachable", "hosts_added",
/// "hosts_removed", "hosts_changed".
const char* ResetCauseName(ResetCause cause);

/// Checks the elastic flags against -np `np`; returns (--min-np, --max-np)
/// with their defaults (-np, no limit). Throws UsageError naming the flag.
std::pair<int, int> CheckElasticOptions(int np, const ElasticOptions& e);

/// A worker process the launcher started.
struct Worker {
  std::string id, host;
  pid_t pid = -1;
  /// Its rank in the newest world; -1 when not a member.
  int rank = -1;
  /// Being stopped by the launcher: its exit is expected.
  bool retired = false;
  /// When to signal it next (SIGTERM first, then SIGKILL every 3 s).
  std::optional<ElasticClock::time_point> kill_at;
  int signals = 0;
  /// Its last heartbeat value and when it changed (none before the first).
  std::string beat;
  std::optional<ElasticClock::time_point> beat_at;
};

/// Hosts whose workers failed, each until its cooldown ends.
class Blacklist {
 public:
  /// `cooldown_range`: {a, b}: a host comes back after a seconds, doubling
  /// with each failure up to b; empty: never.
  explicit Blacklist(std::vector<double> cooldown_range)
      : range_(std::move(cooldown_range)) {}
  /// Blacklists `host` (logged with `why`).
  void Add(const std::string& host, const std::string& why);
  bool Usable(const std::string& host) const;

 private:
  struct Entry {
    int failures = 0;
    ElasticClock::time_point until;
  };
  std::vector<double> range_;
  std::map<std::string, Entry> hosts_;
};

/// A rank of the next world: a running worker or one to start (`fresh`,
/// no id yet).
struct Member {
  std::string id, host;
  bool fresh = false;
};

/// The next world: the live members of the current one on usable hosts (in
/// rank order, grouped by host so that rank 0 stays a survivor), then new
/// workers on free slots, up to max_np. Empty when fewer than min_np.
std::vector<Member> ComposeWorld(const std::map<pid_t, Worker>& workers,
                                 const Hosts& discovered,
                                 const Blacklist& blacklist, int min_np,
                                 int max_np);

/// A member's place in its world (Horovod's rank variables).
struct Placement {
  int rank = 0, size = 0;
  int local_rank = 0, local_size = 0;
  int cross_rank = 0, cross_size = 0;
};

/// Where every member of `members` stands, in rank order.
std::vector<Placement> PlaceWorld(const std::vector<Member>& members);

/// World `version`'s text in the store: "world <v> updates <n> cause <c>",
/// then "<id> <rank> <size> <local_rank> <local_size> <cross_rank>
/// <cross_size> <host>" per rank.
std::string WorldText(int version, int hosts_updates, ResetCause cause,
                      const std::vector<Member>& members,
                      const std::vector<Placement>& places);

/// "host:ranks,..." in the order the hosts first appear among `members`.
std::string WorldLayout(const std::vector<Member>& members);

/// What the ranks must hear at their next commit: hosts added (free usable
/// slots while `can_grow`), removed (a member's host no longer
/// discovered), both (kHostsChanged), or nothing.
std::optional<ResetCause> HostsChange(const std::map<pid_t, Worker>& workers,
                                      const Hosts& discovered,
                                      const Blacklist& blacklist,
                                      bool can_grow);

/// Where a new worker finds the launcher, and the job's elastic settings.
struct WorldEndpoint {
  std::string rendezvous_addr;
  int rendezvous_port = 0;
  std::string iface;
  double elastic_timeout = 600;
  bool heartbeat = true;
};

/// The variables of a worker started as `m` at `p` in world `version`
/// (Horovod's rank variables, the Gloo engine's, the elastic layer's).
std::vector<std::pair<std::string, std::string>> WorkerVariables(
    const Member& m, const Placement& p, int version,
    const WorldEndpoint& where);

}  // namespace hvdtune::cli
