// The stall check of the controller (HOROVOD_STALL_CHECK_TIME_SECONDS,
// HOROVOD_STALL_SHUTDOWN_TIME_SECONDS).
#include <algorithm>
#include <sstream>

#include "controller.h"

namespace hvdtune::internal {
namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r);
  }
  return out;
}

// The wait after which a cached tensor is renegotiated in full so rank 0
// can see who is missing: the earlier of the two stall times in use.
double StallThreshold(const StallSettings& s) {
  if (s.check_seconds > 0 && s.shutdown_seconds > 0) {
    return std::min(s.check_seconds, s.shutdown_seconds);
  }
  return std::max(s.check_seconds, s.shutdown_seconds);
}

}  // namespace

void Controller::InvalidateStalledHits(double now) {
  const double threshold = StallThreshold(stall_);
  if (threshold <= 0) return;
  for (const auto& [bit, name] : hit_pending_) {
    if (now - pending_.at(name).enqueued > threshold) invalid_.push_back(bit);
  }
}

bool Controller::StallShutdownDue(double now) const {
  if (stall_.shutdown_seconds <= 0) return false;
  for (const auto& [name, e] : table_) {
    if (now - e.since > stall_.shutdown_seconds) return true;
  }
  return false;
}

void Controller::CheckStalls(double now, std::vector<StallEvent>* stalls,
                             std::vector<Response>* failed) {
  if (StallThreshold(stall_) <= 0 || table_.empty()) return;
  std::vector<std::string> ended;
  for (auto& [name, e] : table_) {
    const double waited = now - e.since;
    const bool warn = stall_.check_seconds > 0 &&
                      waited > stall_.check_seconds &&
                      (e.warned == 0 || now - e.warned > stall_.check_seconds);
    const bool shut =
        stall_.shutdown_seconds > 0 && waited > stall_.shutdown_seconds;
    if (!warn && !shut) continue;
    StallEvent ev;
    ev.tensor = name;
    std::vector<int> present;
    for (int r = 0; r < mpi_.size; ++r) {
      (e.by_rank[static_cast<std::size_t>(r)].name.empty() ? ev.missing_ranks
                                                           : present)
          .push_back(r);
    }
    ev.waited_seconds = waited;
    ev.shutdown = shut;
    ev.time = now;
    if (shut) {
      Response resp;
      for (const Request& q : e.by_rank) {
        if (!q.name.empty()) {
          resp = BuildResponse(std::vector<Request>(mpi_.size, q));
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
      ended.push_back(name);
    } else {
      e.warned = now;
    }
    stalls->push_back(std::move(ev));
  }
  for (const std::string& name : ended) {
    table_.erase(name);
    std::erase(table_order_, name);
  }
}

void Controller::Reroute(std::uint32_t bit) {
  const auto it = hit_pending_.find(bit);
  if (it == hit_pending_.end()) return;
  to_send_.push_back(pending_.at(it->second));
  hit_pending_.erase(it);
}

void Controller::ResizeCache(std::size_t capacity) {
  for (const auto& [bit, name] : hit_pending_) {
    to_send_.push_back(pending_.at(name));
  }
  hit_pending_.clear();
  cache_ = ResponseCache(capacity);
}

}  // namespace hvdtune::internal
