// The elastic launcher's host discovery: the --host-discovery-script's
// output format and a runner that starts the script every second without
// blocking the launcher's loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace hvdtune::cli {

/// Discovered hosts and their slots, in the order the script printed them.
using Hosts = std::vector<std::pair<std::string, int>>;

/// A discovery script's output: (host, slots) in order. Throws Failure
/// naming the line at fault.
Hosts ParseDiscoveryOutput(const std::string& text, int default_slots);

/// "host:slots,host:slots"; `none` when there are no hosts.
std::string JoinHosts(const Hosts& hosts, const std::string& none = "");

/// Runs `sh -c script` every second. The first run (RunOnce) blocks and
/// throws Failure when the script fails; later runs are polled from the
/// launcher's loop, and a failing or malformed run keeps the hosts as they
/// were (logged).
class HostDiscovery {
 public:
  HostDiscovery(std::string script, int default_slots);
  ~HostDiscovery();
  HostDiscovery(const HostDiscovery&) = delete;
  HostDiscovery& operator=(const HostDiscovery&) = delete;

  /// Runs the script to its end; its hosts become hosts().
  const Hosts& RunOnce();
  /// Starts the next run when it is due and reads what a run printed so
  /// far; stops a run that takes more than 30 s.
  void Poll();
  /// The script's process, while a run is in flight (the launcher reaps
  /// every child with waitpid(-1) and hands this one to Ended()).
  pid_t pid() const { return pid_; }
  /// The run that was pid() ended with `status`.
  void Ended(int status);
  /// Stops a run in flight (the job ends).
  void Stop();
  const Hosts& hosts() const { return hosts_; }

 private:
  using Clock = std::chrono::steady_clock;
  void Start();
  void Drain();

  std::string script_;
  int default_slots_;
  Hosts hosts_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
  Clock::time_point started_, next_;
};

}  // namespace hvdtune::cli
