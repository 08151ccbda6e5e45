// The list of allreduce algorithms. Adding one is a line here and its name
// in names.h (the knob table lists the names without linking this file).
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "api/algorithms/names.h"
#include "core/algorithms/algorithm.h"
#include "core/algorithms/hierarchical.h"
#include "core/algorithms/native.h"
#include "core/algorithms/ring.h"

namespace hvdtune::internal {
namespace {

struct Registration {
  std::string_view name;
  std::unique_ptr<AllreduceAlgorithm> (*make)();
};

template <class T>
std::unique_ptr<AllreduceAlgorithm> Make() {
  return std::make_unique<T>();
}

// The first is the default of the allreduce_algorithm knob.
constexpr Registration kRegistry[] = {
    {"native", Make<NativeAllreduce>},
    {"ring", Make<RingAllreduce>},
    {"hierarchical", Make<HierarchicalAllreduce>},
};

constexpr bool RegistryMatchesNames() {
  if (std::size(kRegistry) != std::size(kAllreduceAlgorithmNames)) {
    return false;
  }
  for (std::size_t i = 0; i < std::size(kRegistry); ++i) {
    if (kRegistry[i].name != kAllreduceAlgorithmNames[i]) return false;
  }
  return true;
}
static_assert(RegistryMatchesNames(),
              "kRegistry and kAllreduceAlgorithmNames (names.h) must list the "
              "same algorithms in the same order");

}  // namespace

std::vector<std::unique_ptr<AllreduceAlgorithm>> MakeAllreduceAlgorithms() {
  std::vector<std::unique_ptr<AllreduceAlgorithm>> all;
  for (const Registration& r : kRegistry) {
    all.push_back(r.make());
    if (all.back()->name() != r.name) {
      throw std::logic_error("allreduce algorithm registered as '" +
                             std::string(r.name) + "' calls itself '" +
                             std::string(all.back()->name()) + "'");
    }
  }
  return all;
}

}  // namespace hvdtune::internal
