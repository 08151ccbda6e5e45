// Backend on Gloo's collectives over one gloo::Context (the world's, or a
// node group's). Every call goes through GlooGroups::Guard: Gloo's
// exceptions become an error Status.
#pragma once

#include <gloo/context.h>

#include <memory>
#include <vector>

#include "core/backends/backend.h"
#include "core/engine/gloo/gloo_context.h"

namespace hvdtune::internal {

class GlooBackend final : public Backend {
 public:
  GlooBackend(const GlooGroups& groups, std::shared_ptr<gloo::Context> ctx)
      : groups_(groups), ctx_(std::move(ctx)) {}
  std::string_view name() const override { return "gloo"; }
  /// One exchange round up to kGlooExchangeMaxBytes (ExchangeAllreduce),
  /// Gloo's own allreduce above.
  Status Allreduce(const void* in, void* out, std::int64_t count,
                   DataType dtype, ReduceOp op) override;
  /// Gloo's ring allreduce with segments of at most `segment_bytes`.
  Status RingAllreduce(const void* in, void* out, std::int64_t count,
                       DataType dtype, ReduceOp op, std::int64_t segment_bytes);
  Status Broadcast(void* buffer, std::int64_t bytes, int root) override;
  /// out (at root) = reduce over ranks of in.
  Status Reduce(const void* in, void* out, std::int64_t count, DataType dtype,
                ReduceOp op, int root);
  Status Allgatherv(const void* in, std::int64_t bytes, void* out,
                    const std::vector<std::int64_t>& bytes_per_rank) override;
  Status Reducescatter(const void* in, void* out,
                       const std::vector<std::int64_t>& counts, DataType dtype,
                       ReduceOp op) override;
  Status Alltoallv(const void* in, const std::vector<std::int64_t>& send_bytes,
                   void* out,
                   const std::vector<std::int64_t>& recv_bytes) override;

  /// Before the first of Gloo's bound-buffer algorithms (ring_chunked,
  /// halving_doubling) on this context: one large message from every rank
  /// to every other (collective; every rank calls it before the same
  /// collective). Gloo's TCP pair fixes a socket's send buffer (SO_SNDBUF)
  /// at the size of the first bound-buffer message it sends and only ever
  /// raises it for a larger one; a first message of a few bytes (a
  /// notification, a small tensor) left the buffer at the kernel's minimum
  /// for the rest of the job, and every later transfer on that socket,
  /// whatever the algorithm, crawled (on loopback one 64 KiB segment per
  /// delayed acknowledgement). Sent first, this message fixes it at the
  /// largest the kernel allows (net.core.wmem_max), at most 1 MiB. Throws
  /// what Gloo throws (a timeout after HOROVOD_GLOO_TIMEOUT_SECONDS).
  void SizeSendBuffersForBoundAlgorithms();

  const std::shared_ptr<gloo::Context>& context() const { return ctx_; }
  const GlooGroups& groups() const { return groups_; }

 private:
  const GlooGroups& groups_;
  std::shared_ptr<gloo::Context> ctx_;
  /// Reducescatter's whole reduced input (kept between calls).
  std::vector<std::uint8_t> scratch_;
  /// The exchange round's inputs of every rank (kept between calls).
  std::vector<std::uint8_t> exchange_scratch_;
  /// SizeSendBuffersForBoundAlgorithms has run on this context.
  bool send_buffers_sized_ = false;
};

}  // namespace hvdtune::internal
