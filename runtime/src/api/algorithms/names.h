// The allreduce algorithms' names, the allreduce_algorithm knob's choices;
// the first is its default. Each engine declares which it serves (a choice
// means that engine's algorithm of that name: "ring" is the runtime's own
// ring on MPI, Gloo's ring on Gloo). The knob table (hvdtune::api) lists
// them without linking the algorithms themselves; the MPI registry
// (core/algorithms/registry.cc) checks at compile time that it registers
// exactly the MPI choices, in this order, and the Gloo engine makes one per
// Gloo choice.
#pragma once

#include <cstdint>
#include <string_view>

#include "hvdtune/knobs.h"

namespace hvdtune::internal {

inline constexpr std::string_view kAllreduceAlgorithmNames[] = {
    "native", "ring", "hierarchical", "ring_chunked", "halving_doubling",
};

constexpr auto kMpiAndGloo =
    static_cast<std::uint8_t>(static_cast<unsigned>(EngineKind::kMpi) |
                              static_cast<unsigned>(EngineKind::kGloo));
constexpr auto kGlooOnly = static_cast<std::uint8_t>(EngineKind::kGloo);

/// The engines that serve each name (EngineKind bits), in the same order.
inline constexpr std::uint8_t kAllreduceAlgorithmEngines[] = {
    kMpiAndGloo, kMpiAndGloo, kMpiAndGloo, kGlooOnly, kGlooOnly,
};

static_assert(std::size(kAllreduceAlgorithmNames) ==
              std::size(kAllreduceAlgorithmEngines));

}  // namespace hvdtune::internal
