// The hvdtune runtime: asynchronous named collectives executed by one
// background cycle thread per process on top of MPI.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hvdtune/config.h"
#include "hvdtune/events.h"
#include "hvdtune/knobs.h"
#include "hvdtune/services.h"
#include "hvdtune/status.h"
#include "hvdtune/types.h"

namespace hvdtune {

namespace internal {
struct HandleState;
struct EntrySpec;
class RuntimeImpl;
}  // namespace internal

/// A pending collective. Copyable; all copies see the same operation.
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<internal::HandleState> state)
      : state_(std::move(state)) {}

  bool valid() const { return state_ != nullptr; }
  /// True once the operation finished (successfully or not).
  bool Poll() const;
  /// Blocks until the operation finished and returns its status.
  Status Wait() const;
  /// Blocks for at most `seconds`; true once the operation finished. Lets a
  /// binding wait in slices and still react to signals (Ctrl-C).
  bool WaitFor(double seconds) const;
  /// kInProgress while running, then the final status.
  Status status() const;
  /// Allgather only: the gathered bytes (rank order) and the output shape.
  /// Valid after a successful Wait().
  const std::vector<std::uint8_t>& output() const;
  const std::vector<std::int64_t>& output_shape() const;

 private:
  std::shared_ptr<internal::HandleState> state_;
};

/// One member of a grouped allreduce.
struct AllreduceTensor {
  std::string name;
  const void* input = nullptr;
  void* output = nullptr;
  std::vector<std::int64_t> shape;
  DataType dtype = DataType::kFloat32;
};

/// The environment-driven way to build a Runtime (what any application gets
/// with HOROVOD_AUTOTUNE=1): ParseConfig(env) + DefaultServices().
struct RuntimeOptions {
  /// Where HOROVOD_* / HVDTUNE_* settings are read; the process environment
  /// when empty.
  EnvLookup env = {};
  /// The application splits its gradient list into knobs().num_groups()
  /// groups, so the autotuner may tune num_groups.
  bool tune_num_groups = false;
  /// Attached after the sinks the environment asks for.
  std::vector<std::shared_ptr<EventSink>> sinks = {};
  /// Warm starts for the autotuner; none when null.
  std::shared_ptr<ConfigSource> config_source = nullptr;
};

/// Counters of the cycle thread, for benchmarks and metrics.
struct RuntimeStats {
  std::uint64_t cycles = 0;
  /// Cycles in which at least one tensor was negotiated or executed.
  std::uint64_t active_cycles = 0;
  /// Seconds spent agreeing on ready tensors (cache bit exchange plus full
  /// negotiation), summed over all cycles.
  double negotiation_seconds = 0;
  /// Seconds spent in negotiation during active cycles only.
  double active_negotiation_seconds = 0;
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t tensors_completed = 0;
  /// Backend collective calls issued (a fused buffer counts once).
  std::uint64_t collective_calls = 0;
  std::uint64_t bytes_allreduced = 0;
  std::uint64_t knob_version = 0;
  /// Cycle number at which the knob values in force were applied (cycles
  /// run in lockstep, so this is the same on every rank).
  std::uint64_t knob_update_cycle = 0;
  /// Seconds the cycle thread spent metering steps and polling the
  /// autotuner (rank 0 with HOROVOD_AUTOTUNE=1; 0 elsewhere). The
  /// optimizer itself runs on the autotuner's own thread.
  double autotune_seconds = 0;
};

/// Owns all state of one initialisation: MPI communicators, the background
/// thread, queues, the response cache and the fusion buffer.
///
/// Every rank of MPI_COMM_WORLD must construct one; the ranks check that
/// they agree on the configuration before anything else (a bad or
/// rank-dependent setting throws ConfigError on every rank, none hangs),
/// then the cycle thread starts. Initialises MPI (MPI_THREAD_MULTIPLE) when
/// the application has not. A new Runtime may be created after the
/// previous one shut down.
class Runtime {
 public:
  /// From the environment: ParseConfig(options.env) and DefaultServices().
  /// Defined by hvdtune::runtime (the composition root); a program linking
  /// only hvdtune::core uses the constructor below.
  explicit Runtime(RuntimeOptions options = {});
  /// The one construction path: a parsed configuration and its services
  /// (hvdtune::core).
  Runtime(RuntimeConfig config, Services services);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Stops the cycle thread on every rank (any rank may call it first);
  /// pending handles fail with kAborted. Idempotent.
  void Shutdown();
  bool running() const;

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  int cross_rank() const;
  int cross_size() const;

  /// Allreduce `input` into `output` (may be the same pointer). Both hold
  /// prod(shape) elements of `dtype`; they must stay valid until completion.
  Handle Allreduce(std::string_view name, const void* input, void* output,
                   std::span<const std::int64_t> shape, DataType dtype,
                   ReduceOp op);
  /// Allreduces `tensors` as one unit (Horovod's grouped_allreduce): they are
  /// negotiated together, released to the fusion planner together (so they
  /// fuse when their dtypes agree and they fit the threshold) and complete
  /// together. If any member fails (e.g. a shape mismatch), every member
  /// fails. Every rank must pass the same `group` name with the same member
  /// names; the returned handle completes when the last member does.
  Handle GroupedAllreduce(std::string group,
                          std::span<const AllreduceTensor> tensors,
                          ReduceOp op);
  /// Broadcast `buffer` from `root` to every rank, in place.
  Handle Broadcast(std::string_view name, void* buffer,
                   std::span<const std::int64_t> shape, DataType dtype,
                   int root);
  /// Concatenate every rank's `input` along the first dimension, which may
  /// differ per rank; the result is in Handle::output().
  Handle Allgather(std::string_view name, const void* input,
                   std::span<const std::int64_t> shape, DataType dtype);

  /// The knob values the cycle thread is using now.
  KnobSettings knobs() const;
  /// Which knobs the user pinned through the environment.
  std::array<bool, kNumKnobs> pinned_knobs() const;
  /// Rank 0 only: asks for new knob values. They travel to every rank as a
  /// versioned update and are applied by all ranks at the same cycle
  /// boundary. Returns the update's version. Throws std::logic_error on
  /// ranks other than 0 and ConfigError for values outside the table.
  std::uint64_t RequestKnobUpdate(const KnobSettings& values);
  /// Version of the knob values in force (0 = the initial ones).
  std::uint64_t knob_version() const;

  RuntimeStats stats() const;

  /// Marks the end of a training step for the autotuner's throughput meter.
  /// Optional: without it, steps are found from repeating tensor names. Call
  /// it after the step's collectives completed.
  void MarkStep();
  AutotuneStatus autotune_status() const;
  /// The configuration this runtime was built with.
  const RuntimeConfig& config() const;

 private:
  Handle Enqueue(std::span<const internal::EntrySpec> specs);

  std::unique_ptr<internal::RuntimeImpl> impl_;
};

}  // namespace hvdtune
