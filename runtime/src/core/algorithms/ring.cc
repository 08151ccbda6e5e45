#include "core/algorithms/ring.h"

#include <algorithm>
#include <cstring>

#include "core/reduce.h"

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

// Whether r completed; *rc the call's result.
bool Test(MPI_Request& r, int* rc) {
  int flag = 0;
  *rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
  return *rc == MPI_SUCCESS && flag != 0;
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
  const Status s =
      Start(comm, in, out, count, dtype, op, segment_bytes, phases);
  if (!s.ok()) return s;
  bool done = false;
  return Progress(/*block=*/true, &done);
}

Status RingEngine::Start(MPI_Comm comm, const void* in, void* out,
                         std::int64_t count, DataType dtype, ReduceOp op,
                         std::int64_t segment_bytes, Phases phases) {
  if (active_) return Status::Internal("ring started while one is running");
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

  comm_ = comm;
  rank_ = rank;
  size_ = size;
  right_ = (rank + 1) % size;
  left_ = (rank + size - 1) % size;
  src_ = src;
  dst_ = dst;
  count_ = count;
  esize_ = esize;
  dtype_ = dtype;
  op_ = op;
  rs_ = (phases & kReduceScatter) != 0;
  const bool ag = (phases & kAllgather) != 0;
  rs_steps_ = rs_ ? size - 1 : 0;
  const std::int64_t steps = rs_steps_ + (ag ? size - 1 : 0);
  // Out of place, the reduce-scatter receives straight into `out` (that
  // region of out holds nothing yet) and reduces `in` into it: no copy of
  // the input and no scratch. In place it needs scratch for what arrives.
  direct_ = in != out;

  // Every chunk gets the same number of segments so that unit numbers line
  // up across steps; chunks differ by at most one element.
  const std::int64_t max_chunk = ChunkRange(count, size, 0).count;
  const std::int64_t cap = std::max<std::int64_t>(
      1, std::clamp<std::int64_t>(segment_bytes, 1, kMaxSegmentBytes) / esize);
  nseg_ = (max_chunk + cap - 1) / cap;
  seg_elems_ = (max_chunk + nseg_ - 1) / nseg_;
  units_ = steps * nseg_;
  slot_bytes_ = seg_elems_ * esize;
  if (rs_ && !direct_) {
    const auto need = static_cast<std::size_t>(kPipelineDepth * slot_bytes_);
    if (scratch_.size() < need) scratch_.resize(need);
  }
  sends_.assign(static_cast<std::size_t>(units_), MPI_REQUEST_NULL);
  recvs_.assign(static_cast<std::size_t>(units_), MPI_REQUEST_NULL);
  sent_ = posted_ = next_ = 0;
  active_ = true;
  return Status::Ok();
}

// Chunks of step t: reduce-scatter steps first, then allgather steps.
int RingEngine::SendChunk(std::int64_t t) const {
  return t < rs_steps_ ? Mod(rank_ - t, size_)
                       : Mod(rank_ + 1 - (t - rs_steps_), size_);
}

int RingEngine::RecvChunk(std::int64_t t) const {
  return t < rs_steps_ ? Mod(rank_ - t - 1, size_)
                       : Mod(rank_ - (t - rs_steps_), size_);
}

// Elements [offset, offset + n) of segment k of chunk c.
RingEngine::Range RingEngine::Segment(int c, std::int64_t k) const {
  const Range r = ChunkRange(count_, size_, c);
  const std::int64_t begin = std::min(k * seg_elems_, r.count);
  const std::int64_t end = std::min(begin + seg_elems_, r.count);
  return Range{r.offset + begin, end - begin};
}

// The earlier send that reads the region allgather unit w overwrites:
// chunk r - s went out in reduce-scatter step s. -1 when there is none.
std::int64_t RingEngine::Hazard(std::int64_t w) const {
  const std::int64_t t = w / nseg_;
  if (t < rs_steps_ || !rs_) return -1;
  const std::int64_t s = t - rs_steps_;
  if (s == 0 && direct_) return -1;  // that send read `in`
  return s * nseg_ + w % nseg_;
}

int RingEngine::PostSend(std::int64_t v) {
  const std::int64_t t = v / nseg_;
  const Range seg = Segment(SendChunk(t), v % nseg_);
  if (seg.count == 0) return MPI_SUCCESS;  // the receiver skips it too
  const std::uint8_t* from =
      (t == 0 && rs_ && direct_ ? src_ : dst_) + seg.offset * esize_;
  return MPI_Isend(from, static_cast<int>(seg.count * esize_), MPI_BYTE, right_,
                   kRingTag, comm_, &sends_[static_cast<std::size_t>(v)]);
}

std::uint8_t* RingEngine::RecvTarget(std::int64_t w, const Range& seg) {
  if (w / nseg_ < rs_steps_ && !direct_) {
    return scratch_.data() + (w % kPipelineDepth) * slot_bytes_;
  }
  return dst_ + seg.offset * esize_;
}

int RingEngine::PostRecv(std::int64_t w) {
  const Range seg = Segment(RecvChunk(w / nseg_), w % nseg_);
  if (seg.count == 0) return MPI_SUCCESS;
  return MPI_Irecv(RecvTarget(w, seg), static_cast<int>(seg.count * esize_),
                   MPI_BYTE, left_, kRingTag, comm_,
                   &recvs_[static_cast<std::size_t>(w)]);
}

void RingEngine::Cancel() {
  if (!active_) return;
  Abandon(sends_);
  Abandon(recvs_);
  active_ = false;
}

Status RingEngine::Fail(const char* call, int rc) {
  Cancel();
  return MpiError(call, rc);
}

Status RingEngine::Progress(bool block, bool* done) {
  *done = false;
  if (!active_) {
    *done = true;
    return Status::Ok();
  }
  constexpr std::int64_t kDepth = kPipelineDepth;
  // Waits for r, or without `block` tests it: false = not done yet.
  int rc = MPI_SUCCESS;
  const auto ready = [&](MPI_Request& r) {
    if (block) {
      rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
      return rc == MPI_SUCCESS;
    }
    int flag = 0;
    rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS && flag != 0;
  };
  while (next_ < units_) {
    const std::int64_t u = next_;
    // Unit v carries what unit v - nseg delivered (the same segment one step
    // earlier), so it is ready once that one is done: units < u are.
    while (sent_ < units_ && sent_ < u + kDepth &&
           (sent_ < nseg_ || sent_ - nseg_ < u)) {
      if (sent_ >= kDepth &&
          !ready(sends_[static_cast<std::size_t>(sent_ - kDepth)])) {
        if (rc != MPI_SUCCESS) return Fail(block ? "MPI_Wait" : "MPI_Test", rc);
        break;
      }
      rc = PostSend(sent_);
      if (rc != MPI_SUCCESS) return Fail("MPI_Isend", rc);
      ++sent_;
    }
    while (posted_ < units_ && posted_ < u + kDepth) {
      // An allgather receive may not overwrite a region an earlier send is
      // still reading: post it ahead only once that send is done, and wait
      // for it when the receive is needed now (blocking).
      const std::int64_t h = Hazard(posted_);
      if (h >= 0) {
        MPI_Request& r = sends_[static_cast<std::size_t>(h)];
        if (h >= sent_) break;
        const bool now = block && posted_ == u;
        if (now ? !ready(r) : !Test(r, &rc)) {
          if (rc != MPI_SUCCESS) return Fail("MPI_Test", rc);
          break;
        }
      }
      rc = PostRecv(posted_);
      if (rc != MPI_SUCCESS) return Fail("MPI_Irecv", rc);
      ++posted_;
    }
    if (posted_ <= u) {
      // Only without `block`: the receive waits for a send still in flight.
      if (!block) return Status::Ok();
      Cancel();
      return Status::Internal("ring: a receive could not be posted");
    }
    if (!ready(recvs_[static_cast<std::size_t>(u)])) {
      if (rc != MPI_SUCCESS) return Fail(block ? "MPI_Wait" : "MPI_Test", rc);
      return Status::Ok();
    }
    if (u / nseg_ < rs_steps_) {
      const Range seg = Segment(RecvChunk(u / nseg_), u % nseg_);
      if (seg.count > 0) {
        std::uint8_t* mine = dst_ + seg.offset * esize_;
        // dst op= src: the received partial op the local input. Sum, min
        // and max commute, so in and out of place give the same bits.
        if (direct_) {
          ReduceInto(mine, src_ + seg.offset * esize_, seg.count, dtype_, op_);
        } else {
          ReduceInto(mine, RecvTarget(u, seg), seg.count, dtype_, op_);
        }
      }
    }
    ++next_;
  }
  if (block) {
    rc = MPI_Waitall(static_cast<int>(units_), sends_.data(),
                     MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return Fail("MPI_Waitall", rc);
  } else {
    int flag = 0;
    rc = MPI_Testall(static_cast<int>(units_), sends_.data(), &flag,
                     MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return Fail("MPI_Testall", rc);
    if (!flag) return Status::Ok();
  }
  active_ = false;
  *done = true;
  return Status::Ok();
}

Status RingAllreduce::Run(const AlgorithmContext& ctx, const void* in,
                          void* out, std::int64_t count, DataType dtype,
                          ReduceOp op) {
  return ring_.Run(ctx.mpi.data, in, out, count, dtype, op,
                   ctx.knobs.ring_segment_bytes(), RingEngine::kBoth);
}

}  // namespace hvdtune::internal
