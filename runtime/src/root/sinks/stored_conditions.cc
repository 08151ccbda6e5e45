#include "root/sinks/stored_conditions.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "hvdtune/tuner/autotune_policy.h"

namespace hvdtune::internal {
namespace {

// Drops the trailing samples of a segment that a re-tune ended which lie
// beyond 3 spreads from its median, on the side the last one is.
void TrimDrift(std::vector<double>& scores) {
  if (scores.size() < 2) return;
  std::vector<double> logs(scores.size());
  std::transform(scores.begin(), scores.end(), logs.begin(),
                 [](double x) { return std::log(x); });
  const auto [median, spread] = tuner::RobustSpreadOf(logs);
  const double side = logs.back() < median ? -1.0 : 1.0;
  std::size_t keep = logs.size();
  while (keep > 1 && side * (logs[keep - 1] - median) > 3 * spread) --keep;
  scores.resize(keep);
}

}  // namespace

std::vector<StoredCondition> SplitStoredConditions(
    const std::vector<store::Sample>& samples, const store::Best* best,
    std::size_t max) {
  // Segments in the order they began. Each run has at most one open
  // segment: samples of jobs that ran at once interleave in the store.
  std::vector<StoredCondition> segments;
  struct Open {
    std::size_t segment;        // index into segments
    const store::Sample* last;  // its last sample
  };
  std::map<std::int64_t, Open> open;  // by run
  // Closes `run`'s open segment; `next` is that run's next sample, if any.
  auto close = [&](std::int64_t run, const store::Sample* next) {
    const auto it = open.find(run);
    if (it == open.end()) return;
    const store::Sample* last = it->second.last;
    const bool retuned = next != nullptr && next->index == last->index + 1 &&
                         next->phase == "retuning";
    if (retuned) TrimDrift(segments[it->second.segment].scores);
    open.erase(it);
  };
  for (const store::Sample& s : samples) {
    const bool frozen =
        s.phase == "frozen" && s.score > 0 && std::isfinite(s.score);
    const auto it = open.find(s.run);
    const bool continues = it != open.end() && frozen &&
                           s.index == it->second.last->index + 1 &&
                           s.values == it->second.last->values;
    if (continues) {
      segments[it->second.segment].scores.push_back(s.score);
      it->second.last = &s;
      continue;
    }
    close(s.run, &s);
    if (frozen) {
      open[s.run] = {segments.size(), &s};
      segments.push_back({s.values, {s.score}});
    }
  }
  while (!open.empty()) close(open.begin()->first, nullptr);

  // Newest first, one per configuration.
  std::vector<StoredCondition> out;
  for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
    const bool seen = std::any_of(
        out.begin(), out.end(),
        [&](const StoredCondition& c) { return c.values == it->values; });
    if (!seen) out.push_back(std::move(*it));
  }
  if (best != nullptr) {
    const auto found = std::find_if(
        out.begin(), out.end(),
        [&](const StoredCondition& c) { return c.values == best->values; });
    if (found != out.end()) {
      std::rotate(out.begin(), found, found + 1);
    } else if (best->score > 0 && std::isfinite(best->score)) {
      out.insert(out.begin(), StoredCondition{best->values, {best->score}});
    }
  }
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace hvdtune::internal
