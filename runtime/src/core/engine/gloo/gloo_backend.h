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
  /// DirectAllreduce (gloo_direct_allreduce.h) in place on `data` over
  /// this backend's context, in segments of at most `segment_bytes`; bytes
  /// to lower ranks through `reverse` when set (rank r of this context is
  /// rank reverse_rank[r] there).
  Status DirectAllreduce(void* data, std::int64_t count, DataType dtype,
                         ReduceOp op, std::int64_t segment_bytes,
                         const std::shared_ptr<gloo::Context>& reverse,
                         const std::vector<int>& reverse_rank);
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

  const std::shared_ptr<gloo::Context>& context() const { return ctx_; }
  const GlooGroups& groups() const { return groups_; }

 private:
  const GlooGroups& groups_;
  std::shared_ptr<gloo::Context> ctx_;
  /// Reducescatter's whole reduced input (kept between calls).
  std::vector<std::uint8_t> scratch_;
  /// The direct allreduce's incoming copies (kept between calls).
  std::vector<std::uint8_t> direct_scratch_;
  /// The exchange round's inputs of every rank (kept between calls).
  std::vector<std::uint8_t> exchange_scratch_;
};

}  // namespace hvdtune::internal
