#include <stdexcept>

#include "algorithms/algorithm.h"
#include "algorithms/hierarchical.h"
#include "algorithms/native.h"
#include "algorithms/ring.h"

namespace hvdtune::internal {

std::vector<std::unique_ptr<AllreduceAlgorithm>> MakeAllreduceAlgorithms() {
  std::vector<std::unique_ptr<AllreduceAlgorithm>> all;
  all.push_back(std::make_unique<NativeAllreduce>());
  all.push_back(std::make_unique<RingAllreduce>());
  all.push_back(std::make_unique<HierarchicalAllreduce>());
  // The knob's choices and this list must name the same algorithms in the
  // same order.
  if (all.size() != kAllreduceAlgorithmChoices.size()) {
    throw std::logic_error("allreduce algorithm registry out of sync");
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i]->name() != kAllreduceAlgorithmChoices[i]) {
      throw std::logic_error("allreduce algorithm registry out of sync");
    }
  }
  return all;
}

}  // namespace hvdtune::internal
