// `hvd-tune run --gloo`: Horovod's Gloo launcher. It serves the rendezvous
// store (hvdtune/rendezvous.h), starts every rank itself (this machine:
// fork/exec; another host: through the rsh agent, ssh by default) with the
// variables a Gloo rank reads (HOROVOD_RANK, HOROVOD_SIZE, the local and
// cross ranks, HOROVOD_HOSTNAME, HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT,
// HOROVOD_GLOO_IFACE, HOROVOD_CONTROLLER=gloo, HOROVOD_CPU_OPERATIONS=gloo)
// plus the job's HOROVOD_* settings, and waits for them. No mpirun.
#pragma once

#include <string>
#include <vector>

#include "launcher.h"

namespace hvdtune::cli {

/// Where each rank runs and what it is told.
struct GlooRankPlan {
  std::string host;
  /// Run through the rsh agent (another host) rather than fork/exec.
  bool remote = false;
  /// NAME=value, the job's settings and the rank's own.
  std::vector<std::string> env;
};

struct GlooPlan {
  std::string rendezvous_addr;
  std::vector<GlooRankPlan> ranks;
  /// The rsh agent for remote ranks ($HVDTUNE_RSH_AGENT, else
  /// $OMPI_MCA_plm_rsh_agent, else ssh).
  std::string agent = "ssh";
};

/// Places -np ranks on the -H hosts (by slot, in order; default: this
/// machine) and builds every rank's environment, the rendezvous port left
/// to the caller (HOROVOD_GLOO_RENDEZVOUS_PORT is added at launch). Throws
/// UsageError naming the flag at fault.
GlooPlan BuildGlooPlan(const LaunchOptions& opt, const Launch& settings);

/// This machine's host name ("localhost" when it has none).
std::string ThisHost();
/// Whether `host` names this machine (localhost, 127.0.0.1, its name):
/// its ranks are fork/exec'd rather than started through the agent.
bool IsLocal(const std::string& host);
/// A wait status in words ("exited with status 1", "killed by signal 9").
std::string Describe(int status);
/// In a child of fork(): runs `command` as `rank` (exec here with its
/// environment, or through the plan's agent on its host). Never returns.
[[noreturn]] void ExecRank(const GlooPlan& plan, const GlooRankPlan& rank,
                           const std::vector<std::string>& command);

/// Serves the store, starts the ranks and waits for them: kExitOk when
/// every rank exits 0. A rank that dies is marked lost in the store (the
/// others name it in their errors); the others get
/// HOROVOD_GLOO_TIMEOUT_SECONDS + 5 s to end by themselves before they are
/// terminated. Throws Failure naming the ranks that failed.
int RunGlooLaunch(const LaunchOptions& opt, bool dry_run, bool verbose);

}  // namespace hvdtune::cli
