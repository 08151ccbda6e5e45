#include "elastic_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common.h"
#include "gloo_launcher.h"
#include "hvdtune/rendezvous.h"

namespace hvdtune::cli {

std::vector<std::pair<std::string, int>> ParseDiscoveryOutput(
    const std::string& text, int default_slots) {
  std::vector<std::pair<std::string, int>> out;
  std::set<std::string> seen;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    // Surrounding blanks and empty lines are not hosts.
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    const auto colon = line.find(':');
    const std::string name = line.substr(0, colon);
    int slots = default_slots;
    if (colon != std::string::npos) {
      const std::string count = line.substr(colon + 1);
      char* end = nullptr;
      const long n = std::strtol(count.c_str(), &end, 10);
      slots = count.empty() || *end != '\0' || n < 1 || n > 1 << 20
                  ? 0
                  : static_cast<int>(n);
    }
    if (name.empty() || slots < 1 ||
        name.find_first_of(" \t") != std::string::npos) {
      throw Failure("--host-discovery-script printed '" + line +
                    "' (expected host or host:slots, slots >= 1)");
    }
    if (seen.insert(name).second) out.emplace_back(name, slots);
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration Secs(double s) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(s));
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void Log(const std::string& what) {
  fmt::print(stderr, "hvd-tune run: elastic: {}\n", what);
  std::fflush(stderr);
}

struct Worker {
  std::string id, host;
  pid_t pid = -1;
  /// Its rank in the newest world; -1 when not a member.
  int rank = -1;
  /// Being stopped by the launcher: its exit is expected.
  bool retired = false;
  /// Exited 0 (finished its training).
  bool done = false;
  /// When to signal it next (SIGTERM first, then SIGKILL every 3 s).
  std::optional<Clock::time_point> kill_at;
  int signals = 0;
};

struct Blacklisted {
  int failures = 0;
  /// When it may come back (max(): never).
  Clock::time_point until;
};

enum class Phase { kStarting, kRunning, kResetting, kWaiting, kFinishing };

class Driver {
 public:
  Driver(const LaunchOptions& opt, const ElasticOptions& e, bool verbose)
      : opt_(opt), e_(e), verbose_(verbose) {
    settings_ = BuildLaunch(opt, ProbeLaunchHost());
    min_np_ = e.min_np.value_or(opt.np);
    max_np_ = e.max_np.value_or(1 << 20);
    if (min_np_ < 1 || max_np_ < min_np_ || opt.np < min_np_ ||
        opt.np > max_np_) {
      throw UsageError(fmt::format(
          "--min-np {} <= -np {} <= --max-np {} does not hold", min_np_, opt.np,
          e.max_np ? std::to_string(max_np_) : "(any)"));
    }
    if (!e.cooldown_range.empty() &&
        (e.cooldown_range.size() != 2 || e.cooldown_range[0] < 0 ||
         e.cooldown_range[1] < e.cooldown_range[0])) {
      throw UsageError(
          "--blacklist-cooldown-range: expected two numbers 0 <= a <= b");
    }
    if (e.slots < 1) throw UsageError("--slots: must be >= 1");
    if (e.reset_limit && *e.reset_limit < 0) {
      throw UsageError("--reset-limit: must be >= 0");
    }
    gloo_timeout_ = 30;
    for (const Launch::Var& v : settings_.vars) {
      if (v.name == "HOROVOD_GLOO_TIMEOUT_SECONDS") {
        gloo_timeout_ = ParseFloatSetting(v.name, v.value, 0.0, 1e6, true);
      }
    }
    if (const char* t = std::getenv("HOROVOD_ELASTIC_TIMEOUT"); t && *t) {
      elastic_timeout_ = ParseFloatSetting("HOROVOD_ELASTIC_TIMEOUT", t, 0.0,
                                           1e7, /*min_exclusive=*/false);
    }
  }

  int Run(bool dry_run) {
    const auto hosts = RunDiscoveryOnce();
    // Where the store listens and the ranks' interface: as for a Gloo job
    // on the hosts discovered first.
    LaunchOptions o = opt_;
    o.np = 1;
    o.hosts.clear();
    for (const auto& [h, n] : hosts) {
      o.hosts += (o.hosts.empty() ? "" : ",") + h + ":" + std::to_string(n);
    }
    if (o.hosts.empty()) o.hosts = "localhost";
    const GlooPlan plan = BuildGlooPlan(o, settings_);
    rendezvous_addr_ = plan.rendezvous_addr;
    agent_ = plan.agent;
    for (const std::string& kv : plan.ranks[0].env) {
      if (kv.rfind("HOROVOD_GLOO_IFACE=", 0) == 0) iface_ = kv.substr(19);
    }
    if (dry_run || verbose_) {
      fmt::print(
          "# elastic: discovery '{}' found {}; -np {}, --min-np {}, "
          "--max-np {}; store on {}, interface {}: {}\n",
          e_.discovery_script, o.hosts, opt_.np, min_np_,
          e_.max_np ? std::to_string(max_np_) : "any", rendezvous_addr_, iface_,
          ShellJoin(opt_.command));
      std::fflush(stdout);
      if (dry_run) return kExitOk;
    }
    discovered_ = hosts;
    server_ = std::make_unique<RendezvousServer>(rendezvous_addr_, 0);
    phase_deadline_ = Clock::now() + Secs(elastic_timeout_);
    next_discovery_ = Clock::now() + std::chrono::seconds(1);
    Loop();
    if (!failure_.empty()) throw Failure(failure_);
    return kExitOk;
  }

 private:
  // --- discovery ---------------------------------------------------------

  std::vector<std::pair<std::string, int>> RunDiscoveryOnce() {
    StartDiscovery();
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t k = ::read(discovery_fd_, buf, sizeof buf);
      if (k > 0) {
        out.append(buf, static_cast<std::size_t>(k));
        continue;
      }
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      break;
    }
    int status = 0;
    while (waitpid(discovery_pid_, &status, 0) < 0 && errno == EINTR) {
    }
    ::close(discovery_fd_);
    discovery_pid_ = -1;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      throw Failure("--host-discovery-script " + e_.discovery_script + " " +
                    Describe(status));
    }
    return ParseDiscoveryOutput(out, e_.slots);
  }

  void StartDiscovery() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw Failure(std::string("pipe: ") + std::strerror(errno));
    }
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) throw Failure(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::dup2(fds[1], 1);
      execl("/bin/sh", "sh", "-c", e_.discovery_script.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    discovery_pid_ = pid;
    discovery_fd_ = fds[0];
    discovery_out_.clear();
    discovery_started_ = Clock::now();
  }

  void PollDiscovery() {
    if (discovery_pid_ < 0) {
      if (Clock::now() >= next_discovery_) StartDiscovery();
      return;
    }
    char buf[4096];
    ssize_t k;
    while ((k = ::read(discovery_fd_, buf, sizeof buf)) > 0) {
      discovery_out_.append(buf, static_cast<std::size_t>(k));
    }
    // A script that hangs is stopped; the hosts stay as they were.
    if (Since(discovery_started_) > 30) ::kill(discovery_pid_, SIGKILL);
  }

  void DiscoveryEnded(int status) {
    char buf[4096];
    ssize_t k;
    while ((k = ::read(discovery_fd_, buf, sizeof buf)) > 0) {
      discovery_out_.append(buf, static_cast<std::size_t>(k));
    }
    ::close(discovery_fd_);
    discovery_pid_ = -1;
    next_discovery_ = Clock::now() + std::chrono::seconds(1);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      Log("--host-discovery-script " + Describe(status) +
          "; the hosts stay as they were");
      return;
    }
    try {
      auto hosts = ParseDiscoveryOutput(discovery_out_, e_.slots);
      if (hosts != discovered_) {
        std::string list;
        for (const auto& [h, n] : hosts) {
          list += (list.empty() ? "" : ",") + h + ":" + std::to_string(n);
        }
        Log("discovered hosts: " + (list.empty() ? "(none)" : list));
      }
      discovered_ = std::move(hosts);
    } catch (const Failure& f) {
      Log(std::string(f.what()) + "; the hosts stay as they were");
    }
  }

  bool Usable(const std::string& host) const {
    const auto it = blacklist_.find(host);
    return it == blacklist_.end() || Clock::now() >= it->second.until;
  }

  // --- worlds ------------------------------------------------------------

  struct Member {
    std::string id, host;
    bool fresh = false;  // a worker to start
  };

  // The next world: the live members of the current one on usable hosts
  // (in rank order, grouped by host so that rank 0 stays a survivor), then
  // new workers on free slots, up to --max-np. Empty when fewer than
  // --min-np.
  std::vector<Member> Compose() const {
    std::vector<const Worker*> alive;
    for (const auto& [pid, w] : workers_) {
      if (w.rank >= 0 && !w.retired && !w.done) alive.push_back(&w);
    }
    std::sort(alive.begin(), alive.end(), [](const Worker* a, const Worker* b) {
      return a->rank < b->rank;
    });
    std::map<std::string, int> capacity;
    std::vector<std::string> order;  // hosts, survivors' first
    for (const auto& [h, n] : discovered_) {
      if (Usable(h)) capacity[h] = n;
    }
    std::map<std::string, std::vector<Member>> by_host;
    int total = 0;
    for (const Worker* w : alive) {
      auto it = capacity.find(w->host);
      if (it == capacity.end() || it->second == 0 || total >= max_np_) {
        continue;
      }
      --it->second;
      if (by_host[w->host].empty()) order.push_back(w->host);
      by_host[w->host].push_back({w->id, w->host, false});
      ++total;
    }
    for (const auto& [h, n] : discovered_) {
      auto it = capacity.find(h);
      if (it == capacity.end()) continue;
      for (; it->second > 0 && total < max_np_; --it->second, ++total) {
        if (by_host[h].empty()) order.push_back(h);
        by_host[h].push_back({"", h, true});
      }
    }
    if (total < min_np_) return {};
    std::vector<Member> out;
    for (const std::string& h : order) {
      for (const Member& m : by_host.at(h)) out.push_back(m);
    }
    return out;
  }

  void Publish(std::vector<Member> members, const std::string& why) {
    if (version_ >= 0 && e_.reset_limit && version_ + 1 > *e_.reset_limit) {
      Abort(fmt::format(
          "the job reached --reset-limit {} ({}); it does not reset again",
          *e_.reset_limit, why));
      return;
    }
    const int v = ++version_;
    const int size = static_cast<int>(members.size());
    std::map<std::string, int> local_size, seen;
    std::vector<std::string> hosts;
    for (const Member& m : members) {
      if (local_size[m.host]++ == 0) hosts.push_back(m.host);
    }
    for (Member& m : members) {
      if (m.fresh) m.id = "w" + std::to_string(next_worker_++);
    }
    std::map<std::string, Worker*> by_id;
    for (auto& [pid, w] : workers_) {
      w.rank = -1;
      by_id[w.id] = &w;
    }
    std::string text = fmt::format("world {} updates {}\n", v, hosts_updates_);
    struct Start {
      std::string id, host;
      std::vector<std::string> env;
    };
    std::vector<Start> starts;
    for (int r = 0; r < size; ++r) {
      const Member& m = members[static_cast<std::size_t>(r)];
      const int lr = seen[m.host]++;
      int cross_rank = 0, cross_size = 0;
      for (const std::string& h : hosts) {
        if (local_size[h] > lr) {
          if (h == m.host) cross_rank = cross_size;
          ++cross_size;
        }
      }
      text += fmt::format("{} {} {} {} {} {} {} {}\n", m.id, r, size, lr,
                          local_size[m.host], cross_rank, cross_size, m.host);
      if (!m.fresh) {
        by_id.at(m.id)->rank = r;
        continue;
      }
      Start s{m.id, m.host, {}};
      for (const Launch::Var& var : settings_.vars) {
        s.env.push_back(var.name + "=" + var.value);
      }
      for (const auto& [name, value] :
           std::vector<std::pair<std::string, std::string>>{
               {"HOROVOD_RANK", std::to_string(r)},
               {"HOROVOD_SIZE", std::to_string(size)},
               {"HOROVOD_LOCAL_RANK", std::to_string(lr)},
               {"HOROVOD_LOCAL_SIZE", std::to_string(local_size[m.host])},
               {"HOROVOD_CROSS_RANK", std::to_string(cross_rank)},
               {"HOROVOD_CROSS_SIZE", std::to_string(cross_size)},
               {"HOROVOD_HOSTNAME", m.host},
               {"HOROVOD_GLOO_RENDEZVOUS_ADDR", rendezvous_addr_},
               {"HOROVOD_GLOO_RENDEZVOUS_PORT",
                std::to_string(server_->port())},
               {"HOROVOD_GLOO_IFACE", iface_},
               {"HOROVOD_CONTROLLER", "gloo"},
               {"HOROVOD_CPU_OPERATIONS", "gloo"},
               {"HOROVOD_ELASTIC", "1"},
               {"HOROVOD_ELASTIC_TIMEOUT", fmt::format("{}", elastic_timeout_)},
               {"HVDTUNE_ELASTIC_ID", m.id},
               {"HVDTUNE_ELASTIC_WORLD", std::to_string(v)},
               {"HVDTUNE_GLOO_STORE_PREFIX", fmt::format("elastic/{}/", v)}}) {
        s.env.push_back(name + "=" + value);
      }
      starts.push_back(std::move(s));
    }
    server_->Set(fmt::format("elastic/world/{}", v), text);
    server_->Set("elastic/current", std::to_string(v));
    std::string layout;
    for (const std::string& h : hosts) {
      layout +=
          (layout.empty() ? "" : ",") + h + ":" + std::to_string(local_size[h]);
    }
    Log(fmt::format("world {}: {} ranks on {} ({}{})", v, size, layout, why,
                    failure_at_ ? fmt::format(", {:.2f} s after the failure",
                                              Since(*failure_at_))
                                : ""));
    failure_at_.reset();
    GlooPlan plan;
    plan.rendezvous_addr = rendezvous_addr_;
    plan.agent = agent_;
    for (Start& s : starts) {
      GlooRankPlan rank;
      rank.host = s.host;
      rank.remote = !IsLocal(s.host);
      rank.env = std::move(s.env);
      std::fflush(stdout);
      std::fflush(stderr);
      const pid_t pid = fork();
      if (pid < 0) throw Failure(std::string("fork: ") + std::strerror(errno));
      if (pid == 0) ExecRank(plan, rank, opt_.command);
      Worker w;
      w.id = s.id;
      w.host = s.host;
      w.pid = pid;
      for (int r = 0; r < size; ++r) {
        if (members[static_cast<std::size_t>(r)].id == s.id) w.rank = r;
      }
      workers_[pid] = w;
    }
    world_size_ = size;
    notified_ = false;
    phase_ = Phase::kRunning;
  }

  // Ends the job: the ranks waiting for a next world read why and exit.
  void Abort(const std::string& why) {
    failure_ = why;
    Log(why);
    if (server_) {
      const int v = ++version_;
      server_->Set(fmt::format("elastic/world/{}", v), "abort " + why + "\n");
      server_->Set("elastic/current", std::to_string(v));
    }
    for (auto& [pid, w] : workers_) Retire(w, /*grace_s=*/5);
    phase_ = Phase::kFinishing;
  }

  void Retire(Worker& w, double grace_s) {
    if (w.retired) return;
    w.retired = true;
    w.kill_at = Clock::now() + Secs(grace_s);
  }

  // --- events ------------------------------------------------------------

  void WorkerEnded(pid_t pid, int status) {
    auto it = workers_.find(pid);
    if (it == workers_.end()) return;
    Worker w = it->second;
    workers_.erase(it);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (w.retired) return;
    if (ok) {
      if (w.rank >= 0 && phase_ != Phase::kFinishing) {
        Log(fmt::format("rank {} ({}) finished; the job ends with this world",
                        w.rank, w.id));
        phase_ = Phase::kFinishing;
      }
      return;
    }
    const std::string how = fmt::format("rank {} ({} on {}) {}", w.rank, w.id,
                                        w.host, Describe(status));
    if (phase_ == Phase::kFinishing) {
      failure_ = failure_.empty()
                     ? "the job failed after a rank finished: " + how
                     : failure_;
      return;
    }
    if (!failure_at_) failure_at_ = Clock::now();
    MarkLost(w, Describe(status));
    Blacklist(w.host, how);
    for (auto& [p, other] : workers_) {
      if (other.host == w.host && !other.retired) {
        MarkLost(other, "stopped: its host was blacklisted");
        Retire(other, 0);
      }
    }
    StartReset("failure: " + how);
  }

  void MarkLost(const Worker& w, const std::string& how) {
    if (w.rank < 0) return;
    server_->Set(fmt::format("elastic/{}/{}", version_,
                             RendezvousServer::LostRankKey(w.rank)),
                 how);
  }

  void Blacklist(const std::string& host, const std::string& why) {
    Blacklisted& b = blacklist_[host];
    ++b.failures;
    if (e_.cooldown_range.empty()) {
      b.until = Clock::time_point::max();
      Log("host " + host + " blacklisted (" + why + ")");
      return;
    }
    const double s = std::min(
        e_.cooldown_range[1],
        e_.cooldown_range[0] * std::pow(2.0, std::min(b.failures - 1, 30)));
    b.until = Clock::now() + Secs(s);
    Log(fmt::format("host {} blacklisted for {:.0f} s ({})", host, s, why));
  }

  void StartReset(const std::string& why) {
    if (phase_ != Phase::kRunning) return;
    phase_ = Phase::kResetting;
    reset_why_ = why;
    phase_deadline_ = Clock::now() + Secs(gloo_timeout_ + 5);
  }

  bool Ready(const Worker& w) const {
    return server_->TryGet(fmt::format("elastic/ready/{}/{}", version_, w.id))
        .has_value();
  }

  void Step() {
    switch (phase_) {
      case Phase::kStarting: {
        auto members = Compose();
        if (!members.empty()) {
          Publish(std::move(members), "start");
        } else if (Clock::now() >= phase_deadline_) {
          Abort(BelowMinimum());
        }
        break;
      }
      case Phase::kRunning: {
        for (const auto& [pid, w] : workers_) {
          if (w.rank >= 0 && !w.retired && Ready(w)) {
            StartReset(notified_
                           ? "hosts " + notified_kind_
                           : "rank " + std::to_string(w.rank) + " left world " +
                                 std::to_string(version_));
            return;
          }
        }
        NotifyHostChanges();
        break;
      }
      case Phase::kResetting: {
        bool all = true;
        for (auto& [pid, w] : workers_) {
          if (w.rank < 0 || w.retired || w.done || Ready(w)) continue;
          all = false;
          if (Clock::now() >= phase_deadline_) {
            Log(
                fmt::format("rank {} ({}) did not leave world {} in {:.0f} s; "
                            "stopped",
                            w.rank, w.id, version_, gloo_timeout_ + 5));
            MarkLost(w, "stopped: it did not reset");
            Retire(w, 0);
          }
        }
        if (!all) break;
        phase_ = Phase::kWaiting;
        phase_deadline_ = Clock::now() + Secs(elastic_timeout_);
        waiting_logged_ = false;
        [[fallthrough]];
      }
      case Phase::kWaiting: {
        auto members = Compose();
        if (!members.empty()) {
          Publish(std::move(members), reset_why_);
        } else if (Clock::now() >= phase_deadline_) {
          Abort(BelowMinimum());
        } else if (!waiting_logged_) {
          waiting_logged_ = true;
          Log(fmt::format(
              "fewer than --min-np {} slots available; waiting up to {:.0f} s "
              "(HOROVOD_ELASTIC_TIMEOUT) for hosts",
              min_np_, elastic_timeout_));
        }
        break;
      }
      case Phase::kFinishing: {
        // Ranks waiting for a next world after another finished: no world
        // can continue the job without it.
        bool running = false, waiting = false;
        for (const auto& [pid, w] : workers_) {
          if (w.retired || w.rank < 0) continue;
          (Ready(w) ? waiting : running) = true;
        }
        if (waiting && !running && failure_.empty()) {
          Abort(
              "a rank finished while the others reset; the job cannot "
              "continue without it");
        }
        break;
      }
    }
  }

  int FreeSlots() const {
    std::map<std::string, int> used;
    for (const auto& [pid, w] : workers_) {
      if (w.rank >= 0 && !w.retired) ++used[w.host];
    }
    int free = 0;
    for (const auto& [h, n] : discovered_) {
      if (Usable(h)) free += std::max(0, n - used[h]);
    }
    return free;
  }

  // Tells the ranks (at their next commit) that hosts came or went.
  void NotifyHostChanges() {
    if (notified_) return;
    std::set<std::string> present;
    for (const auto& [h, n] : discovered_) present.insert(h);
    bool removed = false;
    for (const auto& [pid, w] : workers_) {
      if (w.rank >= 0 && !w.retired && present.count(w.host) == 0) {
        removed = true;
      }
    }
    const bool added = world_size_ < max_np_ && FreeSlots() > 0;
    if (!added && !removed) return;
    notified_ = true;
    ++hosts_updates_;
    const char* kind = added && removed ? "mixed" : added ? "added" : "removed";
    notified_kind_ = kind;
    server_->Set("elastic/hosts_updated",
                 fmt::format("{} {}", hosts_updates_, kind));
    Log(fmt::format("hosts {}; the ranks reset at their next commit", kind));
  }

  std::string BelowMinimum() const {
    int slots = 0;
    for (const auto& [h, n] : discovered_) {
      if (Usable(h)) slots += n;
    }
    return fmt::format(
        "only {} of the --min-np {} slots were available for "
        "HOROVOD_ELASTIC_TIMEOUT={:.0f} s (discovered hosts minus "
        "blacklisted ones); the job ends",
        slots, min_np_, elastic_timeout_);
  }

  void Loop() {
    for (;;) {
      int status = 0;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == discovery_pid_) {
          DiscoveryEnded(status);
        } else {
          WorkerEnded(pid, status);
        }
      }
      if (phase_ == Phase::kFinishing && workers_.empty()) break;
      if (phase_ != Phase::kFinishing) PollDiscovery();
      Step();
      const auto now = Clock::now();
      for (auto& [p, w] : workers_) {
        if (!w.kill_at || now < *w.kill_at) continue;
        ::kill(p, w.signals++ == 0 ? SIGTERM : SIGKILL);
        w.kill_at = now + std::chrono::seconds(3);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (discovery_pid_ > 0) {
      ::kill(discovery_pid_, SIGKILL);
      while (waitpid(discovery_pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }

  const LaunchOptions& opt_;
  const ElasticOptions& e_;
  bool verbose_;
  Launch settings_;
  int min_np_ = 1, max_np_ = 1 << 20;
  double gloo_timeout_ = 30;
  double elastic_timeout_ = 600;
  std::string rendezvous_addr_, iface_, agent_ = "ssh";
  std::unique_ptr<RendezvousServer> server_;
  std::vector<std::pair<std::string, int>> discovered_;
  std::map<std::string, Blacklisted> blacklist_;
  std::map<pid_t, Worker> workers_;
  int next_worker_ = 0;
  int version_ = -1;
  int world_size_ = 0;
  int hosts_updates_ = 0;
  bool notified_ = false;
  std::string notified_kind_;
  bool waiting_logged_ = false;
  Phase phase_ = Phase::kStarting;
  Clock::time_point phase_deadline_;
  std::string reset_why_;
  std::optional<Clock::time_point> failure_at_;
  std::string failure_;
  pid_t discovery_pid_ = -1;
  int discovery_fd_ = -1;
  std::string discovery_out_;
  Clock::time_point discovery_started_, next_discovery_;
};

}  // namespace

int RunElasticLaunch(const LaunchOptions& opt, const ElasticOptions& elastic,
                     bool dry_run, bool verbose) {
  if (elastic.discovery_script.empty()) {
    throw UsageError(
        "--min-np, --max-np, --reset-limit and --blacklist-cooldown-range "
        "need --host-discovery-script (elastic mode)");
  }
  if (!opt.hosts.empty()) {
    throw UsageError(
        "-H: not with --host-discovery-script (the script names "
        "the hosts)");
  }
  Driver driver(opt, elastic, verbose);
  return driver.Run(dry_run);
}

}  // namespace hvdtune::cli
