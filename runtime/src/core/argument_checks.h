// The argument checks every collective entry point shares (C++ and C API):
// everything that can be checked on the calling rank alone. Each returns ""
// when the arguments are fine, else the error text for kInvalidArgument.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "hvdtune/types.h"

namespace hvdtune::internal {

/// Elements and bytes of a tensor of `shape` and `dtype`, or the reason
/// there are none: a negative dimension, or a count whose byte size does not
/// fit in `max_bytes` (every size the runtime computes is a signed 64-bit
/// byte count, so `max_bytes` is at most INT64_MAX).
struct TensorSize {
  std::int64_t elements = 0;
  std::int64_t bytes = 0;
  std::string error;
};
TensorSize SizeOf(std::string_view name, std::span<const std::int64_t> shape,
                  DataType dtype, std::int64_t max_bytes);

std::string CheckAllreduceArgs(std::string_view name, const void* input,
                               const void* output,
                               std::span<const std::int64_t> shape,
                               DataType dtype, ReduceOp op);
std::string CheckBroadcastArgs(std::string_view name, const void* buffer,
                               std::span<const std::int64_t> shape,
                               DataType dtype, int root, int world_size);
/// The gathered result must fit too: one rank's bytes times the world size.
std::string CheckAllgatherArgs(std::string_view name, const void* input,
                               std::span<const std::int64_t> shape,
                               DataType dtype, int world_size);
/// At least one dimension; op as for allreduce (no bool).
std::string CheckReducescatterArgs(std::string_view name, const void* input,
                                   std::span<const std::int64_t> shape,
                                   DataType dtype, ReduceOp op);
/// At least one dimension; `splits` empty (shape[0] divisible by the world
/// size) or one non-negative count per rank adding up to shape[0]. What is
/// received must fit too: this rank's bytes times the world size.
std::string CheckAlltoallArgs(std::string_view name, const void* input,
                              std::span<const std::int64_t> shape,
                              DataType dtype,
                              std::span<const std::int64_t> splits,
                              int world_size);

}  // namespace hvdtune::internal
