#include "elastic_launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <tuple>

#include "common.h"
#include "elastic_discovery.h"
#include "elastic_world.h"
#include "gloo_launcher.h"
#include "hvdtune/rendezvous.h"

namespace hvdtune::cli {
namespace {

using Clock = ElasticClock;

Clock::duration Secs(double s) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(s));
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

enum class Phase { kStarting, kRunning, kResetting, kWaiting, kFinishing };

class Driver {
 public:
  Driver(const LaunchOptions& opt, const ElasticOptions& e, bool verbose)
      : opt_(opt),
        e_(e),
        verbose_(verbose),
        discovery_(e.discovery_script, e.slots),
        blacklist_(e.cooldown_range) {
    settings_ = BuildLaunch(opt, ProbeLaunchHost());
    std::tie(min_np_, max_np_) = CheckElasticOptions(opt.np, e);
    for (const Launch::Var& v : settings_.vars) {
      if (v.name == "HOROVOD_GLOO_TIMEOUT_SECONDS") {
        gloo_timeout_ = ParseFloatSetting(v.name, v.value, 0.0, 1e6, true);
      }
    }
    if (const char* t = std::getenv("HOROVOD_ELASTIC_TIMEOUT"); t && *t) {
      elastic_timeout_ = ParseFloatSetting("HOROVOD_ELASTIC_TIMEOUT", t, 0.0,
                                           1e7, /*min_exclusive=*/false);
    }
    if (e.start_timeout) {
      start_timeout_ = *e.start_timeout;
    } else if (const char* t = std::getenv("HOROVOD_START_TIMEOUT"); t && *t) {
      start_timeout_ = ParseFloatSetting("HOROVOD_START_TIMEOUT", t, 0.0, 1e6,
                                         /*min_exclusive=*/true);
    }
    if (const char* t = std::getenv(kHeartbeatVar); t && *t) {
      heartbeat_timeout_ = ParseFloatSetting(kHeartbeatVar, t, 0.0, 1e6,
                                             /*min_exclusive=*/false);
      if (heartbeat_timeout_ > 0 && heartbeat_timeout_ < 1) {
        throw UsageError(fmt::format(
            "{}={}: expected 0 (off) or at least 1 (the ranks beat every "
            "0.5 s)",
            kHeartbeatVar, t));
      }
    }
  }

  int Run(bool dry_run) {
    const Hosts hosts = discovery_.RunOnce();
    // Where the store listens and the ranks' interface: as for a Gloo job
    // on the hosts discovered first.
    LaunchOptions o = opt_;
    o.np = 1;
    o.hosts = JoinHosts(hosts, "localhost");
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
    server_ = std::make_unique<RendezvousServer>(rendezvous_addr_, 0);
    phase_deadline_ = Clock::now() + Secs(elastic_timeout_);
    Loop();
    if (!failure_.empty()) throw Failure(failure_);
    return kExitOk;
  }

 private:
  static constexpr const char* kHeartbeatVar =
      "HVDTUNE_ELASTIC_HEARTBEAT_SECONDS";

  // --- worlds ------------------------------------------------------------

  std::vector<Member> Compose() const {
    return ComposeWorld(workers_, discovery_.hosts(), blacklist_, min_np_,
                        max_np_);
  }

  // The environment of a worker started as `m` at `p` in world `v`.
  std::vector<std::string> WorkerEnv(const Member& m, const Placement& p,
                                     int v) const {
    std::vector<std::string> env;
    for (const Launch::Var& var : settings_.vars) {
      env.push_back(var.name + "=" + var.value);
    }
    WorldEndpoint where{rendezvous_addr_, server_->port(), iface_,
                        elastic_timeout_, heartbeat_timeout_ > 0};
    for (const auto& [name, value] : WorkerVariables(m, p, v, where)) {
      env.push_back(name + "=" + value);
    }
    return env;
  }

  void Publish(std::vector<Member> members, ResetCause cause,
               const std::string& why) {
    if (version_ >= 0 && e_.reset_limit && version_ + 1 > *e_.reset_limit) {
      Abort(fmt::format(
          "the job reached --reset-limit {} ({}); it does not reset again",
          *e_.reset_limit, why));
      return;
    }
    const int v = ++version_;
    for (Member& m : members) {
      if (m.fresh) m.id = "w" + std::to_string(next_worker_++);
    }
    const std::vector<Placement> places = PlaceWorld(members);
    std::map<std::string, Worker*> by_id;
    for (auto& [pid, w] : workers_) {
      w.rank = -1;
      by_id[w.id] = &w;
    }
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (!members[i].fresh) by_id.at(members[i].id)->rank = places[i].rank;
    }
    server_->Set(fmt::format("elastic/world/{}", v),
                 WorldText(v, hosts_updates_, cause, members, places));
    server_->Set("elastic/current", std::to_string(v));
    ElasticLog(fmt::format(
        "world {}: {} ranks on {} ({}{})", v, members.size(),
        WorldLayout(members), why,
        failure_at_
            ? fmt::format(", {:.2f} s after the failure", Since(*failure_at_))
            : ""));
    failure_at_.reset();
    GlooPlan plan;
    plan.rendezvous_addr = rendezvous_addr_;
    plan.agent = agent_;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const Member& m = members[i];
      if (!m.fresh) continue;
      GlooRankPlan rank;
      rank.host = m.host;
      rank.remote = !IsLocal(m.host);
      rank.env = WorkerEnv(m, places[i], v);
      std::fflush(stdout);
      std::fflush(stderr);
      const pid_t pid = fork();
      if (pid < 0) throw Failure(std::string("fork: ") + std::strerror(errno));
      if (pid == 0) ExecRank(plan, rank, opt_.command);
      Worker w;
      w.id = m.id;
      w.host = m.host;
      w.pid = pid;
      w.rank = places[i].rank;
      workers_[pid] = w;
    }
    world_size_ = static_cast<int>(members.size());
    notified_ = false;
    arrivals_pending_ = true;
    arrival_deadline_ = Clock::now() + Secs(start_timeout_);
    phase_ = Phase::kRunning;
  }

  // Ends the job: the ranks waiting for a next world read why and exit.
  void Abort(const std::string& why) {
    failure_ = why;
    ElasticLog(why);
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
        ElasticLog(
            fmt::format("rank {} ({}) finished; the job ends with this world",
                        w.rank, w.id));
        phase_ = Phase::kFinishing;
      }
      return;
    }
    const std::string how = fmt::format("rank {} ({} on {}) {}", w.rank, w.id,
                                        w.host, Describe(status));
    if (phase_ == Phase::kFinishing) {
      if (failure_.empty()) {
        failure_ = "the job failed after a rank finished: " + how;
      }
      return;
    }
    if (!failure_at_) failure_at_ = Clock::now();
    MarkLost(w, Describe(status));
    HostFailed(w.host, how, "stopped: its host was blacklisted");
    StartReset(ResetCause::kRankLost, "failure: " + how);
  }

  // Blacklists `host` and stops the workers still on it: after a failure
  // there, they are not trusted to reach the next world.
  void HostFailed(const std::string& host, const std::string& why,
                  const std::string& lost_as) {
    blacklist_.Add(host, why);
    for (auto& [p, other] : workers_) {
      if (other.host == host && !other.retired) {
        MarkLost(other, lost_as);
        Retire(other, 0);
      }
    }
  }

  // A worker that beat once and then stayed silent past the heartbeat
  // timeout cannot be reached (its host is cut off, hung or swapping): the
  // host counts as failed. Its processes may live on behind the cut; they
  // are signalled, and a worker that comes back finds itself in no world.
  void CheckHeartbeats() {
    if (heartbeat_timeout_ <= 0) return;
    const auto now = Clock::now();
    for (auto& [pid, w] : workers_) {
      // Workers left out of the newest world exit (their beats stop).
      if (w.retired || w.rank < 0) continue;
      auto beat = server_->TryGet("elastic/alive/" + w.id);
      // None yet (starting), or "exit": it is ending by itself.
      if (!beat || *beat == "exit") continue;
      if (*beat != w.beat || !w.beat_at) {
        w.beat = *beat;
        w.beat_at = now;
        continue;
      }
      if (now - *w.beat_at < Secs(heartbeat_timeout_)) continue;
      const std::string host = w.host;
      const std::string how = fmt::format(
          "rank {} ({} on {}) silent for {:.1f} s ({}={})", w.rank, w.id, host,
          Since(*w.beat_at), kHeartbeatVar, heartbeat_timeout_);
      if (!failure_at_) failure_at_ = *w.beat_at;
      ElasticLog("host " + host + " unreachable: " + how);
      HostFailed(host, how, "unreachable: " + how);
      StartReset(ResetCause::kHostUnreachable, "unreachable: " + how);
      return;  // workers_ is unchanged, but one host per pass keeps it simple
    }
  }

  void MarkLost(const Worker& w, const std::string& how) {
    if (w.rank < 0) return;
    server_->Set(fmt::format("elastic/{}/{}", version_,
                             RendezvousServer::LostRankKey(w.rank)),
                 how);
  }

  void StartReset(ResetCause cause, const std::string& why) {
    if (phase_ != Phase::kRunning) return;
    phase_ = Phase::kResetting;
    reset_cause_ = cause;
    reset_why_ = why;
    phase_deadline_ = Clock::now() + Secs(gloo_timeout_ + 5);
  }

  // Until every rank of the newest world has reached it (its ranks connect
  // only then): a rank not there within the start timeout (hung in its
  // imports, or its host slow to start it) fails its host, and the ranks
  // that arrived leave for the next world. True when it started a reset.
  bool CheckArrivals() {
    if (!arrivals_pending_) return false;
    std::vector<const Worker*> missing;
    for (const auto& [pid, w] : workers_) {
      if (w.rank < 0 || w.retired) continue;
      if (!server_->TryGet(fmt::format("elastic/arrived/{}/{}", version_, w.id))
               .has_value()) {
        missing.push_back(&w);
      }
    }
    if (missing.empty()) {
      arrivals_pending_ = false;
      return false;
    }
    if (Clock::now() < arrival_deadline_) return false;
    arrivals_pending_ = false;
    failure_at_ = arrival_deadline_;
    std::string first_how;
    for (const Worker* w : missing) {
      if (w->retired) continue;  // its host failed with an earlier one
      const std::string how = fmt::format(
          "rank {} ({} on {}) did not reach world {} within the start "
          "timeout ({:.0f} s)",
          w->rank, w->id, w->host, version_, start_timeout_);
      ElasticLog(how + "; stopped");
      if (first_how.empty()) first_how = how;
      HostFailed(w->host, how, "stopped: it did not reach its world");
    }
    StartReset(ResetCause::kRankLost, "failure: " + first_how);
    return true;
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
          Publish(std::move(members), ResetCause::kStart, "start");
        } else if (Clock::now() >= phase_deadline_) {
          Abort(BelowMinimum());
        }
        break;
      }
      case Phase::kRunning: {
        if (CheckArrivals()) return;
        for (const auto& [pid, w] : workers_) {
          if (w.rank >= 0 && !w.retired && Ready(w)) {
            if (notified_) {
              StartReset(notified_cause_, "hosts " + notified_kind_);
            } else {
              StartReset(
                  ResetCause::kRankLost,
                  fmt::format("rank {} left world {}", w.rank, version_));
            }
            return;
          }
        }
        NotifyHostChanges();
        break;
      }
      case Phase::kResetting: {
        bool all = true;
        for (auto& [pid, w] : workers_) {
          if (w.rank < 0 || w.retired || Ready(w)) continue;
          all = false;
          if (Clock::now() >= phase_deadline_) {
            // Hung, or its host cannot reach the store: not trusted again
            // before its cooldown.
            const std::string how = fmt::format(
                "rank {} ({} on {}) did not leave world {} in {:.0f} s", w.rank,
                w.id, w.host, version_, gloo_timeout_ + 5);
            ElasticLog(how + "; stopped");
            HostFailed(w.host, how, "stopped: it did not reset");
            break;  // workers_ changed state; look again next pass
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
          Publish(std::move(members), reset_cause_, reset_why_);
        } else if (Clock::now() >= phase_deadline_) {
          Abort(BelowMinimum());
        } else if (!waiting_logged_) {
          waiting_logged_ = true;
          ElasticLog(fmt::format(
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

  // Tells the ranks (at their next commit) that hosts came or went.
  void NotifyHostChanges() {
    if (notified_) return;
    const auto change = HostsChange(workers_, discovery_.hosts(), blacklist_,
                                    world_size_ < max_np_);
    if (!change) return;
    notified_ = true;
    ++hosts_updates_;
    const char* kind = *change == ResetCause::kHostsChanged ? "mixed"
                       : *change == ResetCause::kHostsAdded ? "added"
                                                            : "removed";
    notified_kind_ = kind;
    notified_cause_ = *change;
    server_->Set("elastic/hosts_updated",
                 fmt::format("{} {}", hosts_updates_, kind));
    ElasticLog(
        fmt::format("hosts {}; the ranks reset at their next commit", kind));
  }

  std::string BelowMinimum() const {
    int slots = 0;
    for (const auto& [h, n] : discovery_.hosts()) {
      if (blacklist_.Usable(h)) slots += n;
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
        if (pid == discovery_.pid()) {
          discovery_.Ended(status);
        } else {
          WorkerEnded(pid, status);
        }
      }
      if (phase_ == Phase::kFinishing && workers_.empty()) break;
      if (phase_ != Phase::kFinishing) {
        discovery_.Poll();
        CheckHeartbeats();
      }
      Step();
      const auto now = Clock::now();
      for (auto& [p, w] : workers_) {
        if (!w.kill_at || now < *w.kill_at) continue;
        ::kill(p, w.signals++ == 0 ? SIGTERM : SIGKILL);
        w.kill_at = now + std::chrono::seconds(3);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    discovery_.Stop();
  }

  const LaunchOptions& opt_;
  const ElasticOptions& e_;
  bool verbose_;
  Launch settings_;
  HostDiscovery discovery_;
  Blacklist blacklist_;
  int min_np_ = 1, max_np_ = 1 << 20;
  double gloo_timeout_ = 30;
  double elastic_timeout_ = 600;
  double heartbeat_timeout_ = 10;
  double start_timeout_ = 30;
  std::string rendezvous_addr_, iface_, agent_ = "ssh";
  std::unique_ptr<RendezvousServer> server_;
  std::map<pid_t, Worker> workers_;
  int next_worker_ = 0;
  int version_ = -1;
  int world_size_ = 0;
  int hosts_updates_ = 0;
  bool notified_ = false;
  std::string notified_kind_;
  ResetCause notified_cause_ = ResetCause::kHostsAdded;
  bool waiting_logged_ = false;
  Phase phase_ = Phase::kStarting;
  Clock::time_point phase_deadline_;
  bool arrivals_pending_ = false;
  Clock::time_point arrival_deadline_;
  ResetCause reset_cause_ = ResetCause::kRankLost;
  std::string reset_why_;
  std::optional<Clock::time_point> failure_at_;
  std::string failure_;
};

}  // namespace

int RunElasticLaunch(const LaunchOptions& opt, const ElasticOptions& elastic,
                     bool dry_run, bool verbose) {
  if (elastic.discovery_script.empty()) {
    throw UsageError(
        "--min-np, --max-np, --reset-limit, --blacklist-cooldown-range and "
        "--start-timeout need --host-discovery-script (elastic mode)");
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
