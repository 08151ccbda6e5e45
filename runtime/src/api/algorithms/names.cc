// AllreduceAlgorithms() for the knob table, from the names alone.
#include "api/algorithms/names.h"

#include "hvdtune/knobs.h"

namespace hvdtune {

std::span<const std::string_view> AllreduceAlgorithms() {
  return internal::kAllreduceAlgorithmNames;
}

}  // namespace hvdtune
