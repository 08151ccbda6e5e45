#include "core/engine/gloo/gloo_exchange.h"

#include <gloo/types.h>

#include <cstring>
#include <vector>

#include "core/reduce.h"

namespace hvdtune::internal {

void ExchangeAll(const std::shared_ptr<gloo::Context>& ctx, const void* mine,
                 std::size_t bytes, void* all, std::uint32_t tag,
                 std::chrono::milliseconds timeout) {
  auto* out = static_cast<std::uint8_t*>(all);
  const int rank = ctx->rank;
  const int size = ctx->size;
  std::memmove(out + static_cast<std::size_t>(rank) * bytes, mine, bytes);
  if (size == 1 || bytes == 0) return;
  const auto slot = gloo::Slot::build(gloo::kAllgatherSlotPrefix, tag);
  auto in_buf =
      ctx->createUnboundBuffer(all, bytes * static_cast<std::size_t>(size));
  // Sent from `all` (this rank's block), which no receive writes to.
  auto out_buf = ctx->createUnboundBuffer(
      out + static_cast<std::size_t>(rank) * bytes, bytes);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    in_buf->recv(peer, slot, static_cast<std::size_t>(peer) * bytes, bytes);
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) out_buf->send(peer, slot);
  }
  for (int i = 1; i < size; ++i) in_buf->waitRecv(timeout);
  for (int i = 1; i < size; ++i) out_buf->waitSend(timeout);
}

void ExchangeAllreduce(const std::shared_ptr<gloo::Context>& ctx,
                       const void* in, void* out, std::int64_t count,
                       DataType dtype, ReduceOp op, std::uint32_t tag,
                       std::chrono::milliseconds timeout,
                       std::vector<std::uint8_t>* scratch) {
  const std::size_t bytes =
      static_cast<std::size_t>(count) * DataTypeSize(dtype);
  scratch->resize(bytes * static_cast<std::size_t>(ctx->size));
  ExchangeAll(ctx, in, bytes, scratch->data(), tag, timeout);
  // Rank order on every rank: the same bits everywhere.
  std::memmove(out, scratch->data(), bytes);
  for (int r = 1; r < ctx->size; ++r) {
    ReduceInto(out, scratch->data() + static_cast<std::size_t>(r) * bytes,
               count, dtype, op);
  }
}

}  // namespace hvdtune::internal
