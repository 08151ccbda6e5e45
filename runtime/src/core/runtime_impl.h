// The runtime's state: built once from a RuntimeConfig and its Services
// (runtime_impl.cc), shared between application threads (enqueue, knob
// requests, stats) and the cycle thread (cycle_loop.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/backends/mpi/mpi_backend.h"
#include "core/backends/mpi/mpi_context.h"
#include "core/backends/mpi/peer_probe.h"
#include "core/controller.h"
#include "core/event_bus.h"
#include "core/executor.h"
#include "core/tensor_entry.h"
#include "core/thread_scheduling.h"
#include "hvdtune/runtime.h"

namespace hvdtune::internal {

/// The runtime clock (RuntimeClock) read at the kernel tick's resolution:
/// several times cheaper where only seconds matter.
double CoarseRuntimeClock();

class RuntimeImpl final : public ExecutionListener {
 public:
  /// `config_error` is this rank's configuration error (the ranks vote on
  /// it, so every rank throws the same ConfigError and none hangs).
  RuntimeImpl(RuntimeConfig config, Services services,
              std::string config_error = {});
  ~RuntimeImpl() override;

  void Shutdown();
  Status StartTimeline(const std::string& path, bool mark_cycles);
  Status StopTimeline();
  bool running() const { return running_.load(); }
  /// Shutdown() was called on this rank.
  bool shut_down() const { return shut_down_locally_.load(); }
  const MpiContext& mpi() const { return mpi_; }
  /// The NCCL backend, or null (then nccl_unavailable() says why).
  Backend* nccl() const { return nccl_.get(); }
  const Status& nccl_unavailable() const { return nccl_unavailable_; }
  const RuntimeConfig& config() const { return config_; }

  /// Queues the entries atomically under one handle (one entry, or the
  /// members of a grouped allreduce).
  /// The entries are moved from.
  Handle Enqueue(std::span<const EntrySpec> specs);
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
  void CompleteFinished() override;

 private:
  /// Serialises `values` as the next versioned update (caller holds mu_).
  std::uint64_t QueueKnobUpdateLocked(const KnobSettings& values);
  void StartAutotuner(const Services& services);

  // cycle_loop.cc
  void Loop();
  /// One cycle; true when this rank submitted tensors in it or some
  /// became ready (were run or failed).
  bool RunCycle(bool* stop);
  /// Sleeps until `deadline` or until work arrives on an idle rank.
  void WaitForWork(std::chrono::steady_clock::time_point deadline);
  /// After an arrival on an idle rank: waits while more tensors keep
  /// arriving (a burst), at most one cycle_time.
  void GatherArrivals();
  void PollAutotuner();
  void ApplyKnobUpdate(const std::vector<std::uint8_t>& bytes);
  void FailEverything(const Status& s);
  /// Stand-in number i of this cycle for another rank's allreduce while
  /// this rank has joined: neutral input, discarded output.
  TensorEntry* StandIn(const Response& r, std::size_t i);

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
  /// Gather bursts of submissions into one cycle (GatherArrivals): only
  /// where the ranks on this machine each have a hardware thread.
  bool gather_arrivals_ = false;
  /// A sink wants tensor events (their queue spans): enqueue times come
  /// from the precise clock. Otherwise only the stall checks read them, in
  /// seconds, and the coarse clock (the same one, read at a tick's
  /// resolution, for a fraction of the cost) is enough.
  std::atomic<bool> precise_enqueue_times_{true};
  /// The timeline being written and how to make one (Services); a change
  /// asked for by Start/StopTimeline is applied by the cycle thread at its
  /// next cycle (the bus is the cycle thread's).
  std::function<std::shared_ptr<EventSink>(const std::string&, bool)>
      make_timeline_;
  std::shared_ptr<EventSink> timeline_;
  RuntimeInfo info_;
  std::mutex timeline_mu_;        // one Start/StopTimeline at a time
  bool timeline_change_ = false;  // under mu_
  std::shared_ptr<EventSink> next_timeline_;  // under mu_
  std::condition_variable timeline_cv_;
  /// Cycle thread: applies a pending timeline change.
  void ApplyTimelineChange();
  /// Hands `next` to the cycle thread and waits until it swapped it in;
  /// returns the previous timeline (to be stopped by the caller).
  Status SwapTimeline(std::shared_ptr<EventSink> next,
                      std::shared_ptr<EventSink>* previous);

  // Shared with application threads.
  mutable std::mutex mu_;
  /// Entries [0, queue_size_) are queued; the rest are spares whose name and
  /// shape buffers the next submissions reuse (the cycle thread swaps each
  /// drained entry with its slot's previous one, or with null the first
  /// time an id is drained: Enqueue makes the entry then).
  std::vector<std::unique_ptr<TensorEntry>> queue_;
  std::size_t queue_size_ = 0;
  /// Names interned once (a name's id for as long as the runtime lives) and
  /// which ids are queued or in flight on this rank.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, TensorId, NameHash, std::equal_to<>> ids_;
  HandleStatePool handle_pool_;
  std::vector<std::uint8_t> busy_;
  std::size_t busy_count_ = 0;
  KnobSettings knobs_;  // in force; written by the cycle thread
  std::uint64_t knob_version_ = 0;
  std::optional<std::vector<std::uint8_t>> pending_update_;
  std::uint64_t next_update_version_ = 0;
  RuntimeStats stats_;
  std::atomic<bool> shutdown_requested_{false};
  /// A tensor arrived while nothing of this rank was queued or in flight:
  /// the next cycle starts now instead of at the next cycle_time boundary.
  bool idle_arrival_ = false;
  /// signal_.waits and enqueued_ when that tensor arrived.
  std::uint64_t arrival_waits_ = 0;
  std::uint64_t arrival_enqueued_ = 0;
  /// Tensors enqueued so far (read by the cycle thread while gathering).
  std::atomic<std::uint64_t> enqueued_{0};
  WaitSignal& signal_ = handle_pool_.arrivals();
  /// The cycle thread sleeps on it between cycles.
  std::condition_variable work_cv_;
  std::atomic<bool> running_{false};
  /// Why the cycle loop stopped (ok: not stopped, or an orderly shutdown).
  Status stop_reason_;

  // Cycle thread only.
  /// In-flight tensors by id. Entries never move (the controller keeps
  /// pointers to their requests), and a drained entry takes its slot by
  /// swapping two pointers.
  std::vector<std::unique_ptr<TensorEntry>> slots_;
  /// Buffers reused every cycle (no per-cycle allocation once warm); the
  /// first drained_size_ entries are this cycle's submissions.
  std::vector<std::unique_ptr<TensorEntry>> drained_;
  std::size_t drained_size_ = 0;
  std::vector<const Request*> requests_;
  Controller::CycleResult cycle_result_;
  std::vector<TensorEntry*> ready_entries_;
  std::vector<std::unique_ptr<TensorEntry>> stand_ins_;
  /// Tensors finished but not yet completed (CompleteFinished()).
  struct Finished {
    TensorId id;
    Status status;
  };
  std::vector<Finished> finished_;
  KnobSettings cycle_knobs_;
  // The cycle thread's priority boost; made when the thread starts.
  std::optional<PriorityBoost> boost_;
  int tensors_this_cycle_ = 0;

  std::thread thread_;
  // The data-phase watchdog (cycle_loop.cc). A collective blocked inside
  // MPI on a peer or a link that is gone cannot be abandoned: past
  // HOROVOD_STALL_CHECK_TIME_SECONDS the watchdog warns, past
  // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS it ends the job; both times it names
  // the ranks that do not answer (probe_). Runs while stall handling is on.
  void Watchdog();
  /// Asks the other ranks (probe_) and returns what to say about them.
  std::string DescribeUnreachable(int* unreachable);
  std::atomic<double> executing_since_{0.0};
  std::atomic<std::size_t> executing_count_{0};
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  std::string executing_first_;  // guarded by watchdog_mu_
  bool watchdog_stop_ = false;   // guarded by watchdog_mu_
  /// Only where MPI provides MPI_THREAD_MULTIPLE (the watchdog's thread
  /// calls MPI while the cycle thread waits inside it).
  std::unique_ptr<PeerProbe> probe_;
  std::function<void(double, int)> report_backend_wait_;
  std::thread watchdog_;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
  std::atomic<bool> shut_down_locally_{false};
};

}  // namespace hvdtune::internal
