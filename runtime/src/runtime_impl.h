// The runtime's state and its cycle thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/hierarchical_allgather.h"
#include "autotune/parameter_manager.h"
#include "autotune/throughput_meter.h"
#include "backends/mpi/mpi_backend.h"
#include "backends/mpi/mpi_context.h"
#include "controller.h"
#include "handle_state.h"
#include "hvdtune/runtime.h"

namespace hvdtune::internal {

/// One enqueued collective, owned by the cycle thread once drained.
struct TensorEntry {
  Request request;
  const void* input = nullptr;
  void* output = nullptr;
  std::shared_ptr<HandleState> handle;
};

/// Settings read at init that are not knobs.
struct RuntimeSettings {
  KnobConfig knobs;
  /// HVDTUNE_RANKS_PER_NODE: emulate nodes of this many consecutive ranks
  /// (0 = ask MPI which ranks share memory).
  int ranks_per_node = 0;
  /// HVDTUNE_FUSION_LOOKAHEAD: fuse each dtype/op in its own buffer (1) or
  /// close the buffer whenever the dtype changes (0, for comparison).
  bool fusion_lookahead = true;
  AutotuneSettings autotune;
};

/// Parses every HOROVOD_* / HVDTUNE_* setting; throws ConfigError.
RuntimeSettings ParseRuntimeSettings(const EnvLookup& env);

class RuntimeImpl {
 public:
  explicit RuntimeImpl(const RuntimeOptions& options);
  /// Seconds on the runtime's monotonic clock.
  static double Now();
  ~RuntimeImpl();

  void Shutdown();
  bool running() const { return running_.load(); }
  const MpiContext& mpi() const { return mpi_; }

  /// Queues the entries atomically under one handle (one entry, or the
  /// members of a grouped allreduce).
  Handle Enqueue(std::vector<TensorEntry> entries);
  KnobSettings knobs() const;
  std::array<bool, kNumKnobs> pinned() const { return settings_.knobs.pinned; }
  std::uint64_t RequestKnobUpdate(const KnobSettings& values);
  std::uint64_t knob_version() const;
  RuntimeStats stats() const;
  void MarkStep();
  AutotuneStatus autotune_status() const;

 private:
  /// Serialises `values` as the next versioned update (caller holds mu_).
  std::uint64_t QueueKnobUpdateLocked(const KnobSettings& values);
  /// Rank 0: feeds completed steps to the autotuner.
  void Autotune();
  void Loop();
  void RunCycle(bool* stop);
  void Execute(const std::vector<Response>& ready);
  void ExecuteAllreduce(const std::vector<TensorEntry*>& group);
  void ExecuteDeviceAllreduce(const std::vector<TensorEntry*>& group);
  void ExecuteBroadcast(TensorEntry& e);
  void ExecuteAllgather(TensorEntry& e, const Response& resp);
  void ApplyKnobUpdate(const std::vector<std::uint8_t>& bytes);
  /// Completes the entry's handle and lets its name be enqueued again.
  void Finish(TensorEntry& e, Status s);
  void FailEverything(const Status& s);

  RuntimeSettings settings_;
  MpiContext mpi_;
  std::unique_ptr<MpiTypes> types_;
  std::unique_ptr<MpiBackend> backend_;
  /// NCCL for device buffers; null without a CUDA build or a GPU.
  std::unique_ptr<Backend> nccl_;
  Status nccl_unavailable_;
  /// A CUDA device exists, so enqueued buffers may be device memory.
  bool check_device_pointers_ = false;
  std::vector<std::unique_ptr<AllreduceAlgorithm>> algorithms_;
  HierarchicalAllgather hierarchical_allgather_;
  std::unique_ptr<Controller> controller_;

  // Shared with application threads.
  mutable std::mutex mu_;
  std::deque<TensorEntry> queue_;
  std::unordered_set<std::string> names_in_flight_;
  KnobSettings knobs_;  // in force; written by the cycle thread
  std::uint64_t knob_version_ = 0;
  std::optional<std::vector<std::uint8_t>> pending_update_;
  std::uint64_t next_update_version_ = 0;
  RuntimeStats stats_;
  std::atomic<bool> shutdown_requested_{false};
  std::atomic<bool> running_{false};
  std::vector<double> step_marks_;
  AutotuneStatus autotune_status_;

  // Cycle thread only.
  std::unordered_map<std::string, TensorEntry> in_flight_;
  std::vector<std::uint8_t> fusion_buffer_;
  KnobSettings cycle_knobs_;
  std::unique_ptr<ThroughputMeter> meter_;
  std::unique_ptr<ParameterManager> tuner_;
  /// Tensors completed this cycle, for the meter.
  struct Completion {
    std::string name;
    double bytes;
    double time;
  };
  std::vector<Completion> completed_;

  std::thread thread_;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace hvdtune::internal
