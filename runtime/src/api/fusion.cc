#include "hvdtune/fusion.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace hvdtune::internal {

std::vector<FusionGroup> PlanFusion(const std::vector<FusionItem>& items,
                                    std::int64_t threshold, bool look_ahead) {
  std::vector<FusionGroup> done;
  // Open group per (collective, dtype, op).
  std::map<std::tuple<int, int, int>, FusionGroup> open;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const FusionItem& it = items[i];
    const bool reduction = it.type == CollectiveType::kAllreduce ||
                           it.type == CollectiveType::kReducescatter;
    if (it.error || it.device || !reduction || threshold <= 0 ||
        it.bytes >= threshold) {
      done.push_back({{i}, it.bytes});
      continue;
    }
    const auto key =
        std::make_tuple(static_cast<int>(it.type), static_cast<int>(it.dtype),
                        static_cast<int>(it.op));
    if (!look_ahead) {
      // Close every other open buffer: only one may be open at a time.
      for (auto& [other, og] : open) {
        if (other != key && !og.members.empty()) {
          done.push_back(std::move(og));
          og = FusionGroup();
        }
      }
    }
    FusionGroup& g = open[key];
    if (!g.members.empty() && g.bytes + it.bytes > threshold) {
      done.push_back(std::move(g));
      g = FusionGroup();
    }
    g.members.push_back(i);
    g.bytes += it.bytes;
  }
  for (auto& [key, g] : open) {
    if (!g.members.empty()) done.push_back(std::move(g));
  }
  std::sort(done.begin(), done.end(),
            [](const FusionGroup& a, const FusionGroup& b) {
              return a.members.front() < b.members.front();
            });
  return done;
}

}  // namespace hvdtune::internal
