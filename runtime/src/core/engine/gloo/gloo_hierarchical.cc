#include "core/engine/gloo/gloo_hierarchical.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/engine/gloo/mesh_allreduce.h"
#include "core/reduce.h"
#include "core/thread_scheduling.h"

namespace hvdtune::internal {

Status GlooHierarchical::Run(const KnobSettings& knobs, const void* in,
                             void* out, std::int64_t count, DataType dtype,
                             ReduceOp op) {
  if (count <= 0) return Status::Ok();
  const World& w = world_.groups().world();
  // One rank per node: nothing to gain over the flat ring (a condition
  // every rank evaluates alike: nodes may differ in size). One node with
  // several ranks reduces through its shared memory alone.
  const int nodes = world_.groups().nodes();
  if (nodes == w.size) {
    return world_.RingAllreduce(in, out, count, dtype, op,
                                knobs.ring_segment_bytes());
  }
  if (path_ == Path::kUntried) {
    // Two sets of slots, one slot per local rank.
    const auto data_bytes =
        static_cast<std::size_t>(2 * w.local_size * kGlooShmPieceBytes);
    const Status s = NodeShm::Open(world_.groups(), data_bytes, &shm_);
    if (!s.ok()) return s;
    path_ = shm_ != nullptr ? Path::kShared : Path::kLeaders;
  }
  switch (path_) {
    case Path::kShared:
      return RunShared(knobs, in, out, count, dtype, op);
    case Path::kBroken:
      return broken_;
    default:
      return RunThroughLeaders(knobs, in, out, count, dtype, op);
  }
}

std::uint8_t* GlooHierarchical::Slot(std::uint64_t q, int r) const {
  const auto set = static_cast<std::int64_t>(q % 2);
  return shm_->data() + (set * shm_->local_size() + r) * kGlooShmPieceBytes;
}

Status GlooHierarchical::RunShared(const KnobSettings& knobs, const void* in,
                                   void* out, std::int64_t count,
                                   DataType dtype, ReduceOp op) {
  const auto esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  const int size = shm_->local_size();
  const int me = shm_->local_rank();
  // Knobs and dtype are the same on every rank: so are the pieces.
  std::int64_t piece = kGlooShmDefaultPieceBytes / esize;
  const std::int64_t chunk = knobs.hierarchical_chunk_bytes();
  if (chunk > 0) {
    piece = std::clamp<std::int64_t>(chunk, kGlooShmMinPieceBytes,
                                     kGlooShmPieceBytes) /
            esize;
  }
  const auto* src = static_cast<const std::uint8_t*>(in);
  auto* dst = static_cast<std::uint8_t*>(out);
  const auto bytes = [esize](std::int64_t n) {
    return static_cast<std::size_t>(n * esize);
  };
  const SocketMesh* mesh = world_.groups().cross_mesh();
  if (mesh != nullptr && cross_worker_ == nullptr) {
    cross_worker_ = std::make_unique<CrossWorker>(*this, *mesh);
  }
  Status s;
  const auto fail = [&](Status why) {
    // The worker's own error says more than the node's wait it caused.
    if (cross_worker_ != nullptr) {
      const Status cross = cross_worker_->Abort();
      if (!cross.ok()) why = cross;
    }
    shm_->FlagFailure();
    path_ = Path::kBroken;
    broken_ = why;
    return why;
  };
  // 4. Piece q's result out, once every shard of it is in.
  const auto copy_out = [&](std::uint64_t q, std::int64_t begin,
                            std::int64_t n) {
    const Status w = shm_->WaitAll(ShmCounter::kReduced, q + 1,
                                   "allreduce its shard across nodes");
    if (!w.ok()) return w;
    std::memcpy(dst + begin * esize, Slot(q, 0), bytes(n));
    shm_->Publish(ShmCounter::kConsumed, q + 1);
    return Status::Ok();
  };
  // The piece whose result is still to be copied out (its step 4 follows
  // the next piece's steps 1-2, while its step 3 runs on the worker).
  std::int64_t pending_begin = -1, pending_n = 0;
  std::uint64_t pending_q = 0;
  for (std::int64_t begin = 0; begin < count; begin += piece) {
    const std::int64_t n = std::min(piece, count - begin);
    const std::uint64_t q = pieces_++;
    const std::uint8_t* mine = src + begin * esize;
    // This rank's shard of the piece: n / size elements, the first
    // n % size shards one more.
    const std::int64_t base = n / size, extra = n % size;
    const std::int64_t shard = base + (me < extra ? 1 : 0);
    const std::int64_t offset = me * base + std::min<std::int64_t>(me, extra);
    const std::int64_t at = offset * esize;
    // 1. Slot 0 accumulates the piece and holds its result: free once every
    // rank copied piece q - 2 out. The others' slots are free once every
    // rank reduced its shard of piece q - 2.
    if (q >= 2) {
      s = me == 0 ? shm_->WaitAll(ShmCounter::kConsumed, q - 1,
                                  "copy an earlier result out")
                  : shm_->WaitAll(ShmCounter::kRead, q - 1,
                                  "reduce an earlier piece");
      if (!s.ok()) return fail(s);
    }
    // This rank's own shard is read from its input where it is reduced
    // (below); rank 0's is the accumulator's start.
    std::uint8_t* slot = Slot(q, me);
    if (me == 0) {
      std::memcpy(slot, mine, bytes(n));
    } else {
      std::memcpy(slot, mine, static_cast<std::size_t>(at));
      std::memcpy(slot + at + shard * esize, mine + at + shard * esize,
                  bytes(n - offset - shard));
    }
    shm_->Publish(ShmCounter::kArrived, q + 1);
    // 2. Every input in: shard `me` of slot 0 becomes x0 op x1 op ... in
    // local rank order, whoever owns it.
    s = shm_->WaitAll(ShmCounter::kArrived, q + 1, "copy its input in");
    if (!s.ok()) return fail(s);
    std::uint8_t* result = Slot(q, 0) + at;
    if (shard > 0) {
      for (int r = 1; r < size; ++r) {
        ReduceInto(result, r == me ? mine + at : Slot(q, r) + at, shard, dtype,
                   op);
      }
    }
    shm_->Publish(ShmCounter::kRead, q + 1);
    // 3. Across nodes, on the worker: every rank with this local rank holds
    // the same shard. One node has no mesh: the shard is final.
    if (cross_worker_ != nullptr) {
      cross_worker_->Post({result, shard, dtype, op, q});
    } else {
      shm_->Publish(ShmCounter::kReduced, q + 1);
    }
    // 4. The previous piece's result, while this one crosses the network.
    if (pending_begin >= 0) {
      s = copy_out(pending_q, pending_begin, pending_n);
      if (!s.ok()) return fail(s);
    }
    pending_begin = begin;
    pending_n = n;
    pending_q = q;
  }
  if (pending_begin >= 0) {
    s = copy_out(pending_q, pending_begin, pending_n);
    if (!s.ok()) return fail(s);
  }
  return Status::Ok();
}

GlooHierarchical::CrossWorker::CrossWorker(GlooHierarchical& owner,
                                           const SocketMesh& mesh)
    : owner_(owner), mesh_(mesh), abort_fd_(::eventfd(0, EFD_CLOEXEC)) {
  thread_ = std::thread([this] {
    NameThisThread("hvdtune-cross");
    Loop();
  });
}

GlooHierarchical::CrossWorker::~CrossWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  Abort();
  thread_.join();
  if (abort_fd_ >= 0) ::close(abort_fd_);
}

void GlooHierarchical::CrossWorker::Post(const Piece& piece) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(piece);
  }
  cv_.notify_one();
}

Status GlooHierarchical::CrossWorker::Abort() {
  if (abort_fd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(abort_fd_, &one, sizeof one);
  }
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
  return error_;
}

void GlooHierarchical::CrossWorker::Loop() {
  const GlooGroups& groups = owner_.world_.groups();
  for (;;) {
    Piece p;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      p = queue_.front();
      queue_.pop_front();
      if (!error_.ok()) continue;
    }
    const Status s = groups.Guard("allreduce", [&] {
      MeshAllreduce(mesh_, p.data, p.count, p.dtype, p.op,
                    kGlooCrossSegmentBytes, groups.timeout(), &scratch_,
                    abort_fd_);
    });
    if (!s.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = s;
        queue_.clear();
      }
      // The node's waits for this rank's shards end with an error.
      owner_.shm_->FlagFailure();
      continue;
    }
    owner_.shm_->Publish(ShmCounter::kReduced, p.q + 1);
  }
}

Status GlooHierarchical::RunThroughLeaders(const KnobSettings& knobs,
                                           const void* in, void* out,
                                           std::int64_t count, DataType dtype,
                                           ReduceOp op) {
  const World& w = world_.groups().world();
  Status s = local_.Reduce(in, out, count, dtype, op, 0);
  if (s.ok() && w.local_rank == 0) {
    s = cross_.RingAllreduce(out, out, count, dtype, op,
                             knobs.ring_segment_bytes());
  }
  // A leader that failed still leaves its node's broadcast to fail on
  // its own (its peers' waits time out or see it gone).
  if (!s.ok()) return s;
  return local_.Broadcast(
      out, count * static_cast<std::int64_t>(DataTypeSize(dtype)), 0);
}

}  // namespace hvdtune::internal
