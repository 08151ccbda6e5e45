// Fusion planning: which ready tensors travel together in one backend call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hvdtune/types.h"

namespace hvdtune::internal {

/// What the planner needs to know of a ready tensor.
struct FusionItem {
  CollectiveType type = CollectiveType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::int64_t bytes = 0;
  /// Error responses are completed alone and never fused.
  bool error = false;
  /// Device tensors are reduced in place by NCCL, never through the host
  /// fusion buffer.
  bool device = false;
};

/// One backend call: indices into the planner's input, in input order.
struct FusionGroup {
  std::vector<std::size_t> members;
  std::int64_t bytes = 0;
};

/// Packs allreduces (and, apart from them, reducescatters) with the same
/// dtype and op into groups of at most
/// `threshold` bytes (a tensor larger than the threshold goes alone;
/// threshold 0 means no fusion). A tensor of another dtype does not close an
/// open group: each (dtype, op) has its own open buffer, so fp16 and fp32
/// gradients ready in one cycle fuse separately without breaking each other.
/// Every other item is a group of its own. Groups are ordered by their first
/// member. The result depends only on the inputs, so all ranks agree.
///
/// With look_ahead false, a tensor of another dtype or op closes the open
/// buffer (one open buffer at a time, in arrival order): the behaviour
/// look-ahead improves on, kept for comparison.
std::vector<FusionGroup> PlanFusion(const std::vector<FusionItem>& items,
                                    std::int64_t threshold,
                                    bool look_ahead = true);

}  // namespace hvdtune::internal
