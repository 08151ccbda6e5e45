// One enqueued collective as the cycle thread holds it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/handle_state.h"
#include "core/message.h"

namespace hvdtune::internal {

struct TensorEntry {
  Request request;
  const void* input = nullptr;
  void* output = nullptr;
  std::shared_ptr<HandleState> handle;
  /// The tensor's size in bytes (this rank's part, for an allgather).
  std::int64_t bytes = 0;
  /// Which of the handle's outputs is this tensor's (its place in the
  /// submission).
  std::int32_t part = 0;
  /// A rank that joined runs the others' allreduces with a stand-in entry
  /// (no handle, no id): its neutral input and a discarded output.
  std::vector<std::uint8_t> scratch;
  /// Runtime clock: when the application enqueued it, and when every rank
  /// had agreed to run it.
  double enqueued = 0;
  double negotiated = 0;
};

/// One collective as the application submits it: views of the caller's
/// name and shape, copied into a pooled TensorEntry under the queue's lock
/// (whose buffers are reused, so a steady state allocates nothing).
struct EntrySpec {
  std::string_view name;
  CollectiveType type = CollectiveType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  std::span<const std::int64_t> shape;
  const void* input = nullptr;
  void* output = nullptr;
  ReduceOp op = ReduceOp::kSum;
  std::int32_t root = 0;
  std::string_view group;
  std::int32_t group_size = 0;
  /// Alltoall: rows sent to each rank (empty: an even split).
  std::span<const std::int64_t> splits;
};

}  // namespace hvdtune::internal
