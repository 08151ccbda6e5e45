#include "core/fusion_buffer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace hvdtune::internal {
namespace {

const char* In(const FusedMember& m) {
  return static_cast<const char*>(m.input);
}
char* Out(const FusedMember& m) { return static_cast<char*>(m.output); }

}  // namespace

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
  // The member holding the chunk's first byte (never a zero-byte one, which
  // may have null buffers) and where the member begins in the
  // concatenation.
  std::size_t first = 0, first_at = 0;
  Status s;
  for (std::int64_t done = 0; done < total && s.ok(); done += chunk) {
    const std::int64_t n = std::min(chunk, total - done);
    const std::size_t lo = static_cast<std::size_t>(done) * esize;
    const std::size_t bytes = static_cast<std::size_t>(n) * esize;
    while (first_at + members[first].bytes <= lo) {
      first_at += members[first].bytes;
      ++first;
    }
    // Members that lie back to back in the caller's memory, inputs and
    // outputs alike, in this order (a flat gradient buffer), are their own
    // concatenation: the chunk is reduced where it lies, with no copy.
    bool in_place = true;
    std::size_t last = first, end = first_at + members[first].bytes;
    while (end < lo + bytes && in_place) {
      std::size_t next = last + 1;
      while (members[next].bytes == 0) ++next;
      in_place = In(members[next]) == In(members[last]) + members[last].bytes &&
                 Out(members[next]) == Out(members[last]) + members[last].bytes;
      last = next;
      end += members[next].bytes;
    }
    const std::size_t skip = lo - first_at;
    const char* in = In(members[first]) + skip;
    char* out = Out(members[first]) + skip;
    // Inputs and outputs that partly overlap (one tensor's output is
    // another's input) go through the buffer, as they did before.
    const auto at = [](const void* p) {
      return reinterpret_cast<std::uintptr_t>(p);
    };
    if (in_place &&
        (in == out || at(in) + bytes <= at(out) || at(out) + bytes <= at(in))) {
      s = reduce(in, out, n);
      continue;
    }
    if (buffer_.size() < bytes) buffer_.resize(bytes);
    std::size_t k = first, off = skip;
    for (std::size_t filled = 0; filled < bytes; ++k, off = 0) {
      const std::size_t take = std::min(bytes - filled, members[k].bytes - off);
      if (take > 0)
        std::memcpy(buffer_.data() + filled, In(members[k]) + off, take);
      filled += take;
    }
    s = reduce(buffer_.data(), buffer_.data(), n);
    if (!s.ok()) break;
    k = first, off = skip;
    for (std::size_t drained = 0; drained < bytes; ++k, off = 0) {
      const std::size_t take =
          std::min(bytes - drained, members[k].bytes - off);
      if (take > 0)
        std::memcpy(Out(members[k]) + off, buffer_.data() + drained, take);
      drained += take;
    }
  }
  return s;
}

}  // namespace hvdtune::internal
