// `hvd-tune run --host-discovery-script S`: elastic training on the Gloo
// engine (horovodrun's elastic mode). The launcher runs the discovery
// script every second (elastic_discovery.h), forms worlds of the workers on
// the discovered hosts (elastic_world.h), publishes each world in the
// rendezvous store, starts workers on new slots, blacklists hosts whose
// workers fail or fall silent, and ends the job with an error when fewer
// than --min-np slots stay available for HOROVOD_ELASTIC_TIMEOUT seconds
// (docs/elastic.md).
//
// Store keys it uses besides the engine's (all additive):
//   elastic/current               the newest world's version
//   elastic/world/<v>             world v: a header line
//                                 "world <v> updates <n> cause <c>", then
//                                 one line per rank: "<id> <rank> <size>
//                                 <local_rank> <local_size> <cross_rank>
//                                 <cross_size> <host>"; or "abort <why>"
//                                 when the job ends
//   elastic/arrived/<v>/<id>      set by worker <id> when it reached world
//                                 v; the ranks connect once all arrived (a
//                                 worker not arrived within the start
//                                 timeout fails its host)
//   elastic/ready/<v>/<id>        set by worker <id> once it left world v
//                                 (after a failure or a hosts update)
//   elastic/alive/<id>            worker <id>'s heartbeat, a count it
//                                 raises every 0.5 s ("exit" once it
//                                 ends by itself); silent past
//                                 HVDTUNE_ELASTIC_HEARTBEAT_SECONDS, its
//                                 host counts as failed
//   elastic/hosts_updated         "<n> <added|removed|mixed>": the hosts
//                                 changed; ranks see it at their next commit
//   elastic/<v>/hvdtune/lost/<r>  rank r of world v died or is unreachable
//                                 (the engine names it in the survivors'
//                                 errors; ranks still connecting leave)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher.h"

namespace hvdtune::cli {

struct ElasticOptions {
  /// --host-discovery-script: prints "host" or "host:slots" lines.
  std::string discovery_script;
  /// --min-np (default -np), --max-np (default: every discovered slot).
  std::optional<int> min_np, max_np;
  /// --slots: the slots of a host printed without a count.
  int slots = 1;
  /// --reset-limit: the most resets the job may take (default: no limit).
  std::optional<int> reset_limit;
  /// --blacklist-cooldown-range a b: a failed host comes back after a
  /// cooldown of a seconds, doubling with every failure up to b; empty:
  /// it never comes back.
  std::vector<double> cooldown_range;
  /// --start-timeout (else HOROVOD_START_TIMEOUT, else 30): seconds a
  /// world's ranks have to reach it (a new rank: its script's hvd.init());
  /// a host with a rank not there by then fails.
  std::optional<double> start_timeout;
};

/// Runs the elastic job; kExitOk when the final world's ranks all exit 0.
/// Throws UsageError for bad flags, Failure when the job fails (below
/// --min-np past HOROVOD_ELASTIC_TIMEOUT, the reset limit, a failure after
/// a rank finished).
int RunElasticLaunch(const LaunchOptions& opt, const ElasticOptions& elastic,
                     bool dry_run, bool verbose);

}  // namespace hvdtune::cli
