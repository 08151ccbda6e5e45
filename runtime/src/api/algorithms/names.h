// The allreduce algorithms' names, in registry order; the first is the
// allreduce_algorithm knob's default. The knob table (hvdtune::api) lists
// them without linking the algorithms themselves; registry.cc checks at
// compile time that it registers exactly these, in this order.
#pragma once

#include <string_view>

namespace hvdtune::internal {

inline constexpr std::string_view kAllreduceAlgorithmNames[] = {
    "native",
    "ring",
    "hierarchical",
};

}  // namespace hvdtune::internal
