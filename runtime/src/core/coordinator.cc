#include "core/coordinator.h"

#include <algorithm>
#include <sstream>

namespace hvdtune::internal {
namespace {

std::string ShapeString(const std::vector<std::int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) os << ", ";
    os << shape[i];
  }
  os << ']';
  return os.str();
}

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r);
  }
  return out;
}

}  // namespace

// The wait after which a cached tensor is renegotiated in full so rank 0
// can see who is missing: the earlier of the two stall times in use.
double StallThreshold(const StallSettings& s) {
  if (s.check_seconds > 0 && s.shutdown_seconds > 0) {
    return std::min(s.check_seconds, s.shutdown_seconds);
  }
  return std::max(s.check_seconds, s.shutdown_seconds);
}

Coordinator::Coordinator(int world_size, StallSettings stall)
    : size_(world_size),
      stall_(stall),
      joined_(static_cast<std::size_t>(world_size), false) {}

std::vector<Response> Coordinator::Add(std::vector<Request> requests,
                                       double now) {
  for (Request& r : requests) {
    if (r.type == CollectiveType::kJoin) {
      if (r.rank >= 0 && r.rank < size_ &&
          !joined_[static_cast<std::size_t>(r.rank)]) {
        joined_[static_cast<std::size_t>(r.rank)] = true;
        ++joined_count_;
        last_joined_ = r.rank;
        join_name_ = r.name;
      }
      continue;
    }
    auto [it, inserted] = table_.try_emplace(r.name);
    TableEntry& e = it->second;
    const double since = now - std::max(0.0, r.waited_seconds);
    if (inserted) {
      e.by_rank.resize(static_cast<std::size_t>(size_));
      table_order_.push_back(r.name);
      e.since = since;
    } else {
      e.since = std::min(e.since, since);
    }
    if (r.rank < 0 || r.rank >= size_) continue;
    Request& slot = e.by_rank[static_cast<std::size_t>(r.rank)];
    if (slot.name.empty()) ++e.received;
    slot = std::move(r);
  }
  std::vector<Response> out;
  std::vector<std::string> still_waiting;
  for (std::string& name : table_order_) {
    auto it = table_.find(name);
    int absent_joined = 0;
    for (int r = 0; joined_count_ > 0 && r < size_; ++r) {
      absent_joined +=
          joined_[static_cast<std::size_t>(r)] &&
          it->second.by_rank[static_cast<std::size_t>(r)].name.empty();
    }
    if (it->second.received + absent_joined == size_) {
      out.push_back(BuildResponse(it->second.by_rank));
      table_.erase(it);
    } else {
      still_waiting.push_back(std::move(name));
    }
  }
  table_order_ = std::move(still_waiting);
  if (joined_count_ == size_) {
    Response join;
    join.name = join_name_;
    join.type = CollectiveType::kJoin;
    join.root = last_joined_;
    out.push_back(std::move(join));
    joined_.assign(joined_.size(), false);
    joined_count_ = 0;
    last_joined_ = -1;
  }
  return out;
}

Response Coordinator::BuildResponse(const std::vector<Request>& reqs) const {
  // The first rank that asked is the reference; ranks that did not ask have
  // joined.
  std::size_t ref = 0;
  while (ref + 1 < reqs.size() && reqs[ref].name.empty()) ++ref;
  const Request& first = reqs[ref];
  const std::string ref_rank = std::to_string(ref);
  std::vector<int> joined;
  Response resp;
  resp.name = first.name;
  resp.type = first.type;
  resp.dtype = first.dtype;
  resp.op = first.op;
  resp.root = first.root;
  resp.group = first.group;
  resp.group_size = first.group_size;
  resp.device = first.device;
  auto fail = [&](const std::string& what, const std::string& a, int rank,
                  const std::string& b) {
    resp.kind = Response::Kind::kError;
    resp.first_dims.clear();
    resp.error = "mismatched " + what + " for tensor '" + first.name +
                 "': rank " + ref_rank + " has " + a + ", rank " +
                 std::to_string(rank) + " has " + b;
    return resp;
  };
  for (int r = 0; r < static_cast<int>(reqs.size()); ++r) {
    const Request& q = reqs[static_cast<std::size_t>(r)];
    if (static_cast<std::size_t>(r) == ref) continue;
    if (q.name.empty()) {
      joined.push_back(r);
      continue;
    }
    if (q.type != first.type) {
      return fail("collective", std::string(CollectiveTypeName(first.type)), r,
                  std::string(CollectiveTypeName(q.type)));
    }
    if (q.dtype != first.dtype) {
      return fail("dtype", std::string(DataTypeName(first.dtype)), r,
                  std::string(DataTypeName(q.dtype)));
    }
    if ((first.type == CollectiveType::kAllreduce ||
         first.type == CollectiveType::kReducescatter) &&
        q.op != first.op) {
      return fail("reduce op", std::string(ReduceOpName(first.op)), r,
                  std::string(ReduceOpName(q.op)));
    }
    if (first.type == CollectiveType::kBroadcast && q.root != first.root) {
      return fail("broadcast root", std::to_string(first.root), r,
                  std::to_string(q.root));
    }
    if (q.device != first.device) {
      auto where = [](bool d) {
        return std::string(d ? "device memory" : "host memory");
      };
      return fail("buffer location", where(first.device), r, where(q.device));
    }
    if (q.group != first.group || q.group_size != first.group_size) {
      auto describe = [](const Request& x) {
        return x.group_size > 0 ? "group '" + x.group + "' of " +
                                      std::to_string(x.group_size)
                                : std::string("no group");
      };
      return fail("grouping", describe(first), r, describe(q));
    }
    if (first.type == CollectiveType::kAllgather ||
        first.type == CollectiveType::kAlltoall) {
      const bool same_tail = q.shape.size() == first.shape.size() &&
                             !q.shape.empty() &&
                             std::equal(q.shape.begin() + 1, q.shape.end(),
                                        first.shape.begin() + 1);
      if (!same_tail) {
        return fail("shape (all but the first dimension must agree)",
                    ShapeString(first.shape), r, ShapeString(q.shape));
      }
    } else if (q.shape != first.shape) {
      return fail("shape", ShapeString(first.shape), r, ShapeString(q.shape));
    }
  }
  // Negotiated with ranks missing: no rank caches it (the joined ranks have
  // no request to cache it with).
  resp.joined = !joined.empty();
  if (!joined.empty() && first.type != CollectiveType::kAllreduce &&
      first.type != CollectiveType::kBarrier) {
    resp.kind = Response::Kind::kError;
    resp.error = std::string(CollectiveTypeName(first.type)) + " of tensor '" +
                 first.name + "' is not supported while ranks have joined (" +
                 RankList(joined) +
                 " called join): only allreduce and barrier are";
    return resp;
  }
  if (!joined.empty() && first.type == CollectiveType::kAllreduce) {
    resp.shape = first.shape;
  }
  if (first.type == CollectiveType::kReducescatter) {
    // Horovod's split: the first shape[0] % size ranks get one row more.
    const std::int64_t rows = first.shape[0];
    for (int r = 0; r < size_; ++r) {
      resp.first_dims.push_back(rows / size_ + (r < rows % size_ ? 1 : 0));
    }
  }
  if (first.type == CollectiveType::kAlltoall) {
    // Row (s, d): what rank s sends rank d. What one rank receives must add
    // up without overflow (what it sends was checked at enqueue).
    resp.first_dims.assign(static_cast<std::size_t>(size_) * size_, 0);
    for (int s = 0; s < size_; ++s) {
      const Request& q = reqs[static_cast<std::size_t>(s)];
      for (int d = 0; d < size_; ++d) {
        resp.first_dims[static_cast<std::size_t>(s * size_ + d)] =
            q.splits.empty() ? q.shape[0] / size_
                             : q.splits[static_cast<std::size_t>(d)];
      }
    }
    for (int d = 0; d < size_; ++d) {
      std::int64_t rows = 0;
      for (int s = 0; s < size_; ++s) {
        if (__builtin_add_overflow(
                rows, resp.first_dims[static_cast<std::size_t>(s * size_ + d)],
                &rows)) {
          resp.kind = Response::Kind::kError;
          resp.first_dims.clear();
          resp.error = "alltoall of tensor '" + first.name + "': rank " +
                       std::to_string(d) +
                       " would receive more than 2^63 - 1 rows";
          return resp;
        }
      }
    }
  }
  if (first.type == CollectiveType::kBroadcast &&
      (first.root < 0 || first.root >= size_)) {
    resp.kind = Response::Kind::kError;
    resp.error = "broadcast root " + std::to_string(first.root) +
                 " of tensor '" + first.name + "' is not a rank of 0.." +
                 std::to_string(size_ - 1);
    return resp;
  }
  if (first.type == CollectiveType::kAllgather) {
    // Each rank's part fits (checked at enqueue); their sum must too, even
    // when the rows are empty and no byte would move.
    std::int64_t rows = 0;
    for (const Request& q : reqs) {
      if (__builtin_add_overflow(rows, q.shape[0], &rows)) {
        resp.kind = Response::Kind::kError;
        resp.first_dims.clear();
        resp.error = "allgather of tensor '" + first.name +
                     "': the ranks' first dimensions add up to more than "
                     "2^63 - 1 rows";
        return resp;
      }
      resp.first_dims.push_back(q.shape[0]);
    }
  }
  return resp;
}

void Coordinator::CheckStalls(double now, std::vector<StallEvent>* stalls,
                              std::vector<Response>* failed) {
  if (StallThreshold(stall_) <= 0 || table_.empty()) return;
  // Past the shutdown time, oldest first.
  std::vector<std::pair<double, std::string>> expired;
  auto split = [&](const TableEntry& e, std::vector<int>* present,
                   std::vector<int>* missing) {
    for (int r = 0; r < size_; ++r) {
      (e.by_rank[static_cast<std::size_t>(r)].name.empty() ? missing : present)
          ->push_back(r);
    }
  };
  for (auto& [name, e] : table_) {
    const double waited = now - e.since;
    if (stall_.shutdown_seconds > 0 && waited > stall_.shutdown_seconds) {
      expired.emplace_back(e.since, name);
      continue;
    }
    const bool warn = stall_.check_seconds > 0 &&
                      waited > stall_.check_seconds &&
                      (e.warned == 0 || now - e.warned > stall_.check_seconds);
    if (!warn) continue;
    StallEvent ev;
    ev.tensor = name;
    std::vector<int> present;
    split(e, &present, &ev.missing_ranks);
    ev.waited_seconds = waited;
    ev.time = now;
    e.warned = now;
    stalls->push_back(std::move(ev));
  }
  std::sort(expired.begin(), expired.end());
  // A rank that submitted a tensor failing now was waiting on it, not free
  // to submit another: a tensor missing only such ranks gets a new stall
  // time from now instead of failing with it. Ranks out of step by one
  // collective (one rank submitted A, the others B) then lose A and meet at
  // B, instead of losing both and staying out of step.
  std::vector<bool> freed(static_cast<std::size_t>(size_), false);
  for (const auto& [since, name] : expired) {
    TableEntry& e = table_.at(name);
    StallEvent ev;
    ev.tensor = name;
    std::vector<int> present;
    split(e, &present, &ev.missing_ranks);
    if (std::any_of(
            ev.missing_ranks.begin(), ev.missing_ranks.end(),
            [&](int r) { return freed[static_cast<std::size_t>(r)]; })) {
      e.since = now;
      continue;
    }
    ev.waited_seconds = now - since;
    ev.shutdown = true;
    ev.time = now;
    Response resp;
    for (const Request& q : e.by_rank) {
      if (!q.name.empty()) {
        resp = BuildResponse(std::vector<Request>(size_, q));
        break;
      }
    }
    resp.kind = Response::Kind::kError;
    resp.stalled = true;
    resp.first_dims.clear();
    std::ostringstream os;
    os << "tensor '" << name << "' stalled: rank"
       << (ev.missing_ranks.size() > 1 ? "s " : " ")
       << RankList(ev.missing_ranks) << " did not submit it within "
       << "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" << stall_.shutdown_seconds
       << " s (submitted by rank" << (present.size() > 1 ? "s " : " ")
       << RankList(present) << ")";
    resp.error = os.str();
    failed->push_back(std::move(resp));
    for (int r : present) freed[static_cast<std::size_t>(r)] = true;
    stalls->push_back(std::move(ev));
    table_.erase(name);
    std::erase(table_order_, name);
  }
}

void GroupRelease::Release(std::vector<Response>* ready) {
  // Nothing grouped: the list passes through untouched.
  if (std::none_of(ready->begin(), ready->end(),
                   [](const Response& r) { return r.group_size > 1; })) {
    return;
  }
  // Every rank sees the same ready lists in the same order, so the pools
  // fill and release identically everywhere.
  std::vector<Response>& out = out_;
  out.clear();
  for (Response& r : *ready) {
    if (r.group_size <= 1) {
      out.push_back(std::move(r));
      continue;
    }
    const std::string group = r.group;
    const std::int32_t size = r.group_size;
    GroupState& g = groups_[group];
    ++g.arrived;
    if (r.kind == Response::Kind::kError && g.error.empty()) {
      // The first failure fails the whole group: members already waiting
      // are released as failures now, later ones as they arrive.
      g.error = "grouped allreduce '" + group + "' failed: " + r.error;
      for (Response& waiting : g.members) {
        waiting.kind = Response::Kind::kError;
        waiting.error = g.error;
        out.push_back(std::move(waiting));
      }
      g.members.clear();
    }
    if (!g.error.empty()) {
      r.kind = Response::Kind::kError;
      r.error = g.error;
      out.push_back(std::move(r));
    } else {
      g.members.push_back(std::move(r));
    }
    if (g.arrived >= size) {
      for (Response& m : g.members) out.push_back(std::move(m));
      groups_.erase(group);
    }
  }
  ready->swap(out);
}

}  // namespace hvdtune::internal
