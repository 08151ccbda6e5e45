#include "core/engine/gloo/gloo_direct_allreduce.h"

#include <gloo/types.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "core/reduce.h"

namespace hvdtune::internal {
namespace {

// Slots of their own (the allreduce prefix with tags no Gloo collective of
// this engine uses): the reduce-scatter's and the allgather's messages from
// one peer never match each other's receives.
constexpr std::uint32_t kScatterTag = 0x64726300;  // "drc"
constexpr std::uint32_t kGatherTag = 0x64726700;   // "drg"

using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

// Gloo's waits return false only when someone aborted them.
void Check(bool done, const char* what) {
  if (!done) throw std::runtime_error(std::string(what) + " was aborted");
}

// `count` completions of `buffer`'s receives (or sends), each wait bounded.
void WaitRecvs(const Buffer& buffer, int count,
               std::chrono::milliseconds timeout) {
  for (int i = 0; i < count; ++i) {
    Check(buffer->waitRecv(timeout), "a receive of the direct allreduce");
  }
}
void WaitSends(const Buffer& buffer, int count,
               std::chrono::milliseconds timeout) {
  for (int i = 0; i < count; ++i) {
    Check(buffer->waitSend(timeout), "a send of the direct allreduce");
  }
}

}  // namespace

void DirectAllreduce(const DirectLinks& links, void* data, std::int64_t count,
                     DataType dtype, ReduceOp op, std::int64_t segment_bytes,
                     std::chrono::milliseconds timeout,
                     std::vector<std::uint8_t>* scratch) {
  const auto& group = links.group;
  const int n = group == nullptr ? 1 : group->size;
  if (count <= 0 || n == 1) return;
  const int me = group->rank;
  // Side 0 is `group`, side 1 `reverse` (or `group` again without one).
  const bool two = links.reverse != nullptr;
  const std::array<const std::shared_ptr<gloo::Context>*, 2> ctx = {
      &group, two ? &links.reverse : &group};
  const auto send_side = [&](int p) { return two && p < me ? 1 : 0; };
  const auto recv_side = [&](int p) { return two && p > me ? 1 : 0; };
  const auto rank_on = [&](int side, int p) {
    return side == 0 ? p : links.reverse_rank[static_cast<std::size_t>(p)];
  };
  const auto esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  auto* bytes = static_cast<std::uint8_t*>(data);
  // Block b: count / n elements, the first count % n one more.
  const std::int64_t base = count / n, extra = count % n;
  const auto block_offset = [&](int b) {
    return b * base + std::min<std::int64_t>(b, extra);
  };
  const auto block_count = [&](int b) { return base + (b < extra ? 1 : 0); };
  const std::int64_t seg = std::max<std::int64_t>(1, segment_bytes / esize);
  // Segments of the largest block; a smaller block's last may be empty.
  const std::int64_t segments = (base + (extra > 0 ? 1 : 0) + seg - 1) / seg;
  const auto seg_count = [&](int b, std::int64_t j) {
    return std::clamp<std::int64_t>(block_count(b) - j * seg, 0, seg);
  };
  const auto seg_at = [&](int b, std::int64_t j) {
    return static_cast<std::size_t>((block_offset(b) + j * seg) * esize);
  };
  const auto size_of = [esize](std::int64_t elements) {
    return static_cast<std::size_t>(elements * esize);
  };
  const std::int64_t mine = block_count(me);
  scratch->resize(size_of((n - 1) * mine));
  // The other ranks in rank order (the reduction's order); peer k's copy of
  // this rank's block lands at scratch_at(k, .).
  std::vector<int> peers;
  for (int p = 0; p < n; ++p) {
    if (p != me) peers.push_back(p);
  }
  const auto scratch_at = [&](std::size_t k, std::int64_t j) {
    return size_of(static_cast<std::int64_t>(k) * mine + j * seg);
  };
  const auto scatter_slot =
      gloo::Slot::build(gloo::kAllreduceSlotPrefix, kScatterTag);
  const auto gather_slot =
      gloo::Slot::build(gloo::kAllreduceSlotPrefix, kGatherTag);
  const std::size_t total = size_of(count);
  std::array<Buffer, 2> out, gathered;
  std::array<int, 2> sends{}, gathers{}, scatters{};
  const int sides = two ? 2 : 1;
  for (int side = 0; side < sides; ++side) {
    out[side] = (*ctx[side])->createUnboundBuffer(data, total);
    gathered[side] = (*ctx[side])->createUnboundBuffer(data, total);
  }
  for (int p : peers) ++scatters[recv_side(p)];
  // One pair of buffers per segment of this rank's block: waiting on them
  // waits for that segment from every peer.
  std::vector<std::array<Buffer, 2>> scattered(
      static_cast<std::size_t>(segments));
  // 1. Every receive first: no send waits for its receiver to ask.
  for (std::int64_t j = 0; j < segments; ++j) {
    const std::int64_t len = seg_count(me, j);
    auto& in = scattered[static_cast<std::size_t>(j)];
    if (len > 0) {
      for (int side = 0; side < sides; ++side) {
        in[side] =
            (*ctx[side])->createUnboundBuffer(scratch->data(), scratch->size());
      }
      for (std::size_t k = 0; k < peers.size(); ++k) {
        const int side = recv_side(peers[k]);
        in[side]->recv(rank_on(side, peers[k]), scatter_slot, scratch_at(k, j),
                       size_of(len));
      }
    }
    for (int p : peers) {
      const std::int64_t theirs = seg_count(p, j);
      if (theirs == 0) continue;
      const int side = recv_side(p);
      gathered[side]->recv(rank_on(side, p), gather_slot, seg_at(p, j),
                           size_of(theirs));
      ++gathers[side];
    }
  }
  const auto send = [&](int p, std::uint64_t slot, std::size_t at,
                        std::int64_t len) {
    const int side = send_side(p);
    out[side]->send(rank_on(side, p), slot, at, size_of(len));
    ++sends[side];
  };
  // 2. Every block's segments to its owner, segment by segment (the peers
  // from this rank on, so that not every rank sends to rank 0 first).
  for (std::int64_t j = 0; j < segments; ++j) {
    for (int i = 1; i < n; ++i) {
      const int p = (me + i) % n;
      const std::int64_t len = seg_count(p, j);
      if (len > 0) send(p, scatter_slot, seg_at(p, j), len);
    }
  }
  // 3. Each segment of this rank's block, once every copy is in: reduced
  // in place, then out to every peer.
  for (std::int64_t j = 0; j < segments; ++j) {
    const std::int64_t len = seg_count(me, j);
    if (len == 0) continue;
    auto& in = scattered[static_cast<std::size_t>(j)];
    for (int side = 0; side < sides; ++side) {
      if (scatters[side] > 0) WaitRecvs(in[side], scatters[side], timeout);
    }
    std::uint8_t* result = bytes + seg_at(me, j);
    for (std::size_t k = 0; k < peers.size(); ++k) {
      ReduceInto(result, scratch->data() + scratch_at(k, j), len, dtype, op);
    }
    for (int i = 1; i < n; ++i)
      send((me + i) % n, gather_slot, seg_at(me, j), len);
  }
  // 4. The other blocks' results, and every send out of this buffer.
  for (int side = 0; side < sides; ++side) {
    WaitRecvs(gathered[side], gathers[side], timeout);
    WaitSends(out[side], sends[side], timeout);
  }
}

}  // namespace hvdtune::internal
