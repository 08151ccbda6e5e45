#include "sinks/stored_conditions.h"

#include <algorithm>
#include <cmath>
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
  // Segments, oldest first.
  std::vector<StoredCondition> segments;
  const store::Sample* last = nullptr;  // the open segment's last sample
  auto close = [&](const store::Sample* next) {
    if (last == nullptr) return;
    StoredCondition& open = segments.back();
    const bool retuned = next != nullptr && next->index == last->index + 1 &&
                         next->phase == "retuning";
    if (retuned) TrimDrift(open.scores);
    if (open.scores.empty()) segments.pop_back();
    last = nullptr;
  };
  for (const store::Sample& s : samples) {
    const bool frozen =
        s.phase == "frozen" && s.score > 0 && std::isfinite(s.score);
    const bool continues = last != nullptr && frozen &&
                           s.index == last->index + 1 &&
                           s.values == last->values;
    if (continues) {
      segments.back().scores.push_back(s.score);
      last = &s;
      continue;
    }
    close(&s);
    if (frozen) {
      segments.push_back({s.values, {s.score}});
      last = &s;
    }
  }
  close(nullptr);

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
