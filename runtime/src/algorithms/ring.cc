#include "algorithms/ring.h"

#include <algorithm>
#include <cstring>

#include "reduce.h"

namespace hvdtune::internal {
namespace {

// Only the ring sends point-to-point messages with this tag on the
// communicators it is given; collectives never match point-to-point traffic.
constexpr int kRingTag = 0x5249;
// Segments travel as MPI_BYTE with an int count.
constexpr std::int64_t kMaxSegmentBytes = std::int64_t{1} << 30;

int Mod(std::int64_t a, int n) {
  const std::int64_t m = a % n;
  return static_cast<int>(m < 0 ? m + n : m);
}

// Frees whatever is still in flight after an error so that no request
// outlives the buffers it points into.
void Abandon(std::vector<MPI_Request>& requests) {
  for (MPI_Request& r : requests) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);
    MPI_Request_free(&r);
  }
}

}  // namespace

RingEngine::Range RingEngine::ChunkRange(std::int64_t count, int size, int c) {
  const std::int64_t base = count / size;
  const std::int64_t extra = count % size;
  return {c * base + std::min<std::int64_t>(c, extra),
          base + (c < extra ? 1 : 0)};
}

Status RingEngine::Run(MPI_Comm comm, const void* in, void* out,
                       std::int64_t count, DataType dtype, ReduceOp op,
                       std::int64_t segment_bytes, Phases phases) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const auto esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  auto* const dst = static_cast<std::uint8_t*>(out);
  const auto* const src = static_cast<const std::uint8_t*>(in);
  if (count <= 0) return Status::Ok();
  if (size == 1) {
    if (in != out)
      std::memcpy(dst, src, static_cast<std::size_t>(count * esize));
    return Status::Ok();
  }

  const bool rs = (phases & kReduceScatter) != 0;
  const bool ag = (phases & kAllgather) != 0;
  const int rs_steps = rs ? size - 1 : 0;
  const int steps = rs_steps + (ag ? size - 1 : 0);
  // Out of place, the reduce-scatter receives straight into `out` (that
  // region of out holds nothing yet) and reduces `in` into it: no copy of
  // the input and no scratch. In place it needs scratch for what arrives.
  const bool direct = in != out;

  // Every chunk gets the same number of segments so that unit numbers line
  // up across steps; chunks differ by at most one element.
  const std::int64_t max_chunk = ChunkRange(count, size, 0).count;
  const std::int64_t cap = std::max<std::int64_t>(
      1, std::clamp<std::int64_t>(segment_bytes, 1, kMaxSegmentBytes) / esize);
  const std::int64_t nseg = (max_chunk + cap - 1) / cap;
  const std::int64_t seg_elems = (max_chunk + nseg - 1) / nseg;
  const std::int64_t units = steps * nseg;
  const std::int64_t slot_bytes = seg_elems * esize;
  constexpr std::int64_t kDepth = kPipelineDepth;
  if (rs && !direct) {
    const auto need = static_cast<std::size_t>(kDepth * slot_bytes);
    if (scratch_.size() < need) scratch_.resize(need);
  }
  sends_.assign(static_cast<std::size_t>(units), MPI_REQUEST_NULL);
  recvs_.assign(static_cast<std::size_t>(units), MPI_REQUEST_NULL);
  const int right = (rank + 1) % size;
  const int left = (rank + size - 1) % size;

  // Chunks of step t: reduce-scatter steps first, then allgather steps.
  const auto send_chunk = [&](std::int64_t t) {
    return t < rs_steps ? Mod(rank - t, size)
                        : Mod(rank + 1 - (t - rs_steps), size);
  };
  const auto recv_chunk = [&](std::int64_t t) {
    return t < rs_steps ? Mod(rank - t - 1, size)
                        : Mod(rank - (t - rs_steps), size);
  };
  // Elements [offset, offset + n) of segment k of chunk c.
  const auto segment = [&](int c, std::int64_t k) {
    const Range r = ChunkRange(count, size, c);
    const std::int64_t begin = std::min(k * seg_elems, r.count);
    const std::int64_t end = std::min(begin + seg_elems, r.count);
    return Range{r.offset + begin, end - begin};
  };
  // The earlier send that reads the region allgather unit w overwrites:
  // chunk r - s went out in reduce-scatter step s. -1 when there is none.
  const auto hazard = [&](std::int64_t w) -> std::int64_t {
    const std::int64_t t = w / nseg;
    if (t < rs_steps || !rs) return -1;
    const std::int64_t s = t - rs_steps;
    if (s == 0 && direct) return -1;  // that send read `in`
    return s * nseg + w % nseg;
  };

  const auto post_send = [&](std::int64_t v) {
    const std::int64_t t = v / nseg;
    const Range seg = segment(send_chunk(t), v % nseg);
    if (seg.count == 0) return MPI_SUCCESS;  // the receiver skips it too
    const std::uint8_t* from =
        (t == 0 && rs && direct ? src : dst) + seg.offset * esize;
    return MPI_Isend(from, static_cast<int>(seg.count * esize), MPI_BYTE, right,
                     kRingTag, comm, &sends_[static_cast<std::size_t>(v)]);
  };
  const auto recv_target = [&](std::int64_t w, const Range& seg) {
    if (w / nseg < rs_steps && !direct) {
      return scratch_.data() + (w % kDepth) * slot_bytes;
    }
    return dst + seg.offset * esize;
  };
  const auto post_recv = [&](std::int64_t w) {
    const Range seg = segment(recv_chunk(w / nseg), w % nseg);
    if (seg.count == 0) return MPI_SUCCESS;
    return MPI_Irecv(recv_target(w, seg), static_cast<int>(seg.count * esize),
                     MPI_BYTE, left, kRingTag, comm,
                     &recvs_[static_cast<std::size_t>(w)]);
  };
  const auto fail = [&](const char* call, int rc) {
    Abandon(sends_);
    Abandon(recvs_);
    return MpiError(call, rc);
  };

  std::int64_t sent = 0;    // sends posted: units [0, sent)
  std::int64_t posted = 0;  // receives posted: units [0, posted)
  for (std::int64_t u = 0; u < units; ++u) {
    // Unit v carries what unit v - nseg delivered (the same segment one step
    // earlier), so it is ready once that one is done: units < u are.
    while (sent < units && sent < u + kDepth &&
           (sent < nseg || sent - nseg < u)) {
      if (sent >= kDepth) {
        const int rc =
            MPI_Wait(&sends_[static_cast<std::size_t>(sent - kDepth)],
                     MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return fail("MPI_Wait", rc);
      }
      const int rc = post_send(sent);
      if (rc != MPI_SUCCESS) return fail("MPI_Isend", rc);
      ++sent;
    }
    while (posted < units && posted < u + kDepth) {
      // An allgather receive may not overwrite a region an earlier send is
      // still reading: post it ahead only once that send is done, and wait
      // for it when the receive is needed now.
      const std::int64_t h = hazard(posted);
      if (h >= 0) {
        MPI_Request& r = sends_[static_cast<std::size_t>(h)];
        if (posted == u) {
          const int rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
          if (rc != MPI_SUCCESS) return fail("MPI_Wait", rc);
        } else {
          if (h >= sent) break;
          int done = 0;
          const int rc = MPI_Test(&r, &done, MPI_STATUS_IGNORE);
          if (rc != MPI_SUCCESS) return fail("MPI_Test", rc);
          if (!done) break;
        }
      }
      const int rc = post_recv(posted);
      if (rc != MPI_SUCCESS) return fail("MPI_Irecv", rc);
      ++posted;
    }
    const int rc =
        MPI_Wait(&recvs_[static_cast<std::size_t>(u)], MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return fail("MPI_Wait", rc);
    if (u / nseg < rs_steps) {
      const Range seg = segment(recv_chunk(u / nseg), u % nseg);
      if (seg.count > 0) {
        std::uint8_t* mine = dst + seg.offset * esize;
        // dst op= src: the received partial op the local input. Sum, min
        // and max commute, so in and out of place give the same bits.
        if (direct) {
          ReduceInto(mine, src + seg.offset * esize, seg.count, dtype, op);
        } else {
          ReduceInto(mine, recv_target(u, seg), seg.count, dtype, op);
        }
      }
    }
  }
  const int rc =
      MPI_Waitall(static_cast<int>(units), sends_.data(), MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) return fail("MPI_Waitall", rc);
  return Status::Ok();
}

Status RingAllreduce::Run(const AlgorithmContext& ctx, const void* in,
                          void* out, std::int64_t count, DataType dtype,
                          ReduceOp op) {
  return ring_.Run(ctx.mpi.data, in, out, count, dtype, op,
                   ctx.knobs.ring_segment_bytes(), RingEngine::kBoth);
}

}  // namespace hvdtune::internal
