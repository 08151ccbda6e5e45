// The fusion buffer: allreduces a group of tensors as one concatenation,
// chunk by chunk (copy in, reduce, copy out while the chunk is in cache), so
// the buffer never needs more than one chunk. Where the members lie back to
// back in memory in the group's order, a chunk is reduced where it lies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "hvdtune/status.h"

namespace hvdtune::internal {

/// One tensor of a fused group; a zero-byte member may have null buffers.
struct FusedMember {
  const void* input = nullptr;
  void* output = nullptr;
  std::size_t bytes = 0;
};

class FusionBuffer {
 public:
  /// Reduces `count` elements from `in` into `out` (the chunk step: the
  /// allreduce algorithm and, for an average, the division).
  using ReduceChunk =
      std::function<Status(const void* in, void* out, std::int64_t count)>;

  /// Runs `reduce` over the members' concatenation in chunks of
  /// `chunk_bytes` (0: one piece). A chunk within members whose inputs and
  /// outputs each follow one another in memory (a single member, or views
  /// of one flat buffer in address order) is reduced straight from the
  /// inputs into the outputs, with no copy; other chunks are copied.
  Status Allreduce(std::span<const FusedMember> members,
                   std::size_t element_size, std::int64_t chunk_bytes,
                   const ReduceChunk& reduce);

  std::size_t capacity() const { return buffer_.size(); }

 private:
  std::vector<std::uint8_t> buffer_;
};

}  // namespace hvdtune::internal
