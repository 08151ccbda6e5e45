// Runs the tensors a cycle agreed on: plans fusion, picks the algorithm from
// the registry (host or device version), drives the backends and reports
// each collective and each finished tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/algorithms/algorithm.h"
#include "core/algorithms/hierarchical_allgather.h"
#include "core/backends/backend.h"
#include "core/backends/mpi/mpi_context.h"
#include "core/fusion_buffer.h"
#include "core/message.h"
#include "core/tensor_entry.h"
#include "hvdtune/events.h"
#include "hvdtune/fusion.h"

namespace hvdtune::internal {

/// Where the executor reports; implemented by the cycle loop.
class ExecutionListener {
 public:
  virtual ~ExecutionListener() = default;
  /// A backend call finished (before its tensors are finished).
  virtual void OnCollective(const CollectiveEvent& e) = 0;
  /// A tensor is done: complete its handle.
  /// [collective_started, collective_finished]: the reduction itself,
  /// inside [started, finished] (fusion copies around it).
  virtual void Finish(TensorEntry& e, Status s, double started, double finished,
                      int fused_with, double collective_started,
                      double collective_finished) = 0;
  /// Completes the handles of the tensors finished since the last call
  /// together (once per backend call, so a waiting application thread
  /// wakes once for a fused group, not once per tensor).
  virtual void CompleteFinished() = 0;
};

/// What one Run() did, for the cycle event.
struct ExecutionTotals {
  int collectives = 0;
  std::int64_t bytes = 0;
  std::int64_t fused_bytes = 0;
};

class Executor {
 public:
  /// `device` is the NCCL backend, or null.
  Executor(const MpiContext& mpi, const MpiTypes& types, Backend& host,
           Backend* device);

  /// `ready` is the same list in the same order on every rank; entries[i]
  /// is this rank's entry for ready[i].
  ExecutionTotals Run(const std::vector<Response>& ready,
                      const std::vector<TensorEntry*>& entries,
                      const KnobSettings& knobs, bool fusion_lookahead,
                      ExecutionListener& listener);

 private:
  void Allreduce(const std::vector<TensorEntry*>& group,
                 const KnobSettings& knobs, ExecutionListener& listener,
                 ExecutionTotals& totals);
  void DeviceAllreduce(const std::vector<TensorEntry*>& group,
                       const KnobSettings& knobs, ExecutionListener& listener,
                       ExecutionTotals& totals);
  void Broadcast(TensorEntry& e, ExecutionListener& listener,
                 ExecutionTotals& totals);
  void Allgather(TensorEntry& e, const Response& resp,
                 const KnobSettings& knobs, ExecutionListener& listener,
                 ExecutionTotals& totals);
  /// Fused like allreduce: rank r's rows of every member, member after
  /// member, form block r of one backend reducescatter, which runs in
  /// pieces of about `chunk_bytes` (pipeline_chunk_bytes; 0 = one piece)
  /// when the whole input is larger.
  void Reducescatter(const std::vector<TensorEntry*>& group,
                     std::int64_t chunk_bytes, ExecutionListener& listener,
                     ExecutionTotals& totals);
  void Alltoall(TensorEntry& e, const Response& resp,
                ExecutionListener& listener, ExecutionTotals& totals);
  AlgorithmContext Context(const KnobSettings& knobs) const {
    return {host_, mpi_, types_, knobs, device_};
  }

  const MpiContext& mpi_;
  const MpiTypes& types_;
  Backend& host_;
  Backend* device_;
  std::vector<std::unique_ptr<AllreduceAlgorithm>> algorithms_;
  HierarchicalAllgather hierarchical_allgather_;
  FusionBuffer fusion_buffer_;
  std::vector<FusedMember> members_;
  /// Reducescatter's fused input and output (kept between calls).
  std::vector<std::uint8_t> scatter_in_;
  std::vector<std::uint8_t> scatter_out_;
  std::vector<FusionItem> items_;
  bool warned_device_fallback_ = false;
};

}  // namespace hvdtune::internal
