// The list of allreduce algorithms. Adding one is a line here.
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "algorithms/algorithm.h"
#include "algorithms/hierarchical.h"
#include "algorithms/native.h"
#include "algorithms/ring.h"

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

constexpr auto kNames = [] {
  std::array<std::string_view, std::size(kRegistry)> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = kRegistry[i].name;
  return names;
}();

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

namespace hvdtune {

std::span<const std::string_view> AllreduceAlgorithms() {
  return internal::kNames;
}

}  // namespace hvdtune
