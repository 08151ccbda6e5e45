#include "core/executor.h"

#include <algorithm>
#include <cstring>
#include <iostream>

#include "core/reduce.h"
#include "hvdtune/fusion.h"
#include "hvdtune/runtime.h"

namespace hvdtune::internal {
namespace {

// A tensor that finishes without a backend call.
void FinishNow(ExecutionListener& listener, TensorEntry& e, Status s) {
  const double now = RuntimeClock();
  listener.Finish(e, std::move(s), now, now, 1, now, now);
}

}  // namespace

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
    } else if (r.type == CollectiveType::kBarrier ||
               r.type == CollectiveType::kJoin) {
      // Nothing to move: the negotiation completed only once every rank
      // had submitted it (or joined).
      if (r.type == CollectiveType::kJoin) e.handle->last_joined_rank = r.root;
      FinishNow(listener, e, Status::Ok());
    } else if (r.type == CollectiveType::kAlltoall) {
      Alltoall(e, r, listener, totals);
    } else if (r.type == CollectiveType::kReducescatter) {
      group.clear();
      for (std::size_t i : g.members) group.push_back(entries[i]);
      Reducescatter(group, knobs.pipeline_chunk_bytes(), listener, totals);
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
    FinishNow(listener, e,
              Status::InvalidArgument("allgather of tensor '" + e.request.name +
                                      "': a row's size overflows"));
    return;
  }
  std::vector<std::int64_t> bytes_per_rank;
  for (std::int64_t dim : resp.first_dims) bytes_per_rank.push_back(dim * row);
  HandleState::Output& h = e.handle->outputs[static_cast<std::size_t>(e.part)];
  h.bytes.assign(static_cast<std::size_t>(rows * row), 0);
  h.shape = e.request.shape;
  h.shape[0] = rows;
  Backend& b = e.request.device ? *device_ : host_;
  const bool hierarchical = !e.request.device && knobs.hierarchical_allgather();
  const double start = RuntimeClock();
  Status s;
  if (rows * row > 0) {
    if (hierarchical) {
      s = hierarchical_allgather_.Run(Context(knobs), e.input,
                                      e.request.shape[0] * row, h.bytes.data(),
                                      bytes_per_rank);
    } else {
      s = b.Allgatherv(e.input, e.request.shape[0] * row, h.bytes.data(),
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

namespace {

// Elements of one row (all but the first dimension); 0 when a trailing
// dimension is 0, whatever the others.
std::int64_t RowElements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
  }
  for (std::size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

// Rank r's rows of a tensor of `rows` rows over `size` ranks (Horovod's
// split: the first rows % size ranks get one more).
std::int64_t ShareOf(std::int64_t rows, int size, int r) {
  return rows / size + (r < rows % size ? 1 : 0);
}

}  // namespace

void Executor::Reducescatter(const std::vector<TensorEntry*>& group,
                             std::int64_t chunk_bytes,
                             ExecutionListener& listener,
                             ExecutionTotals& totals) {
  const Request& head = group.front()->request;
  const DataType dtype = head.dtype;
  const ReduceOp op = head.op;
  const auto esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  const int size = mpi_.size, rank = mpi_.rank;
  // Every size fits: each member's whole tensor passed the enqueue check.
  std::vector<std::int64_t> counts(static_cast<std::size_t>(size), 0);
  std::int64_t total = 0;
  for (TensorEntry* e : group) {
    const std::int64_t rows =
        e->request.NumElements() == 0 ? 0 : e->request.shape[0];
    const std::int64_t row = rows == 0 ? 0 : RowElements(e->request.shape);
    for (int r = 0; r < size; ++r) {
      counts[static_cast<std::size_t>(r)] += ShareOf(rows, size, r) * row;
    }
    total += rows * row;
    HandleState::Output& out =
        e->handle->outputs[static_cast<std::size_t>(e->part)];
    out.shape = e->request.shape;
    out.shape[0] = ShareOf(e->request.shape[0], size, rank);
    // Into the caller's buffer when it gave one, else the handle's.
    const auto mine =
        static_cast<std::size_t>(ShareOf(rows, size, rank) * row * esize);
    if (e->output == nullptr) out.bytes.assign(mine, 0);
  }
  Backend& b = head.device && device_ ? *device_ : host_;
  const double start = RuntimeClock();
  Status s;
  double reduce_start = start, reduce_end = start;
  if (total > 0) {
    const void* in = group.front()->input;
    const auto result = [](TensorEntry* e) -> std::uint8_t* {
      return e->output != nullptr
                 ? static_cast<std::uint8_t*>(e->output)
                 : e->handle->outputs[static_cast<std::size_t>(e->part)]
                       .bytes.data();
    };
    void* out = result(group.front());
    const ReduceOp wire = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
    const std::int64_t mine = counts[static_cast<std::size_t>(rank)];
    // Elements of each rank's block per backend call: a whole buffer in
    // pieces of about chunk_bytes (a large reduce-scatter in one call runs
    // at half the speed of one in pieces here), else all of it.
    const std::int64_t longest =
        *std::max_element(counts.begin(), counts.end());
    std::int64_t piece = longest;
    if (chunk_bytes > 0 && total * esize > chunk_bytes && !head.device) {
      piece = std::max<std::int64_t>(1, chunk_bytes / esize / size);
    }
    const bool pack = group.size() > 1 || piece < longest;
    if (!pack) {
      reduce_start = RuntimeClock();
      s = b.Reducescatter(in, out, counts, dtype, wire);
      reduce_end = RuntimeClock();
    } else {
      // Block r is rank r's rows of each member in turn; call k takes piece
      // k of every block, so its input is [piece k of block 0][piece k of
      // block 1]... and its output piece k of this rank's block.
      std::vector<std::vector<std::pair<const std::uint8_t*, std::int64_t>>>
          blocks(static_cast<std::size_t>(size));
      std::vector<std::int64_t> offset(group.size(), 0);  // bytes
      for (int r = 0; r < size; ++r) {
        for (std::size_t t = 0; t < group.size(); ++t) {
          const Request& q = group[t]->request;
          const std::int64_t rows = q.NumElements() == 0 ? 0 : q.shape[0];
          const std::int64_t n =
              rows == 0 ? 0
                        : ShareOf(rows, size, r) * RowElements(q.shape) * esize;
          if (n > 0) {
            blocks[static_cast<std::size_t>(r)].emplace_back(
                static_cast<const std::uint8_t*>(group[t]->input) + offset[t],
                n);
          }
          offset[t] += n;
        }
      }
      scatter_in_.resize(static_cast<std::size_t>(total * esize));
      scatter_out_.resize(static_cast<std::size_t>(mine * esize));
      std::vector<std::size_t> seg(static_cast<std::size_t>(size), 0);
      std::vector<std::int64_t> used(static_cast<std::size_t>(size), 0);
      std::uint8_t* dst = scatter_in_.data();
      std::vector<std::int64_t> call_counts(static_cast<std::size_t>(size));
      reduce_start = RuntimeClock();
      double busy = 0;
      for (std::int64_t first = 0; first < longest && s.ok(); first += piece) {
        std::uint8_t* call_in = dst;
        for (int r = 0; r < size; ++r) {
          const auto ri = static_cast<std::size_t>(r);
          const std::int64_t n =
              std::clamp<std::int64_t>(counts[ri] - first, 0, piece);
          call_counts[ri] = n;
          // Copy the next n elements of block r.
          for (std::int64_t left = n * esize; left > 0;) {
            const auto& [src, len] = blocks[ri][seg[ri]];
            const std::int64_t take = std::min(left, len - used[ri]);
            std::memcpy(dst, src + used[ri], static_cast<std::size_t>(take));
            dst += take;
            left -= take;
            used[ri] += take;
            if (used[ri] == len) {
              ++seg[ri];
              used[ri] = 0;
            }
          }
        }
        const double t0 = RuntimeClock();
        s = b.Reducescatter(call_in, scatter_out_.data() + first * esize,
                            call_counts, dtype, wire);
        busy += RuntimeClock() - t0;
      }
      reduce_end = reduce_start + busy;
      out = scatter_out_.data();
    }
    if (s.ok() && op == ReduceOp::kAverage) DivideBy(out, mine, dtype, size);
    if (s.ok() && pack) {
      const std::uint8_t* src = scatter_out_.data();
      for (TensorEntry* e : group) {
        const Request& q = e->request;
        const std::int64_t n = q.NumElements() == 0
                                   ? 0
                                   : ShareOf(q.shape[0], size, rank) *
                                         RowElements(q.shape) * esize;
        if (n > 0) std::memcpy(result(e), src, static_cast<std::size_t>(n));
        src += n;
      }
    }
  }
  const double end = RuntimeClock();
  const std::int64_t bytes = total * esize;
  ++totals.collectives;
  totals.bytes += bytes;
  if (group.size() > 1) totals.fused_bytes += bytes;
  const int n = static_cast<int>(group.size());
  listener.OnCollective({CollectiveType::kReducescatter, "native", b.name(),
                         dtype, bytes, n, start, end - start, s.ok()});
  for (TensorEntry* e : group) {
    listener.Finish(*e, s, start, end, n, reduce_start, reduce_end);
  }
}

void Executor::Alltoall(TensorEntry& e, const Response& resp,
                        ExecutionListener& listener, ExecutionTotals& totals) {
  const int size = mpi_.size, rank = mpi_.rank;
  const auto esize = static_cast<std::int64_t>(DataTypeSize(e.request.dtype));
  // Rank 0 checked that every rank's received rows add up. A row's bytes
  // fit where some rank has rows (its enqueue check passed); with no rows
  // anywhere nothing moves.
  std::int64_t any_rows = 0;
  for (std::int64_t v : resp.first_dims) any_rows |= v;
  std::int64_t row = 0;
  bool overflow = false;
  if (any_rows != 0) {
    row = esize;
    for (std::size_t d = 1; d < e.request.shape.size(); ++d) {
      if (e.request.shape[d] == 0) row = 0;
    }
    for (std::size_t d = 1; row > 0 && d < e.request.shape.size(); ++d) {
      overflow =
          overflow || __builtin_mul_overflow(row, e.request.shape[d], &row);
    }
  }
  std::vector<std::int64_t> send(static_cast<std::size_t>(size)),
      recv(static_cast<std::size_t>(size));
  HandleState::Output& out =
      e.handle->outputs[static_cast<std::size_t>(e.part)];
  out.received_splits.assign(static_cast<std::size_t>(size), 0);
  std::int64_t rows = 0, recv_bytes = 0;
  for (int r = 0; r < size; ++r) {
    const std::int64_t to =
        resp.first_dims[static_cast<std::size_t>(rank * size + r)];
    const std::int64_t from =
        resp.first_dims[static_cast<std::size_t>(r * size + rank)];
    out.received_splits[static_cast<std::size_t>(r)] = from;
    rows += from;
    overflow =
        overflow ||
        __builtin_mul_overflow(to, row, &send[static_cast<std::size_t>(r)]) ||
        __builtin_mul_overflow(from, row, &recv[static_cast<std::size_t>(r)]) ||
        __builtin_add_overflow(recv_bytes, recv[static_cast<std::size_t>(r)],
                               &recv_bytes);
  }
  if (overflow) {
    FinishNow(listener, e,
              Status::InvalidArgument("alltoall of tensor '" + e.request.name +
                                      "': the rows received overflow"));
    return;
  }
  out.shape = e.request.shape;
  out.shape[0] = rows;
  out.bytes.assign(static_cast<std::size_t>(recv_bytes), 0);
  Backend& b = e.request.device && device_ ? *device_ : host_;
  const double start = RuntimeClock();
  Status s;
  if (any_rows != 0 && row > 0) {
    s = b.Alltoallv(e.input, send, out.bytes.data(), recv);
  }
  const double end = RuntimeClock();
  ++totals.collectives;
  totals.bytes += recv_bytes;
  listener.OnCollective({CollectiveType::kAlltoall, "native", b.name(),
                         e.request.dtype, recv_bytes, 1, start, end - start,
                         s.ok()});
  listener.Finish(e, s, start, end, 1, start, end);
}

}  // namespace hvdtune::internal
