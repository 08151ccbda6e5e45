// Small collectives in one round of messages. Gloo's ring allreduce takes
// 2(n-1) steps one after another, each a message through Gloo's event-loop
// thread and a wake-up of the waiting thread; for a few bytes (the
// negotiation's bit vectors, a small gradient) those steps, not the bytes,
// are the cost. Here every rank sends its bytes to every other rank at once
// and each reduces what it received itself, in rank order, so every rank
// computes the same bits.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "hvdtune/types.h"

namespace hvdtune::internal {

/// The largest allreduce (bytes) that the Gloo engine's `native` algorithm
/// runs as one exchange round (ExchangeAllreduce) rather than Gloo's ring.
inline constexpr std::int64_t kGlooExchangeMaxBytes = 64 << 10;

/// Every rank's `bytes` bytes at `mine` into `all` (rank r's at r * bytes;
/// this rank's copied too), in one round: all receives are posted before
/// any send, so a message never waits for its receiver to ask for it.
/// `tag` keeps concurrent uses apart. Throws what Gloo throws.
void ExchangeAll(const std::shared_ptr<gloo::Context>& ctx, const void* mine,
                 std::size_t bytes, void* all, std::uint32_t tag,
                 std::chrono::milliseconds timeout);

/// out = in reduced over the ranks of `ctx`, as x0 op x1 op ... op xn-1 on
/// every rank (the same bits everywhere), after one ExchangeAll; `scratch`
/// holds the ranks' inputs (size * count elements, kept between calls).
/// Throws what Gloo throws.
void ExchangeAllreduce(const std::shared_ptr<gloo::Context>& ctx,
                       const void* in, void* out, std::int64_t count,
                       DataType dtype, ReduceOp op, std::uint32_t tag,
                       std::chrono::milliseconds timeout,
                       std::vector<std::uint8_t>* scratch);

}  // namespace hvdtune::internal
