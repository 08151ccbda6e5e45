#include "hvdtune/grouping.h"

#include <cstring>
#include <memory>
#include <stdexcept>

#include "core/handle_state.h"
#include "core/reduce.h"

namespace hvdtune {

std::vector<std::pair<std::size_t, std::size_t>> SplitIntoGroups(
    std::size_t num_tensors, int num_groups) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  const std::size_t groups =
      num_groups <= 0
          ? num_tensors
          : std::min(num_tensors, static_cast<std::size_t>(num_groups));
  if (groups == 0) return out;
  const std::size_t base = num_tensors / groups;
  const std::size_t extra = num_tensors % groups;
  std::size_t begin = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t n = base + (g < extra ? 1 : 0);
    out.emplace_back(begin, begin + n);
    begin += n;
  }
  return out;
}

LocalGradientAggregator::LocalGradientAggregator(Runtime& runtime,
                                                 int backward_passes_per_step,
                                                 ReduceOp op,
                                                 bool average_passes)
    : runtime_(runtime),
      passes_per_step_(backward_passes_per_step),
      op_(op),
      average_passes_(average_passes) {
  if (backward_passes_per_step < 1) {
    throw std::invalid_argument(
        "backward_passes_per_step must be at least 1, got " +
        std::to_string(backward_passes_per_step));
  }
}

Handle LocalGradientAggregator::Add(const std::string& name, const void* grad,
                                    void* output,
                                    std::span<const std::int64_t> shape,
                                    DataType dtype) {
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d < 0 ? 0 : d;
  const std::size_t bytes =
      static_cast<std::size_t>(count) * DataTypeSize(dtype);
  Slot& slot = slots_[name];
  // The previous allreduce of this tensor reads slot.sum: let it finish.
  if (slot.in_flight.valid()) {
    slot.in_flight.Wait();
    slot.in_flight = Handle();
  }
  const bool same = slot.shape.size() == shape.size() &&
                    std::equal(shape.begin(), shape.end(), slot.shape.begin());
  if (slot.passes > 0 && (!same || slot.dtype != dtype)) {
    auto state = std::make_shared<internal::HandleState>();
    state->Complete(Status::InvalidArgument(
        "tensor '" + name + "' changed shape or dtype between the " +
        std::to_string(slot.passes) + " passes accumulated so far and now"));
    return Handle(state);
  }
  if (slot.passes == 0) {
    slot.shape.assign(shape.begin(), shape.end());
    slot.dtype = dtype;
    slot.sum.resize(bytes);
    if (bytes) std::memcpy(slot.sum.data(), grad, bytes);
  } else {
    ReduceInto(slot.sum.data(), grad, count, dtype, ReduceOp::kSum);
  }
  if (++slot.passes < passes_per_step_) {
    auto state = std::make_shared<internal::HandleState>();
    state->Complete(Status::Ok());
    return Handle(state);
  }
  if (average_passes_ && passes_per_step_ > 1) {
    DivideBy(slot.sum.data(), count, dtype, passes_per_step_);
  }
  slot.passes = 0;
  slot.in_flight =
      runtime_.Allreduce(name, slot.sum.data(), output, shape, dtype, op_);
  return slot.in_flight;
}

int LocalGradientAggregator::pending_passes(const std::string& name) const {
  const auto it = slots_.find(name);
  return it == slots_.end() ? 0 : it->second.passes;
}

}  // namespace hvdtune
