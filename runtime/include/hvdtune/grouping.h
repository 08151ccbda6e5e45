// Gradient grouping and local gradient aggregation: helpers a framework layer
// uses on top of the runtime's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hvdtune/runtime.h"

namespace hvdtune {

/// Splits `num_tensors` tensors, in order, into `num_groups` contiguous
/// groups whose sizes differ by at most one (the first groups take the
/// extra); returns [begin, end) index ranges. num_groups <= 0 means no
/// grouping: one range per tensor. More groups than tensors gives one range
/// per tensor.
std::vector<std::pair<std::size_t, std::size_t>> SplitIntoGroups(
    std::size_t num_tensors, int num_groups);

/// Accumulates N local backward passes and allreduces once every N
/// (Horovod's backward_passes_per_step). The result written to `output` on
/// the N-th pass is the sum of the N passes divided by N (with
/// average_passes) and then reduced across ranks with `op`; with kAverage
/// and average_passes it is the mean over passes and ranks.
class LocalGradientAggregator {
 public:
  LocalGradientAggregator(Runtime& runtime, int backward_passes_per_step,
                          ReduceOp op = ReduceOp::kAverage,
                          bool average_passes = true);

  /// Adds one pass's gradient of tensor `name`. On the N-th pass since the
  /// last allreduce of `name` it starts the allreduce into `output` and
  /// returns its handle; on the other passes it returns an already
  /// completed handle and leaves `output` untouched. `grad` may be reused
  /// as soon as Add returns.
  Handle Add(const std::string& name, const void* grad, void* output,
             std::span<const std::int64_t> shape, DataType dtype);

  /// Passes accumulated for `name` since its last allreduce.
  int pending_passes(const std::string& name) const;
  int backward_passes_per_step() const { return passes_per_step_; }

 private:
  struct Slot {
    std::vector<std::uint8_t> sum;
    std::vector<std::int64_t> shape;
    DataType dtype = DataType::kFloat32;
    int passes = 0;
    Handle in_flight;
  };

  Runtime& runtime_;
  int passes_per_step_;
  ReduceOp op_;
  bool average_passes_;
  std::unordered_map<std::string, Slot> slots_;
};

}  // namespace hvdtune
