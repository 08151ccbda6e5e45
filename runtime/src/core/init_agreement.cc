#include "core/init_agreement.h"

#include <sstream>
#include <vector>

#include "core/message.h"

namespace hvdtune::internal {
namespace {

std::string RanksPerNode(int v) {
  return v > 0 ? std::to_string(v) : std::string("unset");
}

std::string OnOff(bool v) { return v ? "1" : "0"; }

std::string Seconds(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// "<var> differs between ranks: rank 0 has A, rank R has B (...)".
std::string Differs(std::string_view var, const std::string& a, int r,
                    const std::string& b) {
  std::ostringstream os;
  os << var << " differs between ranks: rank 0 has " << a << ", rank " << r
     << " has " << b << " (every rank must use the same value)";
  return os.str();
}

// The first disagreement between rank 0's vote and rank r's, or "".
std::string Compare(const InitVote& v0, const InitVote& v, int r) {
  if (v.ranks_per_node != v0.ranks_per_node) {
    return Differs("HVDTUNE_RANKS_PER_NODE", RanksPerNode(v0.ranks_per_node), r,
                   RanksPerNode(v.ranks_per_node));
  }
  if (v.fusion_lookahead != v0.fusion_lookahead) {
    return Differs("HVDTUNE_FUSION_LOOKAHEAD", OnOff(v0.fusion_lookahead), r,
                   OnOff(v.fusion_lookahead));
  }
  if (v.autotune != v0.autotune) {
    return Differs("HOROVOD_AUTOTUNE", OnOff(v0.autotune), r,
                   OnOff(v.autotune));
  }
  if (v.stall_check_seconds != v0.stall_check_seconds) {
    return Differs("HOROVOD_STALL_CHECK_TIME_SECONDS",
                   Seconds(v0.stall_check_seconds), r,
                   Seconds(v.stall_check_seconds));
  }
  if (v.stall_shutdown_seconds != v0.stall_shutdown_seconds) {
    return Differs("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
                   Seconds(v0.stall_shutdown_seconds), r,
                   Seconds(v.stall_shutdown_seconds));
  }
  for (const KnobSpec& spec : KnobTable()) {
    if (v.knobs.Get(spec.id) != v0.knobs.Get(spec.id)) {
      return Differs(spec.env, v0.knobs.FormatValue(spec.id), r,
                     v.knobs.FormatValue(spec.id));
    }
  }
  return {};
}

}  // namespace

void AgreeOnConfig(ControlTransport& control, const RuntimeConfig& config,
                   const std::string& local_error) {
  InitVote mine;
  mine.ok = local_error.empty();
  mine.error = local_error;
  mine.ranks_per_node = config.settings.ranks_per_node;
  mine.fusion_lookahead = config.settings.fusion_lookahead;
  mine.autotune = config.autotune.enabled;
  mine.stall_check_seconds = config.settings.stall_check_seconds;
  mine.stall_shutdown_seconds = config.settings.stall_shutdown_seconds;
  mine.knobs = config.knobs.values;
  Writer w;
  Serialize(mine, w);
  const auto all = control.AllgatherBytes(w.bytes());
  std::vector<InitVote> votes;
  for (const auto& bytes : all) {
    Reader rd(bytes.data(), bytes.size());
    try {
      votes.push_back(DeserializeInitVote(rd));
    } catch (const std::exception& e) {
      throw ConfigError(std::string("ranks run different hvdtune builds: ") +
                        e.what());
    }
  }
  // The local error first, so each rank states its own problem; the others
  // name the rank at fault.
  if (!local_error.empty()) throw ConfigError(local_error);
  for (std::size_t r = 0; r < votes.size(); ++r) {
    if (!votes[r].ok) {
      throw ConfigError("rank " + std::to_string(r) +
                        " rejected its configuration: " + votes[r].error);
    }
  }
  for (std::size_t r = 1; r < votes.size(); ++r) {
    const std::string diff = Compare(votes[0], votes[r], static_cast<int>(r));
    if (!diff.empty()) throw ConfigError(diff);
  }
}

std::string_view TopologyAllreduceAlgorithm(ControlTransport& control,
                                            const World& world,
                                            EngineKind engine, bool devices) {
  // A node's first rank is in the cross group of every node, so some rank
  // sees cross_size > 1 exactly when there is more than one node.
  constexpr std::uint8_t kSharesNode = 1, kSpansNodes = 2;
  const std::uint8_t mine =
      static_cast<std::uint8_t>((world.local_size > 1 ? kSharesNode : 0) |
                                (world.cross_size > 1 ? kSpansNodes : 0));
  std::uint8_t any = 0;
  for (const auto& bytes : control.AllgatherBytes({mine})) {
    if (!bytes.empty()) any = static_cast<std::uint8_t>(any | bytes[0]);
  }
  return DefaultAllreduceAlgorithm((any & kSharesNode) != 0,
                                   (any & kSpansNodes) != 0, engine, devices);
}

}  // namespace hvdtune::internal
