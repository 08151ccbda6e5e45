// `hvd-tune run`: Horovod's launcher flags turned into HOROVOD_* variables
// and one Open MPI mpirun command line that passes them to every rank.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hvdtune::cli {

struct LaunchOptions {
  int np = 0;
  /// "host:slots,host:slots" (Open MPI's -H).
  std::string hosts;
  /// Emulated nodes of this machine (tools/fake_node_rsh.sh); 0 = none.
  int fake_nodes = 0;
  bool autotune = false;
  std::string autotune_log_file;
  std::optional<int> autotune_warmup_samples;
  std::optional<int> autotune_steps_per_sample;
  std::optional<int> autotune_bayes_opt_max_samples;
  std::optional<double> autotune_gaussian_process_noise;
  std::optional<double> fusion_threshold_mb;
  std::optional<double> cycle_time_ms;
  std::optional<int> cache_capacity;
  bool hierarchical_allreduce = false;
  bool hierarchical_allgather = false;
  std::string timeline_filename;
  bool timeline_mark_cycles = false;
  std::optional<int> metrics_port;
  /// Where to write a Prometheus file_sd targets file listing every rank's
  /// metrics endpoint (empty: none).
  std::string prometheus_targets;
  std::string db;
  /// Extra mpirun arguments, split on spaces.
  std::string mpi_args;
  /// --gloo: the Gloo launcher (gloo_launcher.h) instead of mpirun.
  bool gloo = false;
  /// --network-interface: the interface of the ranks' Gloo traffic.
  std::string network_interface;
  std::vector<std::string> command;
};

/// What the launcher found out about the machine.
struct LaunchHost {
  bool root = false;
  int cores = 1;
  std::string mpirun = "mpirun";
  /// The rsh agent that emulates nodes.
  std::string fake_node_agent;
  /// Directory for the emulated nodes' hostfile and sandboxes.
  std::string fake_node_dir = "/tmp/hvdtune-fake-nodes";
  /// The launching environment ("NAME=value").
  std::vector<std::string> environ;
  /// This machine's host name (a target's host when the ranks bind every
  /// interface).
  std::string hostname = "localhost";
};

struct Launch {
  std::vector<std::string> argv;
  /// Variables set for every rank: (name, value, the flag that set it;
  /// empty for one forwarded from the environment). A variable of the
  /// launching environment, and the store location (--db: it may carry a
  /// password), reach the ranks by name (`-x NAME`): its value is never on
  /// a command line.
  struct Var {
    std::string name, value, flag;
    bool by_name = false;
  };
  std::vector<Var> vars;
  /// Set in mpirun's own environment before it runs (NAME, value): the
  /// flag-set variables passed by name.
  std::vector<std::pair<std::string, std::string>> environment;
  /// With fake nodes: the hostfile to write before running.
  std::string hostfile, hostfile_text;
  /// With --prometheus-targets: the file, its JSON text (one target group
  /// per host, label `node`), and the targets in rank order.
  std::string targets_file, targets_text;
  std::vector<std::string> targets;
};

/// Builds the mpirun command. Throws UsageError naming the flag at fault,
/// including a value the runtime would reject (checked with ParseConfig).
Launch BuildLaunch(const LaunchOptions& opt, const LaunchHost& host);

/// Writes launch.targets_text to launch.targets_file as Prometheus wants
/// it: a new file renamed over the old one. Throws Failure.
void WriteTargetsFile(const Launch& launch);

/// The facts of this machine and process.
LaunchHost ProbeLaunchHost();

/// `argv` as one shell-quoted line.
std::string ShellJoin(const std::vector<std::string>& argv);

/// The command as --dry-run and --verbose print it: `launch.environment`
/// as NAME=VALUE words before the argv, every store location's password
/// replaced by ***.
std::string DisplayCommand(const Launch& launch);

/// Where `text` holds a PostgreSQL URI's password (a user:PASSWORD@ part or
/// a password=PASSWORD parameter): (offset, length) pairs, in order.
std::vector<std::pair<std::size_t, std::size_t>> PasswordSpans(
    std::string_view text);

/// A config store location (or any text) with every password in a
/// PostgreSQL URI replaced by ***; anything else unchanged.
std::string RedactedLocation(const std::string& location);

/// Overwrites, in place, every URI password in argv[1..argc) with '*': what
/// /proc/PID/cmdline and ps show of this process from then on. The caller
/// copies its arguments first.
void MaskPasswordArguments(int argc, char** argv);

}  // namespace hvdtune::cli
