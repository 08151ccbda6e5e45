#include "launcher.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <thread>

#include "common.h"
#include "hvdtune/config.h"
#include "hvdtune/status.h"
#include "hvdtune/store/store.h"

extern char** environ;

// HVDTUNE_FAKE_NODE_AGENT_SOURCE and HVDTUNE_FAKE_NODE_AGENT_INSTALLED come
// from tools/hvd_tune/CMakeLists.txt.

namespace hvdtune::cli {
namespace {

bool Tuning(const std::string& name) {
  return name.starts_with("HOROVOD_") || name.starts_with("HVDTUNE_");
}

// Sums the slots of "host:slots,host" (a host without a count is 1 slot).
int SlotsOf(const std::string& hosts) {
  int total = 0;
  std::stringstream in(hosts);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty())
      throw UsageError("-H: empty host name in '" + hosts + "'");
    const auto colon = item.find(':');
    if (colon == std::string::npos) {
      ++total;
      continue;
    }
    const std::string count = item.substr(colon + 1);
    char* end = nullptr;
    const long n = std::strtol(count.c_str(), &end, 10);
    if (colon == 0 || count.empty() || *end != '\0' || n < 1 || n > 1 << 20) {
      throw UsageError("-H: bad entry '" + item +
                       "' (expected host or host:slots)");
    }
    total += static_cast<int>(n);
  }
  return total;
}

// (host, ranks on it) in the order Open MPI's default by-slot mapping fills
// them: every slot of the first host, then the next.
std::vector<std::pair<std::string, int>> RanksPerHost(const std::string& hosts,
                                                      int np) {
  std::vector<std::pair<std::string, int>> out;
  std::stringstream in(hosts);
  int left = np;
  for (std::string item; left > 0 && std::getline(in, item, ',');) {
    const auto colon = item.find(':');
    const int slots =
        colon == std::string::npos ? 1 : std::stoi(item.substr(colon + 1));
    const int here = std::min(slots, left);
    out.emplace_back(item.substr(0, colon), here);
    left -= here;
  }
  return out;
}

bool Loopback(const std::string& address) {
  return address.starts_with("127.") || address == "::1" ||
         address == "localhost";
}

// The targets file: every rank's endpoint, base port + local rank, as one
// target group per host. Throws UsageError where they cannot be known.
void PlanTargets(const LaunchOptions& opt, const LaunchHost& host,
                 const TelemetrySettings& telemetry, Launch& launch) {
  const std::string flag = "--prometheus-targets: ";
  if (telemetry.metrics_port <= 0) {
    throw UsageError(
        flag +
        "needs a fixed base port (--metrics-port or "
        "HOROVOD_METRICS_PORT greater than 0): with " +
        (telemetry.metrics_port == 0 ? "0 (any free port)" : "none") +
        " no endpoint can be listed");
  }
  if (opt.fake_nodes > 0) {
    throw UsageError(flag +
                     "emulated nodes share this machine's address, so their "
                     "ranks' ports would collide; use it with -H or on one "
                     "machine");
  }
  const std::string& bind = telemetry.metrics_address;
  const bool every = bind == "0.0.0.0" || bind == "::";
  std::vector<std::pair<std::string, int>> groups;
  if (opt.hosts.empty()) {
    groups.emplace_back(every ? host.hostname : bind, opt.np);
  } else {
    groups = RanksPerHost(opt.hosts, opt.np);
    int listed = 0;
    for (const auto& g : groups) listed += g.second;
    if (listed < opt.np) {
      throw UsageError(flag + "-H has slots for " + std::to_string(listed) +
                       " ranks, not " + std::to_string(opt.np) +
                       ": which host runs the rest is Open MPI's choice");
    }
    for (auto& [name, n] : groups) {
      if (every) continue;
      if (!Loopback(name)) {
        throw UsageError(
            flag + "the ranks on " + name + " would bind " + bind +
            " (HVDTUNE_METRICS_ADDRESS), which Prometheus cannot reach "
            "from elsewhere: set HVDTUNE_METRICS_ADDRESS=0.0.0.0");
      }
      name = bind;
    }
  }
  Json doc = Json::array();
  for (const auto& [name, n] : groups) {
    const std::string at =
        name.find(':') != std::string::npos ? "[" + name + "]" : name;
    Json targets = Json::array();
    for (int local = 0; local < n; ++local) {
      launch.targets.push_back(at + ":" +
                               std::to_string(telemetry.metrics_port + local));
      targets.push_back(launch.targets.back());
    }
    doc.push_back({{"targets", targets}, {"labels", {{"node", name}}}});
  }
  launch.targets_file = opt.prometheus_targets;
  launch.targets_text = doc.dump(2) + "\n";
}

}  // namespace

void WriteTargetsFile(const Launch& launch) {
  const std::filesystem::path file = launch.targets_file;
  const std::filesystem::path tmp =
      file.string() + ".tmp." + std::to_string(getpid());
  std::error_code ec;
  if (file.has_parent_path()) {
    std::filesystem::create_directories(file.parent_path(), ec);
  }
  {
    std::ofstream out(tmp);
    out << launch.targets_text;
    if (!out.flush()) {
      throw Failure("cannot write the Prometheus targets file " + tmp.string());
    }
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw Failure("cannot write the Prometheus targets file " + file.string() +
                  ": " + ec.message());
  }
}

LaunchHost ProbeLaunchHost() {
  LaunchHost host;
  host.root = geteuid() == 0;
  host.cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* m = std::getenv("HVDTUNE_MPIRUN"); m && *m) host.mpirun = m;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path installed = HVDTUNE_FAKE_NODE_AGENT_INSTALLED;
  const auto beside = exe.parent_path().parent_path() / "libexec" / "hvdtune" /
                      "fake_node_rsh.sh";
  if (!ec && std::filesystem::exists(beside)) {
    host.fake_node_agent = beside.string();
  } else if (std::filesystem::exists(installed)) {
    host.fake_node_agent = installed.string();
  } else {
    host.fake_node_agent = HVDTUNE_FAKE_NODE_AGENT_SOURCE;
  }
  if (const char* d = std::getenv("HVDTUNE_FAKE_NODE_DIR"); d && *d) {
    host.fake_node_dir = d;
  }
  for (char** e = environ; e && *e; ++e) host.environ.emplace_back(*e);
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0 && name[0]) host.hostname = name;
  return host;
}

Launch BuildLaunch(const LaunchOptions& opt, const LaunchHost& host) {
  if (opt.command.empty()) {
    throw UsageError("COMMAND: missing (hvd-tune run -np N -- COMMAND ...)");
  }
  if (opt.np < 1) throw UsageError("-np: must be at least 1");
  if (opt.fake_nodes > 0 && !opt.hosts.empty()) {
    throw UsageError("--fake-nodes: cannot be combined with -H");
  }
  if (opt.fake_nodes > opt.np) {
    throw UsageError("--fake-nodes: " + std::to_string(opt.fake_nodes) +
                     " nodes need at least as many ranks (-np " +
                     std::to_string(opt.np) + ")");
  }
  Launch launch;
  auto set = [&](const std::string& name, const std::string& value,
                 const std::string& flag) {
    launch.vars.push_back({name, value, flag});
  };
  auto number = [](double v) { return ExactNumber(v); };
  if (opt.autotune) set("HOROVOD_AUTOTUNE", "1", "--autotune");
  if (!opt.autotune_log_file.empty()) {
    set("HOROVOD_AUTOTUNE_LOG", opt.autotune_log_file, "--autotune-log-file");
  }
  if (opt.autotune_warmup_samples) {
    set("HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
        std::to_string(*opt.autotune_warmup_samples),
        "--autotune-warmup-samples");
  }
  if (opt.autotune_steps_per_sample) {
    set("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
        std::to_string(*opt.autotune_steps_per_sample),
        "--autotune-steps-per-sample");
  }
  if (opt.autotune_bayes_opt_max_samples) {
    set("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
        std::to_string(*opt.autotune_bayes_opt_max_samples),
        "--autotune-bayes-opt-max-samples");
  }
  if (opt.autotune_gaussian_process_noise) {
    set("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
        number(*opt.autotune_gaussian_process_noise),
        "--autotune-gaussian-process-noise");
  }
  if (opt.fusion_threshold_mb) {
    const double bytes = *opt.fusion_threshold_mb * 1024 * 1024;
    if (!(bytes >= 0) || bytes != std::floor(bytes) || bytes > 1e18) {
      throw UsageError(
          "--fusion-threshold-mb: " + number(*opt.fusion_threshold_mb) +
          " MiB is not a whole number of bytes >= 0");
    }
    set("HOROVOD_FUSION_THRESHOLD",
        std::to_string(static_cast<std::int64_t>(bytes)),
        "--fusion-threshold-mb");
  }
  if (opt.cycle_time_ms) {
    set("HOROVOD_CYCLE_TIME", number(*opt.cycle_time_ms), "--cycle-time-ms");
  }
  if (opt.cache_capacity) {
    set("HOROVOD_CACHE_CAPACITY", std::to_string(*opt.cache_capacity),
        "--cache-capacity");
  }
  if (opt.hierarchical_allreduce) {
    set("HOROVOD_HIERARCHICAL_ALLREDUCE", "1", "--hierarchical-allreduce");
  }
  if (opt.hierarchical_allgather) {
    set("HOROVOD_HIERARCHICAL_ALLGATHER", "1", "--hierarchical-allgather");
  }
  if (!opt.timeline_filename.empty()) {
    set("HOROVOD_TIMELINE", opt.timeline_filename, "--timeline-filename");
  }
  if (opt.timeline_mark_cycles) {
    set("HOROVOD_TIMELINE_MARK_CYCLES", "1", "--timeline-mark-cycles");
  }
  if (opt.metrics_port) {
    set("HOROVOD_METRICS_PORT", std::to_string(*opt.metrics_port),
        "--metrics-port");
  }
  if (!opt.db.empty()) {
    set("HOROVOD_AUTOTUNE_DB", opt.db, "--db");
    launch.vars.back().by_name = true;
    launch.environment.emplace_back("HOROVOD_AUTOTUNE_DB", opt.db);
  }

  // The launching environment's own settings travel too (a flag wins).
  std::map<std::string, std::string> env;
  for (const std::string& kv : host.environ) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::map<std::string, std::string> flags;
  for (const Launch::Var& v : launch.vars) flags[v.name] = v.flag;
  for (const auto& [name, value] : env) {
    if (Tuning(name) && flags.count(name) == 0) {
      set(name, value, "");
      launch.vars.back().by_name = true;
    }
  }
  // Every rank would refuse a bad value at init: say so now, naming the
  // flag (or the variable) instead.
  std::map<std::string, std::string> merged = env;
  for (const Launch::Var& v : launch.vars) merged[v.name] = v.value;
  RuntimeConfig parsed;
  try {
    parsed =
        ParseConfig([&](std::string_view name) -> std::optional<std::string> {
          const auto it = merged.find(std::string(name));
          if (it == merged.end()) return std::nullopt;
          return it->second;
        });
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    for (const auto& [name, flag] : flags) {
      if (what.find(name) != std::string::npos) {
        throw UsageError(flag + ": " + what);
      }
    }
    throw UsageError("environment: " + what);
  }
  if (!opt.prometheus_targets.empty()) {
    PlanTargets(opt, host, parsed.telemetry, launch);
  }

  std::vector<std::string>& a = launch.argv;
  a.push_back(host.mpirun);
  if (host.root) a.push_back("--allow-run-as-root");
  const int slots = opt.hosts.empty() ? host.cores : SlotsOf(opt.hosts);
  if (opt.fake_nodes > 0) {
    const int per_node = (opt.np + opt.fake_nodes - 1) / opt.fake_nodes;
    launch.hostfile =
        host.fake_node_dir + "/hostfile." + std::to_string(getpid());
    for (int n = 0; n < opt.fake_nodes; ++n) {
      launch.hostfile_text += "node" + std::to_string(n) +
                              " slots=" + std::to_string(per_node) + "\n";
    }
    // Every fake host has enough slots, so Open MPI would busy-poll even
    // with more ranks than cores: tell it, and let idle ranks yield.
    a.insert(a.end(), {"--oversubscribe", "--bind-to", "none"});
    if (opt.np > host.cores) {
      a.insert(a.end(), {"--mca", "mpi_yield_when_idle", "1"});
    }
    a.insert(a.end(),
             {"--mca", "btl", "self,vader,tcp", "--mca", "plm_rsh_agent",
              host.fake_node_agent, "--hostfile", launch.hostfile, "-x",
              "HVDTUNE_FAKE_NODE_DIR=" + host.fake_node_dir});
  } else {
    if (opt.np > slots) {
      a.insert(a.end(), {"--oversubscribe", "--bind-to", "none"});
    }
    if (!opt.hosts.empty()) a.insert(a.end(), {"-H", opt.hosts});
  }
  a.insert(a.end(), {"-np", std::to_string(opt.np)});
  std::stringstream extra(opt.mpi_args);
  for (std::string word; extra >> word;) a.push_back(word);
  for (const Launch::Var& v : launch.vars) {
    a.insert(a.end(), {"-x", v.by_name ? v.name : v.name + "=" + v.value});
  }
  a.insert(a.end(), opt.command.begin(), opt.command.end());
  return launch;
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    const bool plain =
        !arg.empty() && arg.find_first_not_of(
                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                            "VWXYZ0123456789_-+=/.,:@%") == std::string::npos;
    if (plain) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg)
      out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string DisplayCommand(const Launch& launch) {
  std::string out;
  for (const auto& [name, value] : launch.environment) {
    out += name + "=" + ShellJoin({RedactedLocation(value)}) + " ";
  }
  return out + ShellJoin(launch.argv);
}

std::vector<std::pair<std::size_t, std::size_t>> PasswordSpans(
    std::string_view text) {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (std::string_view scheme : {"postgresql://", "postgres://"}) {
    for (std::size_t at = text.find(scheme); at != std::string_view::npos;
         at = text.find(scheme, at + 1)) {
      if (scheme == "postgres://" && at >= 2 &&
          text.substr(at - 2, 2) == "ql") {
        continue;  // the tail of postgresql://, seen already
      }
      const std::size_t from = at + scheme.size();
      const std::size_t uri_end =
          std::min(text.size(), text.find_first_of(" \t\n'\"", from));
      const std::string_view uri = text.substr(0, uri_end);
      // libpq: scheme://[user[:password]@]host..., the user part ending at
      // the first '@' before any '/'.
      const std::size_t end = uri.find_first_of("@/", from);
      if (end != std::string_view::npos && uri[end] == '@') {
        const std::size_t colon = uri.find(':', from);
        if (colon < end) spans.emplace_back(colon + 1, end - colon - 1);
      }
      // ...?password=...&...: the value up to the next '&'.
      const std::size_t query = uri.find('?', from);
      if (query == std::string_view::npos) continue;
      for (std::size_t p = query + 1; p < uri.size();) {
        std::size_t amp = uri.find('&', p);
        if (amp == std::string_view::npos) amp = uri.size();
        constexpr std::string_view kKey = "password=";
        if (uri.substr(p, amp - p).starts_with(kKey)) {
          spans.emplace_back(p + kKey.size(), amp - p - kKey.size());
        }
        p = amp + 1;
      }
    }
  }
  std::sort(spans.begin(), spans.end());
  return spans;
}

std::string RedactedLocation(const std::string& location) {
  std::string out = location;
  const auto spans = PasswordSpans(location);
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    out.replace(it->first, it->second, "***");
  }
  return out;
}

void MaskPasswordArguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    for (const auto& [at, n] : PasswordSpans(argv[i])) {
      std::fill_n(argv[i] + at, n, '*');
    }
  }
}

}  // namespace hvdtune::cli
