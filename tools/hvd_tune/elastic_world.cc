#include "elastic_world.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common.h"

namespace hvdtune::cli {

void ElasticLog(const std::string& what) {
  fmt::print(stderr, "hvd-tune run: elastic: {}\n", what);
  std::fflush(stderr);
}

const char* ResetCauseName(ResetCause cause) {
  switch (cause) {
    case ResetCause::kStart:
      return "start";
    case ResetCause::kRankLost:
      return "rank_lost";
    case ResetCause::kHostUnreachable:
      return "host_unreachable";
    case ResetCause::kHostsAdded:
      return "hosts_added";
    case ResetCause::kHostsRemoved:
      return "hosts_removed";
    case ResetCause::kHostsChanged:
      return "hosts_changed";
  }
  return "unknown";
}

std::pair<int, int> CheckElasticOptions(int np, const ElasticOptions& e) {
  const int min_np = e.min_np.value_or(np);
  const int max_np = e.max_np.value_or(1 << 20);
  if (min_np < 1 || max_np < min_np || np < min_np || np > max_np) {
    throw UsageError(
        fmt::format("--min-np {} <= -np {} <= --max-np {} does not hold",
                    min_np, np, e.max_np ? std::to_string(max_np) : "(any)"));
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
  if (e.start_timeout && !(*e.start_timeout > 0)) {
    throw UsageError("--start-timeout: must be > 0 seconds");
  }
  return {min_np, max_np};
}

void Blacklist::Add(const std::string& host, const std::string& why) {
  Entry& b = hosts_[host];
  ++b.failures;
  if (range_.empty()) {
    b.until = ElasticClock::time_point::max();
    ElasticLog("host " + host + " blacklisted (" + why + ")");
    return;
  }
  const double s = std::min(
      range_[1], range_[0] * std::pow(2.0, std::min(b.failures - 1, 30)));
  b.until =
      ElasticClock::now() + std::chrono::duration_cast<ElasticClock::duration>(
                                std::chrono::duration<double>(s));
  ElasticLog(
      fmt::format("host {} blacklisted for {:.0f} s ({})", host, s, why));
}

bool Blacklist::Usable(const std::string& host) const {
  const auto it = hosts_.find(host);
  return it == hosts_.end() || ElasticClock::now() >= it->second.until;
}

std::vector<Member> ComposeWorld(const std::map<pid_t, Worker>& workers,
                                 const Hosts& discovered,
                                 const Blacklist& blacklist, int min_np,
                                 int max_np) {
  std::vector<const Worker*> alive;
  for (const auto& [pid, w] : workers) {
    if (w.rank >= 0 && !w.retired) alive.push_back(&w);
  }
  std::sort(alive.begin(), alive.end(),
            [](const Worker* a, const Worker* b) { return a->rank < b->rank; });
  std::map<std::string, int> capacity;
  std::vector<std::string> order;  // hosts, survivors' first
  for (const auto& [h, n] : discovered) {
    if (blacklist.Usable(h)) capacity[h] = n;
  }
  std::map<std::string, std::vector<Member>> by_host;
  int total = 0;
  for (const Worker* w : alive) {
    auto it = capacity.find(w->host);
    if (it == capacity.end() || it->second == 0 || total >= max_np) continue;
    --it->second;
    if (by_host[w->host].empty()) order.push_back(w->host);
    by_host[w->host].push_back({w->id, w->host, false});
    ++total;
  }
  for (const auto& [h, n] : discovered) {
    auto it = capacity.find(h);
    if (it == capacity.end()) continue;
    for (; it->second > 0 && total < max_np; --it->second, ++total) {
      if (by_host[h].empty()) order.push_back(h);
      by_host[h].push_back({"", h, true});
    }
  }
  if (total < min_np) return {};
  std::vector<Member> out;
  for (const std::string& h : order) {
    for (const Member& m : by_host.at(h)) out.push_back(m);
  }
  return out;
}

std::vector<Placement> PlaceWorld(const std::vector<Member>& members) {
  const int size = static_cast<int>(members.size());
  std::map<std::string, int> local_size, seen;
  std::vector<std::string> hosts;
  for (const Member& m : members) {
    if (local_size[m.host]++ == 0) hosts.push_back(m.host);
  }
  std::vector<Placement> out;
  for (int r = 0; r < size; ++r) {
    const Member& m = members[static_cast<std::size_t>(r)];
    Placement p;
    p.rank = r;
    p.size = size;
    p.local_rank = seen[m.host]++;
    p.local_size = local_size[m.host];
    for (const std::string& h : hosts) {
      if (local_size[h] > p.local_rank) {
        if (h == m.host) p.cross_rank = p.cross_size;
        ++p.cross_size;
      }
    }
    out.push_back(p);
  }
  return out;
}

std::string WorldText(int version, int hosts_updates, ResetCause cause,
                      const std::vector<Member>& members,
                      const std::vector<Placement>& places) {
  std::string text = fmt::format("world {} updates {} cause {}\n", version,
                                 hosts_updates, ResetCauseName(cause));
  for (std::size_t i = 0; i < members.size(); ++i) {
    const Placement& p = places[i];
    text += fmt::format("{} {} {} {} {} {} {} {}\n", members[i].id, p.rank,
                        p.size, p.local_rank, p.local_size, p.cross_rank,
                        p.cross_size, members[i].host);
  }
  return text;
}

std::string WorldLayout(const std::vector<Member>& members) {
  std::vector<std::pair<std::string, int>> hosts;
  for (const Member& m : members) {
    auto it = std::find_if(hosts.begin(), hosts.end(),
                           [&](const auto& h) { return h.first == m.host; });
    if (it == hosts.end()) {
      hosts.emplace_back(m.host, 1);
    } else {
      ++it->second;
    }
  }
  return JoinHosts(hosts);
}

std::optional<ResetCause> HostsChange(const std::map<pid_t, Worker>& workers,
                                      const Hosts& discovered,
                                      const Blacklist& blacklist,
                                      bool can_grow) {
  std::map<std::string, int> used;
  bool removed = false;
  for (const auto& [pid, w] : workers) {
    if (w.rank < 0 || w.retired) continue;
    ++used[w.host];
    removed |= std::none_of(discovered.begin(), discovered.end(),
                            [&](const auto& h) { return h.first == w.host; });
  }
  int free = 0;
  for (const auto& [h, n] : discovered) {
    if (blacklist.Usable(h)) free += std::max(0, n - used[h]);
  }
  const bool added = can_grow && free > 0;
  if (added && removed) return ResetCause::kHostsChanged;
  if (added) return ResetCause::kHostsAdded;
  if (removed) return ResetCause::kHostsRemoved;
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> WorkerVariables(
    const Member& m, const Placement& p, int version,
    const WorldEndpoint& where) {
  return {
      {"HOROVOD_RANK", std::to_string(p.rank)},
      {"HOROVOD_SIZE", std::to_string(p.size)},
      {"HOROVOD_LOCAL_RANK", std::to_string(p.local_rank)},
      {"HOROVOD_LOCAL_SIZE", std::to_string(p.local_size)},
      {"HOROVOD_CROSS_RANK", std::to_string(p.cross_rank)},
      {"HOROVOD_CROSS_SIZE", std::to_string(p.cross_size)},
      {"HOROVOD_HOSTNAME", m.host},
      {"HOROVOD_GLOO_RENDEZVOUS_ADDR", where.rendezvous_addr},
      {"HOROVOD_GLOO_RENDEZVOUS_PORT", std::to_string(where.rendezvous_port)},
      {"HOROVOD_GLOO_IFACE", where.iface},
      {"HOROVOD_CONTROLLER", "gloo"},
      {"HOROVOD_CPU_OPERATIONS", "gloo"},
      {"HOROVOD_ELASTIC", "1"},
      {"HOROVOD_ELASTIC_TIMEOUT", fmt::format("{}", where.elastic_timeout)},
      {"HVDTUNE_ELASTIC_ID", m.id},
      {"HVDTUNE_ELASTIC_WORLD", std::to_string(version)},
      {"HVDTUNE_ELASTIC_HEARTBEAT", where.heartbeat ? "1" : "0"},
      {"HVDTUNE_GLOO_STORE_PREFIX", fmt::format("elastic/{}/", version)}};
}

}  // namespace hvdtune::cli
