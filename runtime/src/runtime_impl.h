// The runtime's state: built once from a RuntimeConfig and its Services
// (runtime_impl.cc), shared between application threads (enqueue, knob
// requests, stats) and the cycle thread (cycle_loop.cc).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/mpi/mpi_backend.h"
#include "backends/mpi/mpi_context.h"
#include "controller.h"
#include "event_bus.h"
#include "executor.h"
#include "hvdtune/runtime.h"
#include "tensor_entry.h"

namespace hvdtune::internal {

class RuntimeImpl final : public ExecutionListener {
 public:
  /// `config_error` is this rank's configuration error (the ranks vote on
  /// it, so every rank throws the same ConfigError and none hangs).
  RuntimeImpl(RuntimeConfig config, Services services,
              std::string config_error = {});
  ~RuntimeImpl() override;

  void Shutdown();
  bool running() const { return running_.load(); }
  const MpiContext& mpi() const { return mpi_; }
  const RuntimeConfig& config() const { return config_; }

  /// Queues the entries atomically under one handle (one entry, or the
  /// members of a grouped allreduce).
  Handle Enqueue(std::vector<TensorEntry> entries);
  KnobSettings knobs() const;
  std::array<bool, kNumKnobs> pinned() const { return config_.knobs.pinned; }
  std::uint64_t RequestKnobUpdate(const KnobSettings& values);
  std::uint64_t knob_version() const;
  RuntimeStats stats() const;
  void MarkStep();
  AutotuneStatus autotune_status() const;

  // ExecutionListener (cycle thread).
  void OnCollective(const CollectiveEvent& e) override;
  void Finish(TensorEntry& e, Status s, double started, double finished,
              int fused_with, double collective_started,
              double collective_finished) override;

 private:
  /// Serialises `values` as the next versioned update (caller holds mu_).
  std::uint64_t QueueKnobUpdateLocked(const KnobSettings& values);
  void StartAutotuner(const Services& services);

  // cycle_loop.cc
  void Loop();
  void RunCycle(bool* stop);
  void PollAutotuner();
  void ApplyKnobUpdate(const std::vector<std::uint8_t>& bytes);
  void FailEverything(const Status& s);

  RuntimeConfig config_;
  MpiContext mpi_;
  std::unique_ptr<MpiTypes> types_;
  std::unique_ptr<MpiBackend> backend_;
  /// NCCL for device buffers; null without a CUDA build or a GPU.
  std::unique_ptr<Backend> nccl_;
  Status nccl_unavailable_;
  /// A CUDA device exists, so enqueued buffers may be device memory.
  bool check_device_pointers_ = false;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<Executor> executor_;
  EventBus bus_;
  /// Rank 0 with autotuning on; also attached to bus_.
  std::shared_ptr<Autotuner> autotuner_;

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

  // Cycle thread only.
  std::unordered_map<std::string, TensorEntry> in_flight_;
  std::vector<TensorEntry*> ready_entries_;
  KnobSettings cycle_knobs_;
  int tensors_this_cycle_ = 0;

  std::thread thread_;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace hvdtune::internal
