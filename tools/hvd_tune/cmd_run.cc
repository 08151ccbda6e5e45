// hvd-tune run: the launcher (horovodrun's flag names where it has them).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "commands.h"
#include "common.h"
#include "elastic_launcher.h"
#include "gloo_launcher.h"
#include "launcher.h"

namespace hvdtune::cli {
namespace {

struct RunOptions {
  LaunchOptions launch;
  ElasticOptions elastic;
  bool dry_run = false;
  bool verbose = false;
};

int RunLaunch(const RunOptions& opt) {
  const ElasticOptions& e = opt.elastic;
  if (!e.discovery_script.empty() || e.min_np || e.max_np || e.reset_limit ||
      !e.cooldown_range.empty() || e.start_timeout) {
    return RunElasticLaunch(opt.launch, e, opt.dry_run, opt.verbose);
  }
  if (opt.launch.gloo) {
    return RunGlooLaunch(opt.launch, opt.dry_run, opt.verbose);
  }
  const Launch launch = BuildLaunch(opt.launch, ProbeLaunchHost());
  if (opt.dry_run || opt.verbose) {
    if (!launch.hostfile.empty()) {
      std::string lines = launch.hostfile_text;
      if (!lines.empty() && lines.back() == '\n') lines.pop_back();
      for (std::size_t p; (p = lines.find('\n')) != std::string::npos;) {
        lines.replace(p, 1, ", ");
      }
      fmt::print("# hostfile {}: {}\n", launch.hostfile, lines);
    }
    if (!launch.targets_file.empty()) {
      fmt::print("# prometheus targets {}: {}\n", launch.targets_file,
                 fmt::join(launch.targets, ", "));
    }
    fmt::print("{}\n", DisplayCommand(launch));
    std::fflush(stdout);
    if (opt.dry_run) return kExitOk;
  }
  if (!launch.hostfile.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(
        std::filesystem::path(launch.hostfile).parent_path(), ec);
    std::ofstream(launch.hostfile) << launch.hostfile_text;
    if (!std::filesystem::exists(launch.hostfile)) {
      throw Failure("cannot write hostfile " + launch.hostfile);
    }
  }
  // Prometheus picks the file up while the job runs; gone with the job.
  if (!launch.targets_file.empty()) WriteTargetsFile(launch);
  std::vector<char*> argv;
  for (const std::string& a : launch.argv) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  // What goes to the ranks by name (-x NAME) is in mpirun's environment,
  // inherited from this one, never on its command line.
  for (const auto& [name, value] : launch.environment) {
    setenv(name.c_str(), value.c_str(), 1);
  }
  const pid_t pid = fork();
  if (pid < 0) throw Failure(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    execvp(argv[0], argv.data());
    fmt::print(stderr, "hvd-tune run: cannot run {}: {}\n", argv[0],
               std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::error_code ec;
  if (!launch.hostfile.empty()) std::filesystem::remove(launch.hostfile, ec);
  if (!launch.targets_file.empty()) {
    std::filesystem::remove(launch.targets_file, ec);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return kExitOk;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    throw Failure(launch.argv[0] +
                  ": not found (install Open MPI's mpirun, or set "
                  "HVDTUNE_MPIRUN)");
  }
  throw Failure(
      "the job failed: " + launch.argv[0] +
      (WIFEXITED(status)
           ? " exited with status " + std::to_string(WEXITSTATUS(status))
           : " was killed by signal " + std::to_string(WTERMSIG(status))));
}

}  // namespace

Command AddRunCommand(CLI::App& app) {
  auto opt = std::make_shared<RunOptions>();
  LaunchOptions& l = opt->launch;
  auto* sub = app.add_subcommand(
      "run",
      "launch a job on N ranks with Open MPI's mpirun, its HOROVOD_* "
      "settings passed to every rank (like horovodrun)");
  sub->add_option("-n,--np,--num-proc", l.np, "number of ranks (-np works too)")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("-H,--hosts", l.hosts,
                  "hosts and their slots: host1:2,host2:2 (default: this "
                  "machine)");
  sub->add_option("--fake-nodes", l.fake_nodes,
                  "run on K emulated nodes of this machine (shared memory "
                  "inside a node, TCP between nodes)")
      ->check(CLI::Range(1, 1024));
  sub->add_flag("--autotune", l.autotune, "HOROVOD_AUTOTUNE=1");
  sub->add_option("--autotune-log-file", l.autotune_log_file,
                  "HOROVOD_AUTOTUNE_LOG: CSV of every autotune sample");
  sub->add_option("--autotune-warmup-samples", l.autotune_warmup_samples,
                  "HOROVOD_AUTOTUNE_WARMUP_SAMPLES");
  sub->add_option("--autotune-steps-per-sample", l.autotune_steps_per_sample,
                  "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE");
  sub->add_option("--autotune-bayes-opt-max-samples",
                  l.autotune_bayes_opt_max_samples,
                  "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES");
  sub->add_option("--autotune-gaussian-process-noise",
                  l.autotune_gaussian_process_noise,
                  "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE");
  sub->add_option("--fusion-threshold-mb", l.fusion_threshold_mb,
                  "HOROVOD_FUSION_THRESHOLD in MiB (pins the knob)");
  sub->add_option("--cycle-time-ms", l.cycle_time_ms,
                  "HOROVOD_CYCLE_TIME in ms (pins the knob)");
  sub->add_option("--cache-capacity", l.cache_capacity,
                  "HOROVOD_CACHE_CAPACITY (pins the knob)");
  sub->add_flag("--hierarchical-allreduce", l.hierarchical_allreduce,
                "HOROVOD_HIERARCHICAL_ALLREDUCE=1");
  sub->add_flag("--hierarchical-allgather", l.hierarchical_allgather,
                "HOROVOD_HIERARCHICAL_ALLGATHER=1");
  sub->add_option("--timeline-filename", l.timeline_filename,
                  "HOROVOD_TIMELINE: Chrome-trace file written by rank 0");
  sub->add_flag("--timeline-mark-cycles", l.timeline_mark_cycles,
                "HOROVOD_TIMELINE_MARK_CYCLES=1");
  sub->add_option("--metrics-port", l.metrics_port,
                  "HOROVOD_METRICS_PORT: /metrics on this port + local rank "
                  "(0: any free port)");
  sub->add_option("--prometheus-targets", l.prometheus_targets,
                  "while the job runs, a Prometheus file_sd targets file "
                  "(JSON) listing every rank's metrics endpoint (needs a "
                  "base port > 0)");
  AddDbOption(*sub, l.db);
  sub->add_option("--mpi-args", l.mpi_args,
                  "extra mpirun arguments, in one string");
  sub->add_flag("--gloo", l.gloo,
                "run on the Gloo engine: serve the rendezvous store and start "
                "the ranks without mpirun (like horovodrun --gloo)");
  sub->add_option("--network-interface", l.network_interface,
                  "with --gloo: the network interface of the ranks' traffic "
                  "(HOROVOD_GLOO_IFACE; default: lo on one machine)");
  ElasticOptions& e = opt->elastic;
  sub->add_option("--host-discovery-script", e.discovery_script,
                  "elastic training (on Gloo): a program printing the "
                  "available hosts, one host or host:slots a line; run every "
                  "second (docs/elastic.md)");
  sub->add_option("--min-np", e.min_np,
                  "elastic: the fewest ranks the job runs on (default -np); "
                  "below it the job waits up to HOROVOD_ELASTIC_TIMEOUT s")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-np", e.max_np,
                  "elastic: the most ranks (default: every discovered slot)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--slots,--slots-per-host", e.slots,
                  "elastic: slots of a host the script prints without a "
                  "count (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--reset-limit", e.reset_limit,
                  "elastic: the most resets before the job fails")
      ->check(CLI::Range(0, 1 << 30));
  sub->add_option("--blacklist-cooldown-range", e.cooldown_range,
                  "elastic: MIN MAX seconds: a failed host may come back "
                  "after MIN s, doubling per failure up to MAX (default: "
                  "never)")
      ->expected(2);
  sub->add_option("--start-timeout", e.start_timeout,
                  "elastic: seconds a world's ranks have to reach it (a new "
                  "rank: its hvd.init()); a host with a rank not there by "
                  "then fails (default HOROVOD_START_TIMEOUT, else 30)");
  sub->add_flag("--dry-run", opt->dry_run,
                "print the mpirun command instead of running it");
  sub->add_flag("--verbose", opt->verbose,
                "print the mpirun command, then run it");
  sub->add_option("command", l.command,
                  "the program and its arguments (after --)")
      ->required();
  return {sub, [opt] { return RunLaunch(*opt); }};
}

}  // namespace hvdtune::cli
