#include "gloo_launcher.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "common.h"
#include "hvdtune/knobs.h"
#include "hvdtune/rendezvous.h"

namespace hvdtune::cli {

std::string ThisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

bool IsLocal(const std::string& host) {
  return host == "localhost" || host == "127.0.0.1" || host == ThisHost();
}

namespace {

// "host:slots,host" in order (a host without a count has 1 slot).
std::vector<std::pair<std::string, int>> ParseHosts(const std::string& hosts) {
  std::vector<std::pair<std::string, int>> out;
  std::stringstream in(hosts);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto colon = item.find(':');
    const std::string name = item.substr(0, colon);
    int slots = 1;
    if (colon != std::string::npos) {
      char* end = nullptr;
      const std::string count = item.substr(colon + 1);
      const long n = std::strtol(count.c_str(), &end, 10);
      const bool valid =
          !count.empty() && *end == '\0' && n >= 1 && n <= 1 << 20;
      slots = valid ? static_cast<int>(n) : 0;
    }
    if (name.empty() || slots < 1) {
      throw UsageError("-H: bad entry '" + item +
                       "' (expected host or host:slots)");
    }
    out.emplace_back(name, slots);
  }
  return out;
}

// The IPv4 address of `iface`, or of the first interface that is up and not
// loopback when `iface` is empty; "" when there is none.
std::string InterfaceAddress(const std::string& iface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if (!(a->ifa_flags & IFF_UP)) continue;
    if (iface.empty() ? (a->ifa_flags & IFF_LOOPBACK) != 0
                      : iface != a->ifa_name) {
      continue;
    }
    char buf[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf)) found = buf;
  }
  freeifaddrs(list);
  return found;
}

// The interface that carries `address`.
std::string InterfaceOf(const std::string& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::string found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf) && address == buf) {
      found = a->ifa_name;
      break;
    }
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

std::string Describe(int status) {
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return "ended with wait status " + std::to_string(status);
}

GlooPlan BuildGlooPlan(const LaunchOptions& opt, const Launch& settings) {
  if (opt.fake_nodes > 0) {
    throw UsageError(
        "--fake-nodes: not with --gloo (use -H with the rsh "
        "agent of the emulated cluster)");
  }
  if (!opt.mpi_args.empty()) {
    throw UsageError("--mpi-args: there is no mpirun with --gloo");
  }
  std::vector<std::pair<std::string, int>> hosts =
      opt.hosts.empty()
          ? std::vector<std::pair<std::string, int>>{{"localhost", opt.np}}
          : ParseHosts(opt.hosts);
  int slots = 0;
  for (const auto& h : hosts) slots += h.second;
  if (slots < opt.np) {
    throw UsageError("-np " + std::to_string(opt.np) + ": -H has only " +
                     std::to_string(slots) + " slots");
  }
  // Ranks fill each host's slots in order, as mpirun places them by slot.
  std::vector<std::string> where;
  for (const auto& [name, n] : hosts) {
    for (int s = 0; s < n && static_cast<int>(where.size()) < opt.np; ++s) {
      where.push_back(name);
    }
  }
  std::map<std::string, int> per_host;
  std::vector<std::string> host_order;
  std::vector<int> local_rank;
  for (const std::string& h : where) {
    if (per_host.count(h) == 0) host_order.push_back(h);
    local_rank.push_back(per_host[h]++);
  }
  bool all_local = true;
  for (const std::string& h : host_order) all_local = all_local && IsLocal(h);

  GlooPlan plan;
  std::string iface = opt.network_interface;
  if (all_local) {
    plan.rendezvous_addr = "127.0.0.1";
    if (iface.empty()) iface = "lo";
  } else {
    plan.rendezvous_addr = InterfaceAddress(iface);
    if (plan.rendezvous_addr.empty()) {
      throw UsageError(
          iface.empty()
              ? "--network-interface: this machine has no IPv4 interface up "
                "besides loopback to serve the rendezvous on"
              : "--network-interface: no IPv4 address on interface '" + iface +
                    "'");
    }
    if (iface.empty()) iface = InterfaceOf(plan.rendezvous_addr);
  }
  for (const char* var : {"HVDTUNE_RSH_AGENT", "OMPI_MCA_plm_rsh_agent"}) {
    if (const char* a = std::getenv(var); a && *a) {
      plan.agent = a;
      break;
    }
  }
  const std::string this_host = ThisHost();
  for (int r = 0; r < opt.np; ++r) {
    const std::string& h = where[static_cast<std::size_t>(r)];
    GlooRankPlan rank;
    rank.host = h;
    rank.remote = !IsLocal(h);
    for (const Launch::Var& v : settings.vars) {
      rank.env.push_back(v.name + "=" + v.value);
    }
    const int lr = local_rank[static_cast<std::size_t>(r)];
    int cross_rank = 0, cross_size = 0;
    for (const std::string& other : host_order) {
      if (per_host[other] > lr) {
        if (other == h) cross_rank = cross_size;
        ++cross_size;
      }
    }
    const std::string name = rank.remote ? h : this_host;
    for (const auto& [var, value] :
         std::vector<std::pair<std::string, std::string>>{
             {"HOROVOD_RANK", std::to_string(r)},
             {"HOROVOD_SIZE", std::to_string(opt.np)},
             {"HOROVOD_LOCAL_RANK", std::to_string(lr)},
             {"HOROVOD_LOCAL_SIZE", std::to_string(per_host[h])},
             {"HOROVOD_CROSS_RANK", std::to_string(cross_rank)},
             {"HOROVOD_CROSS_SIZE", std::to_string(cross_size)},
             {"HOROVOD_HOSTNAME", name},
             {"HOROVOD_GLOO_RENDEZVOUS_ADDR", plan.rendezvous_addr},
             {"HOROVOD_GLOO_IFACE", iface},
             {"HOROVOD_CONTROLLER", "gloo"},
             {"HOROVOD_CPU_OPERATIONS", "gloo"}}) {
      rank.env.push_back(var + "=" + value);
    }
    plan.ranks.push_back(std::move(rank));
  }
  return plan;
}

[[noreturn]] void ExecRank(const GlooPlan& plan, const GlooRankPlan& rank,
                           const std::vector<std::string>& command) {
  if (!rank.remote) {
    // A rank must not outlive a launcher killed without the chance to end
    // it.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    for (const std::string& kv : rank.env) {
      const auto eq = kv.find('=');
      setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
    std::vector<char*> argv;
    for (const std::string& a : command)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    fmt::print(stderr, "hvd-tune run: cannot run {}: {}\n", command[0],
               std::strerror(errno));
    _exit(127);
  }
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  std::vector<std::string> line = {"cd", cwd, "&&", "exec", "env"};
  line.insert(line.end(), rank.env.begin(), rank.env.end());
  line.insert(line.end(), command.begin(), command.end());
  std::string joined;
  // `cd DIR && exec env ...`: && stays a shell operator.
  for (const std::string& w : line) {
    if (!joined.empty()) joined += ' ';
    joined += w == "&&" ? w : ShellJoin({w});
  }
  const std::vector<std::string> argv_s = {plan.agent, rank.host, joined};
  std::vector<char*> argv;
  for (const std::string& a : argv_s)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  fmt::print(stderr, "hvd-tune run: cannot run the rsh agent {}: {}\n",
             plan.agent, std::strerror(errno));
  _exit(127);
}

int RunGlooLaunch(const LaunchOptions& opt, bool dry_run, bool verbose) {
  const LaunchHost host = ProbeLaunchHost();
  // The job's settings, checked and named by flag as for mpirun.
  const Launch settings = BuildLaunch(opt, host);
  GlooPlan plan = BuildGlooPlan(opt, settings);
  double timeout_seconds = 30;
  for (const Launch::Var& v : settings.vars) {
    if (v.name == "HOROVOD_GLOO_TIMEOUT_SECONDS") {
      timeout_seconds =
          ParseFloatSetting(v.name, v.value, 0.0, 1e6, /*min_exclusive=*/true);
    }
  }
  if (dry_run || verbose) {
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
      const GlooRankPlan& p = plan.ranks[r];
      fmt::print("# rank {} on {}{}: {} {}\n", r, p.host,
                 p.remote ? " (via " + plan.agent + ")" : "", ShellJoin(p.env),
                 ShellJoin(opt.command));
    }
    std::fflush(stdout);
    if (dry_run) return kExitOk;
  }
  RendezvousServer server(plan.rendezvous_addr, 0);
  std::map<pid_t, int> running;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    plan.ranks[r].env.push_back("HOROVOD_GLOO_RENDEZVOUS_PORT=" +
                                std::to_string(server.port()));
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) throw Failure(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) ExecRank(plan, plan.ranks[r], opt.command);
    running[pid] = static_cast<int>(r);
  }
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> terminate_at, kill_at;
  std::vector<std::string> failed;
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const int rank = running[pid];
      running.erase(pid);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        const std::string how = Describe(status);
        server.Set(RendezvousServer::LostRankKey(rank), how);
        failed.push_back("rank " + std::to_string(rank) + " " + how);
        // As mpirun ends a job whose rank failed, but the survivors first
        // get the time to see the loss and report it themselves.
        if (!terminate_at) {
          terminate_at =
              Clock::now() +
              std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(timeout_seconds + 5));
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    const auto now = Clock::now();
    if (terminate_at && now >= *terminate_at && !kill_at) {
      for (const auto& [p, r] : running) kill(p, SIGTERM);
      kill_at = now + std::chrono::seconds(5);
    }
    if (kill_at && now >= *kill_at) {
      for (const auto& [p, r] : running) kill(p, SIGKILL);
      kill_at = now + std::chrono::hours(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (failed.empty()) return kExitOk;
  std::string what;
  for (const std::string& f : failed) what += (what.empty() ? "" : "; ") + f;
  throw Failure("the job failed: " + what);
}

}  // namespace hvdtune::cli
