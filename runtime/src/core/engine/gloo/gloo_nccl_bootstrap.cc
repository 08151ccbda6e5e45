#include "core/engine/gloo/gloo_nccl_bootstrap.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/engine/gloo/gloo_exchange.h"

namespace hvdtune::internal {
namespace {

constexpr std::uint32_t kBootstrapTag = 0x6e62;  // "nb"

// Every rank's `mine` over the world's context, in rank order.
Status ExchangeInts(const GlooGroups& groups, std::int32_t mine,
                    std::vector<std::int32_t>* all) {
  all->assign(static_cast<std::size_t>(groups.world().size), 0);
  return groups.Guard("NCCL set-up exchange", [&] {
    ExchangeAll(groups.all(), &mine, sizeof mine, all->data(), kBootstrapTag,
                groups.timeout());
  });
}

}  // namespace

NcclBootstrap::Place GlooNcclBootstrap::place(Group group) const {
  const World& w = groups_.world();
  switch (group) {
    case Group::kLocal:
      return {w.local_rank, w.local_size};
    case Group::kCross:
      return {w.cross_rank, w.cross_size};
    case Group::kWorld:
      break;
  }
  return {w.rank, w.size};
}

Status GlooNcclBootstrap::Agree(const Status& local) {
  const World& w = groups_.world();
  std::vector<std::int32_t> all;
  Status s = ExchangeInts(groups_, local.ok() ? w.size : w.rank, &all);
  if (!s.ok()) return s;
  const int first = *std::min_element(all.begin(), all.end());
  if (first == w.size) return Status::Ok();
  const std::string& message = local.message();
  std::vector<char> text(message.begin(), message.end());
  s = groups_.Guard("NCCL set-up agreement", [&] {
    groups_.ShareThroughStore("nccl-agree", w.rank == first, &text);
  });
  if (!s.ok()) return s;
  std::string why(text.begin(), text.end());
  if (w.size > 1) {
    why += " (rank " + std::to_string(first) + " of " + std::to_string(w.size) +
           ")";
  }
  return Status::Internal(why);
}

Status GlooNcclBootstrap::Broadcast(Group group, void* data,
                                    std::size_t bytes) {
  const Place me = place(group);
  if (me.size == 1) return Status::Ok();
  // Names every rank of the group gives alike, and no other group.
  const std::string name =
      group == Group::kLocal ? "nccl-local" + std::to_string(groups_.node())
      : group == Group::kCross
          ? "nccl-cross" + std::to_string(groups_.world().local_rank)
          : std::string("nccl-world");
  const auto* p = static_cast<const char*>(data);
  std::vector<char> blob(p, p + bytes);
  const Status s = groups_.Guard("NCCL unique id exchange", [&] {
    groups_.ShareThroughStore(name, me.rank == 0, &blob);
  });
  if (!s.ok()) return s;
  if (blob.size() != bytes) {
    return Status::Internal("NCCL unique id exchange: the store held " +
                            std::to_string(blob.size()) + " bytes under " +
                            name + ", not " + std::to_string(bytes));
  }
  std::memcpy(data, blob.data(), bytes);
  return Status::Ok();
}

Status GlooNcclBootstrap::UniformNodes(bool* uniform) {
  std::vector<std::int32_t> sizes;
  const Status s = ExchangeInts(groups_, groups_.world().local_size, &sizes);
  if (!s.ok()) return s;
  *uniform = std::all_of(sizes.begin(), sizes.end(),
                         [&](std::int32_t n) { return n == sizes.front(); });
  return Status::Ok();
}

}  // namespace hvdtune::internal
