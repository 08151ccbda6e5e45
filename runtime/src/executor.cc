#include "executor.h"

#include <iostream>

#include "hvdtune/fusion.h"
#include "hvdtune/runtime.h"
#include "reduce.h"

namespace hvdtune::internal {
Executor::Executor(const MpiContext& mpi, const MpiTypes& types, Backend& host,
                   Backend* device)
    : mpi_(mpi),
      types_(types),
      host_(host),
      device_(device),
      algorithms_(MakeAllreduceAlgorithms()) {}

ExecutionTotals Executor::Run(const std::vector<Response>& ready,
                              const std::vector<TensorEntry*>& entries,
                              const KnobSettings& knobs, bool fusion_lookahead,
                              ExecutionListener& listener) {
  ExecutionTotals totals;
  if (ready.empty()) return totals;
  std::vector<FusionItem>& items = items_;
  items.clear();
  for (std::size_t i = 0; i < ready.size(); ++i) {
    const Response& r = ready[i];
    items.push_back({r.type, r.dtype, r.op, entries[i]->bytes,
                     r.kind == Response::Kind::kError, r.device});
  }
  const auto groups =
      PlanFusion(items, knobs.fusion_threshold_bytes(), fusion_lookahead);
  std::vector<TensorEntry*> group;
  for (const FusionGroup& g : groups) {
    const std::size_t first = g.members.front();
    const Response& r = ready[first];
    TensorEntry& e = *entries[first];
    if (r.kind == Response::Kind::kError) {
      const double now = RuntimeClock();
      listener.Finish(
          e, r.stalled ? Status::Stalled(r.error) : Status::Mismatch(r.error),
          now, now, 1, now, now);
    } else if (r.type == CollectiveType::kBroadcast) {
      Broadcast(e, listener, totals);
    } else if (r.type == CollectiveType::kAllgather) {
      Allgather(e, r, knobs, listener, totals);
    } else {
      group.clear();
      for (std::size_t i : g.members) group.push_back(entries[i]);
      if (r.device) {
        DeviceAllreduce(group, knobs, listener, totals);
      } else {
        Allreduce(group, knobs, listener, totals);
      }
    }
    listener.CompleteFinished();
  }
  return totals;
}

void Executor::Allreduce(const std::vector<TensorEntry*>& group,
                         const KnobSettings& knobs, ExecutionListener& listener,
                         ExecutionTotals& totals) {
  const Request& head = group.front()->request;
  const DataType dtype = head.dtype;
  const ReduceOp op = head.op;
  const std::size_t esize = DataTypeSize(dtype);
  const AlgorithmContext ctx = Context(knobs);
  AllreduceAlgorithm& algorithm =
      *algorithms_.at(static_cast<std::size_t>(knobs.allreduce_algorithm()));
  const ReduceOp wire_op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  // Gradients become ready in backward order, the reverse of the order they
  // lie in a flat gradient buffer: concatenated in reverse, such views are
  // their own concatenation and need no copies. Every rank has the same
  // plan, so every rank concatenates in the same order; the tensors still
  // finish in ready order.
  members_.clear();
  std::int64_t bytes = 0;
  for (auto it = group.rbegin(); it != group.rend(); ++it) {
    const TensorEntry* e = *it;
    const auto b = static_cast<std::size_t>(e->bytes);
    members_.push_back({e->input, e->output, b});
    bytes += static_cast<std::int64_t>(b);
  }
  const double start = RuntimeClock();
  // The reduction's span, for the timeline (copy-in before, copy-out after).
  double reduce_start = -1, reduce_end = start;
  const Status s = fusion_buffer_.Allreduce(
      members_, esize, knobs.pipeline_chunk_bytes(),
      [&](const void* in, void* out, std::int64_t n) {
        if (reduce_start < 0) reduce_start = RuntimeClock();
        Status st = algorithm.Run(ctx, in, out, n, dtype, wire_op);
        reduce_end = RuntimeClock();
        if (st.ok() && op == ReduceOp::kAverage) {
          DivideBy(out, n, dtype, mpi_.size);
        }
        return st;
      });
  const double end = RuntimeClock();
  ++totals.collectives;
  totals.bytes += bytes;
  if (group.size() > 1) totals.fused_bytes += bytes;
  const int n = static_cast<int>(group.size());
  listener.OnCollective({CollectiveType::kAllreduce, algorithm.name(), "mpi",
                         dtype, bytes, n, start, end - start, s.ok()});
  if (reduce_start < 0) reduce_start = start;
  for (TensorEntry* e : group) {
    listener.Finish(*e, s, start, end, n, reduce_start, reduce_end);
  }
}

void Executor::DeviceAllreduce(const std::vector<TensorEntry*>& group,
                               const KnobSettings& knobs,
                               ExecutionListener& listener,
                               ExecutionTotals& totals) {
  // Device tensors are never fused (no host staging): each one is reduced in
  // place by the algorithm's device version, or by the device backend's own
  // allreduce when the algorithm has none.
  const AlgorithmContext ctx = Context(knobs);
  AllreduceAlgorithm* algorithm =
      algorithms_.at(static_cast<std::size_t>(knobs.allreduce_algorithm()))
          .get();
  if (!algorithm->has_device_version()) {
    if (!warned_device_fallback_) {
      std::cerr << "[hvdtune rank " << mpi_.rank << "] allreduce algorithm '"
                << algorithm->name()
                << "' has no device version; device tensors use 'native' "
                   "(the device backend's own allreduce)"
                << std::endl;
      warned_device_fallback_ = true;
    }
    algorithm = algorithms_.front().get();
  }
  for (TensorEntry* e : group) {
    const std::int64_t n = e->request.NumElements();
    const DataType dtype = e->request.dtype;
    const double start = RuntimeClock();
    Status s;
    if (n > 0) {
      s = algorithm->RunDevice(ctx, e->input, e->output, n, dtype,
                               e->request.op);
    }
    const double end = RuntimeClock();
    const std::int64_t bytes = e->bytes;
    ++totals.collectives;
    totals.bytes += bytes;
    listener.OnCollective({CollectiveType::kAllreduce, algorithm->name(),
                           "nccl", dtype, bytes, 1, start, end - start,
                           s.ok()});
    listener.Finish(*e, s, start, end, 1, start, end);
  }
}

void Executor::Broadcast(TensorEntry& e, ExecutionListener& listener,
                         ExecutionTotals& totals) {
  const std::int64_t bytes = e.bytes;
  Backend& b = e.request.device ? *device_ : host_;
  const double start = RuntimeClock();
  Status s;
  if (bytes > 0) s = b.Broadcast(e.output, bytes, e.request.root);
  const double end = RuntimeClock();
  ++totals.collectives;
  totals.bytes += bytes;
  listener.OnCollective({CollectiveType::kBroadcast, "native", b.name(),
                         e.request.dtype, bytes, 1, start, end - start,
                         s.ok()});
  listener.Finish(e, s, start, end, 1, start, end);
}

void Executor::Allgather(TensorEntry& e, const Response& resp,
                         const KnobSettings& knobs, ExecutionListener& listener,
                         ExecutionTotals& totals) {
  // Rank 0 checked that the row counts add up. With no rows at all, or a
  // zero among the trailing dimensions, the others need not multiply
  // without overflow (each rank's size check passed an empty tensor), and
  // the row size is 0.
  std::int64_t rows = 0;
  for (std::int64_t dim : resp.first_dims) rows += dim;
  std::int64_t row = static_cast<std::int64_t>(DataTypeSize(e.request.dtype));
  for (std::size_t d = 1; d < e.request.shape.size(); ++d) {
    if (e.request.shape[d] == 0) row = 0;  // empty rows, whatever the rest
  }
  bool overflow = false;
  for (std::size_t d = 1; rows > 0 && row > 0 && d < e.request.shape.size();
       ++d) {
    overflow =
        overflow || __builtin_mul_overflow(row, e.request.shape[d], &row);
  }
  if (rows == 0) row = 0;
  if (overflow) {
    const double now = RuntimeClock();
    listener.Finish(
        e,
        Status::InvalidArgument("allgather of tensor '" + e.request.name +
                                "': a row's size overflows"),
        now, now, 1, now, now);
    return;
  }
  std::vector<std::int64_t> bytes_per_rank;
  for (std::int64_t dim : resp.first_dims) bytes_per_rank.push_back(dim * row);
  HandleState& h = *e.handle;
  h.output.assign(static_cast<std::size_t>(rows * row), 0);
  h.output_shape = e.request.shape;
  h.output_shape[0] = rows;
  Backend& b = e.request.device ? *device_ : host_;
  const bool hierarchical = !e.request.device && knobs.hierarchical_allgather();
  const double start = RuntimeClock();
  Status s;
  if (rows * row > 0) {
    if (hierarchical) {
      s = hierarchical_allgather_.Run(Context(knobs), e.input,
                                      e.request.shape[0] * row, h.output.data(),
                                      bytes_per_rank);
    } else {
      s = b.Allgatherv(e.input, e.request.shape[0] * row, h.output.data(),
                       bytes_per_rank);
    }
  }
  const double end = RuntimeClock();
  ++totals.collectives;
  totals.bytes += rows * row;
  listener.OnCollective(
      {CollectiveType::kAllgather, hierarchical ? "hierarchical" : "native",
       b.name(), e.request.dtype, rows * row, 1, start, end - start, s.ok()});
  listener.Finish(e, s, start, end, 1, start, end);
}

}  // namespace hvdtune::internal
