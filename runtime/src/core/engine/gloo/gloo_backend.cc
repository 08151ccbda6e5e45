#include "core/engine/gloo/gloo_backend.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/engine/gloo/gloo_exchange.h"
#include "core/engine/gloo/gloo_reduce.h"

namespace hvdtune::internal {
namespace {

// The small allreduces' exchange round, apart from the negotiation's.
constexpr std::uint32_t kExchangeTag = 0x6e78;  // "nx"

// Gloo wants a valid address even for an empty buffer.
std::uint8_t none = 0;

void* Addr(const void* p) {
  return p != nullptr ? const_cast<void*>(p) : &none;
}

bool Alone(const std::shared_ptr<gloo::Context>& ctx) {
  return ctx == nullptr || ctx->size == 1;
}

// The send buffer that SizeSendBuffersForBoundAlgorithms asks for: what
// setsockopt(SO_SNDBUF) may give (net.core.wmem_max; the kernel's usual
// default where it cannot be read), at most 1 MiB (the kernel doubles it).
std::size_t BoundSendBufferBytes() {
  constexpr std::size_t kDefaultWmemMax = 212992;
  constexpr std::size_t kMost = 1 << 20;
  std::size_t wmem_max = 0;
  std::ifstream in("/proc/sys/net/core/wmem_max");
  if (!(in >> wmem_max) || wmem_max == 0) wmem_max = kDefaultWmemMax;
  return std::min(wmem_max, kMost);
}

}  // namespace

Status GlooBackend::Allreduce(const void* in, void* out, std::int64_t count,
                              DataType dtype, ReduceOp op) {
  const auto bytes = count * static_cast<std::int64_t>(DataTypeSize(dtype));
  if (count <= 0 || Alone(ctx_) || bytes > kGlooExchangeMaxBytes) {
    return RingAllreduce(in, out, count, dtype, op, 0);
  }
  return groups_.Guard("allreduce", [&] {
    ExchangeAllreduce(ctx_, in, out, count, dtype, op, kExchangeTag,
                      groups_.timeout(), &exchange_scratch_);
  });
}

Status GlooBackend::RingAllreduce(const void* in, void* out, std::int64_t count,
                                  DataType dtype, ReduceOp op,
                                  std::int64_t segment_bytes) {
  const std::size_t esize = DataTypeSize(dtype);
  if (count <= 0) return Status::Ok();
  if (in != out) {
    std::memcpy(out, in, static_cast<std::size_t>(count) * esize);
  }
  if (Alone(ctx_)) return Status::Ok();
  return groups_.Guard("allreduce", [&] {
    gloo::AllreduceOptions opts(ctx_);
    WithStorageType(esize, [&](auto t) {
      using T = decltype(t);
      opts.setOutput(static_cast<T*>(out), static_cast<std::size_t>(count));
    });
    opts.setReduceFunction(GlooReduceFunction(dtype, op));
    if (segment_bytes > 0) {
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setMaxSegmentSize(static_cast<std::size_t>(segment_bytes));
    }
    gloo::allreduce(opts);
  });
}

void GlooBackend::SizeSendBuffersForBoundAlgorithms() {
  if (send_buffers_sized_ || Alone(ctx_)) return;
  const std::size_t bytes = BoundSendBufferBytes();
  const int size = ctx_->size, rank = ctx_->rank;
  // Every rank takes the slot here, before the same collective, as Gloo's
  // algorithms take theirs: the slots stay in step on every rank.
  const int slot = ctx_->nextSlot();
  std::vector<std::uint8_t> out(bytes),
      in(bytes * static_cast<std::size_t>(size));
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends, recvs;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    auto& pair = ctx_->getPair(peer);
    recvs.push_back(pair->createRecvBuffer(
        slot, in.data() + static_cast<std::size_t>(peer) * bytes, bytes));
    sends.push_back(pair->createSendBuffer(slot, out.data(), bytes));
  }
  for (auto& b : sends) b->send();
  for (auto& b : sends) b->waitSend();
  for (auto& b : recvs) b->waitRecv();
  send_buffers_sized_ = true;
}

Status GlooBackend::Broadcast(void* buffer, std::int64_t bytes, int root) {
  if (bytes <= 0 || Alone(ctx_)) return Status::Ok();
  return groups_.Guard("broadcast", [&] {
    gloo::BroadcastOptions opts(ctx_);
    opts.setOutput(static_cast<std::uint8_t*>(buffer),
                   static_cast<std::size_t>(bytes));
    opts.setRoot(root);
    gloo::broadcast(opts);
  });
}

Status GlooBackend::Reduce(const void* in, void* out, std::int64_t count,
                           DataType dtype, ReduceOp op, int root) {
  const std::size_t esize = DataTypeSize(dtype);
  if (count <= 0) return Status::Ok();
  if (Alone(ctx_)) {
    if (in != out) {
      std::memcpy(out, in, static_cast<std::size_t>(count) * esize);
    }
    return Status::Ok();
  }
  return groups_.Guard("reduce", [&] {
    gloo::ReduceOptions opts(ctx_);
    WithStorageType(esize, [&](auto t) {
      using T = decltype(t);
      opts.setInput(static_cast<T*>(Addr(in)), static_cast<std::size_t>(count));
      opts.setOutput(static_cast<T*>(out), static_cast<std::size_t>(count));
    });
    opts.setReduceFunction(GlooReduceFunction(dtype, op));
    opts.setRoot(root);
    gloo::reduce(opts);
  });
}

Status GlooBackend::Allgatherv(
    const void* in, std::int64_t bytes, void* out,
    const std::vector<std::int64_t>& bytes_per_rank) {
  if (Alone(ctx_)) {
    if (bytes > 0 && in != out) {
      std::memmove(out, in, static_cast<std::size_t>(bytes));
    }
    return Status::Ok();
  }
  std::int64_t total = 0;
  std::vector<std::size_t> counts;
  for (std::int64_t b : bytes_per_rank) {
    counts.push_back(static_cast<std::size_t>(b));
    total += b;
  }
  if (total == 0) return Status::Ok();
  return groups_.Guard("allgatherv", [&] {
    gloo::AllgathervOptions opts(ctx_);
    opts.setInput(static_cast<std::uint8_t*>(Addr(bytes > 0 ? in : nullptr)),
                  static_cast<std::size_t>(bytes));
    opts.setOutput(static_cast<std::uint8_t*>(out), counts);
    gloo::allgatherv(opts);
  });
}

Status GlooBackend::Reducescatter(const void* in, void* out,
                                  const std::vector<std::int64_t>& counts,
                                  DataType dtype, ReduceOp op) {
  // The whole input reduced everywhere, then this rank's block: twice the
  // traffic of a true reduce-scatter, and the same bits as any other order
  // of the same reductions on every rank.
  const std::size_t esize = DataTypeSize(dtype);
  std::int64_t total = 0, offset = 0;
  const int rank = Alone(ctx_) ? 0 : ctx_->rank;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) == rank) offset = total;
    total += counts[r];
  }
  if (total == 0) return Status::Ok();
  scratch_.resize(static_cast<std::size_t>(total) * esize);
  Status s = Allreduce(in, scratch_.data(), total, dtype, op);
  if (!s.ok()) return s;
  const auto mine =
      static_cast<std::size_t>(counts[static_cast<std::size_t>(rank)]);
  if (mine > 0) {
    std::memcpy(out, scratch_.data() + static_cast<std::size_t>(offset) * esize,
                mine * esize);
  }
  return Status::Ok();
}

Status GlooBackend::Alltoallv(const void* in,
                              const std::vector<std::int64_t>& send_bytes,
                              void* out,
                              const std::vector<std::int64_t>& recv_bytes) {
  std::int64_t st = 0, rt = 0;
  for (std::int64_t b : send_bytes) st += b;
  for (std::int64_t b : recv_bytes) rt += b;
  if (Alone(ctx_)) {
    if (st > 0 && in != out)
      std::memmove(out, in, static_cast<std::size_t>(st));
    return Status::Ok();
  }
  return groups_.Guard("alltoallv", [&] {
    gloo::AlltoallvOptions opts(ctx_);
    opts.setInput(static_cast<std::uint8_t*>(Addr(st > 0 ? in : nullptr)),
                  send_bytes);
    opts.setOutput(static_cast<std::uint8_t*>(Addr(rt > 0 ? out : nullptr)),
                   recv_bytes);
    gloo::alltoallv(opts);
  });
}

}  // namespace hvdtune::internal
