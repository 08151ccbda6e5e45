// `hvd-tune run`: Horovod's launcher flags turned into HOROVOD_* variables
// and one Open MPI mpirun command line that passes them to every rank.
#pragma once

#include <optional>
#include <string>
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
};

struct Launch {
  std::vector<std::string> argv;
  /// Variables set for every rank: (name, value, the flag that set it;
  /// empty for one forwarded from the environment).
  struct Var {
    std::string name, value, flag;
  };
  std::vector<Var> vars;
  /// With fake nodes: the hostfile to write before running.
  std::string hostfile, hostfile_text;
};

/// Builds the mpirun command. Throws UsageError naming the flag at fault,
/// including a value the runtime would reject (checked with ParseConfig).
Launch BuildLaunch(const LaunchOptions& opt, const LaunchHost& host);

/// The facts of this machine and process.
LaunchHost ProbeLaunchHost();

/// `argv` as one shell-quoted line.
std::string ShellJoin(const std::vector<std::string>& argv);

}  // namespace hvdtune::cli
