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

// The MPI engine's algorithms: the choices of the allreduce_algorithm knob
// that it serves, in the knob's order (the first is the knob's default).
constexpr Registration kRegistry[] = {
    {"native", Make<NativeAllreduce>},
    {"ring", Make<RingAllreduce>},
    {"hierarchical", Make<HierarchicalAllreduce>},
};

constexpr bool RegistryMatchesNames() {
  std::size_t next = 0;
  constexpr auto kMpi = static_cast<std::uint8_t>(EngineKind::kMpi);
  for (std::size_t i = 0; i < std::size(kAllreduceAlgorithmNames); ++i) {
    if ((kAllreduceAlgorithmEngines[i] & kMpi) == 0) continue;
    if (next >= std::size(kRegistry) ||
        kRegistry[next].name != kAllreduceAlgorithmNames[i]) {
      return false;
    }
    ++next;
  }
  return next == std::size(kRegistry);
}
static_assert(RegistryMatchesNames(),
              "kRegistry must list the algorithms names.h says the MPI engine "
              "serves, in the same order");

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
