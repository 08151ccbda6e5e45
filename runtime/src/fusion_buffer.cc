#include "fusion_buffer.h"

#include <algorithm>
#include <cstring>

namespace hvdtune::internal {

Status FusionBuffer::Allreduce(std::span<const FusedMember> members,
                               std::size_t esize, std::int64_t chunk_bytes,
                               const ReduceChunk& reduce) {
  std::size_t total_bytes = 0;
  for (const FusedMember& m : members) total_bytes += m.bytes;
  const auto total = static_cast<std::int64_t>(total_bytes / esize);
  const std::int64_t chunk =
      chunk_bytes > 0 ? std::max<std::int64_t>(
                            1, chunk_bytes / static_cast<std::int64_t>(esize))
                      : std::max<std::int64_t>(1, total);
  Status s;
  if (members.size() == 1) {
    const auto* in = static_cast<const char*>(members[0].input);
    auto* out = static_cast<char*>(members[0].output);
    for (std::int64_t done = 0; done < total && s.ok(); done += chunk) {
      const std::size_t at = static_cast<std::size_t>(done) * esize;
      s = reduce(in + at, out + at, std::min(chunk, total - done));
    }
    return s;
  }
  const std::size_t buffer_bytes =
      static_cast<std::size_t>(
          std::min(chunk, std::max<std::int64_t>(total, 1))) *
      esize;
  if (buffer_.size() < buffer_bytes) buffer_.resize(buffer_bytes);
  // Cursors (member index, byte offset in it) for copying in and out.
  std::size_t in_t = 0, in_off = 0, out_t = 0, out_off = 0;
  for (std::int64_t done = 0; done < total && s.ok(); done += chunk) {
    const std::int64_t n = std::min(chunk, total - done);
    const std::size_t bytes = static_cast<std::size_t>(n) * esize;
    for (std::size_t filled = 0; filled < bytes;) {
      const std::size_t take =
          std::min(bytes - filled, members[in_t].bytes - in_off);
      if (take > 0) {  // a zero-byte member may have a null buffer
        std::memcpy(buffer_.data() + filled,
                    static_cast<const char*>(members[in_t].input) + in_off,
                    take);
      }
      filled += take;
      in_off += take;
      if (in_off == members[in_t].bytes) ++in_t, in_off = 0;
      while (in_t < members.size() && members[in_t].bytes == 0) ++in_t;
    }
    s = reduce(buffer_.data(), buffer_.data(), n);
    if (!s.ok()) break;
    for (std::size_t drained = 0; drained < bytes;) {
      while (members[out_t].bytes == 0) ++out_t;
      const std::size_t take =
          std::min(bytes - drained, members[out_t].bytes - out_off);
      std::memcpy(static_cast<char*>(members[out_t].output) + out_off,
                  buffer_.data() + drained, take);
      drained += take;
      out_off += take;
      if (out_off == members[out_t].bytes) ++out_t, out_off = 0;
    }
  }
  return s;
}

}  // namespace hvdtune::internal
