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
  /// What allgather, reducescatter and alltoall return: the result's bytes
  /// and shape (the first member's, for a grouped submission). Valid after a
  /// successful Wait(); empty for the other collectives.
  const std::vector<std::uint8_t>& output() const;
  const std::vector<std::int64_t>& output_shape() const;
  /// Member i of a grouped allgather or reducescatter (0 for a single
  /// tensor); empty when there is no such member.
  std::size_t num_outputs() const;
  const std::vector<std::uint8_t>& output(std::size_t i) const;
  const std::vector<std::int64_t>& output_shape(std::size_t i) const;
  /// Alltoall: the rows received from each rank, in rank order.
  const std::vector<std::int64_t>& received_splits() const;
  /// Join: the rank that joined last (-1 before the join completed).
  int last_joined_rank() const;

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

/// One input of a grouped allgather or reducescatter.
struct InputTensor {
  std::string name;
  const void* input = nullptr;
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
  /// The ranks of MPI_COMM_WORLD this runtime spans, ascending: a process
  /// set, whose ranks alone construct it (collectively); empty: all ranks.
  std::vector<int> ranks = {};
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

/// Whether this build has the NCCL backend (the CUDA toolkit and NCCL were
/// found at configure time). A build without it treats every buffer as host
/// memory.
bool BuiltWithNccl();

/// NCCL's version code (e.g. 22803 for 2.28.3) of the library loaded at run
/// time; 0 in a build without the NCCL backend.
int NcclRuntimeVersion();

/// The NCCL objects of a runtime's device backend (void* so that this header
/// needs no CUDA): the communicator over all ranks (ncclComm_t), the stream
/// its collectives run on (cudaStream_t) and the CUDA device. All null / -1
/// when the runtime has no NCCL backend.
struct NcclHandles {
  void* world_comm = nullptr;
  void* stream = nullptr;
  int device = -1;
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
  /// False once the cycle loop stopped: after Shutdown() on any rank, or a
  /// failure of the negotiation.
  bool running() const;
  /// True once Shutdown() was called on this rank. A shutdown another rank
  /// asked for stops the collectives here (running() is false) but leaves
  /// this rank initialised, as in Horovod: a binding's init() should then
  /// return at once rather than build a new Runtime, whose construction is
  /// collective and would wait forever for ranks that have exited.
  bool shut_down() const;

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  int cross_rank() const;
  int cross_size() const;

  /// True when this runtime has its NCCL backend, so CUDA device buffers
  /// (told apart by their pointers) run on NCCL: a build with NCCL, a GPU
  /// per rank of the node (or several ranks per GPU where NCCL >= 2.30 and
  /// NCCL_MULTI_RANK_GPU_ENABLE=1), every rank agreeing.
  bool has_nccl() const;
  /// Why has_nccl() is false (empty when it is true).
  std::string nccl_unavailable() const;
  /// The NCCL backend's communicator and stream, for a program that compares
  /// against or interleaves raw NCCL calls (bench/nccl_busbw.cc). Use them
  /// only while no collective of this runtime is in flight.
  NcclHandles nccl_handles() const;

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

  /// Completes on every rank once every rank called it (Horovod's barrier).
  /// One barrier may be in flight per rank at a time.
  Handle Barrier();

  /// Reduces every rank's `input` (shape[0] >= 0 rows, at least one
  /// dimension) and leaves rank r its share of the rows in
  /// Handle::output(): shape[0] / size rows each, and one more for the first
  /// shape[0] % size ranks (Horovod's split). Fused with other
  /// reducescatters of the same dtype and op like allreduce; op may be
  /// kSum, kAverage, kMin, kMax or kProduct. With `output` (room for this
  /// rank's rows, valid until completion) the result is written there
  /// instead, and Handle::output() stays empty (output_shape() is set).
  Handle Reducescatter(std::string_view name, const void* input,
                       std::span<const std::int64_t> shape, DataType dtype,
                       ReduceOp op, void* output = nullptr);
  /// Reducescatters `tensors` as one unit (negotiated, fused and completed
  /// together; one failing member fails all). Member i's result is
  /// Handle::output(i) / output_shape(i).
  Handle GroupedReducescatter(std::string group,
                              std::span<const InputTensor> tensors,
                              ReduceOp op);

  /// Sends rows of `input` (at least one dimension) to every rank: splits[d]
  /// rows to rank d, in order, or shape[0] / size rows to each when
  /// `splits` is empty (shape[0] must then divide evenly). The rows
  /// received, in rank order, are in Handle::output(), and how many came
  /// from each rank in Handle::received_splits(). All but the first
  /// dimension must agree across ranks.
  Handle Alltoall(std::string_view name, const void* input,
                  std::span<const std::int64_t> shape, DataType dtype,
                  std::span<const std::int64_t> splits = {});

  /// Allgathers `tensors` as one unit (negotiated and completed together;
  /// one failing member fails all). Member i's result is Handle::output(i)
  /// / output_shape(i).
  Handle GroupedAllgather(std::string group,
                          std::span<const InputTensor> tensors);

  /// This rank has no more data (Horovod's join): until every rank joined,
  /// it takes part in the other ranks' allreduces with neutral elements (0
  /// for sum and average, 1 for product, the type's extremes for min and
  /// max; average still divides by size()), and barriers pass it; a
  /// broadcast, allgather, reducescatter or alltoall submitted meanwhile
  /// fails on every rank, saying so. Completes on every rank once all
  /// joined; Handle::last_joined_rank() is the last to join.
  Handle Join();

  /// Starts writing Horovod's timeline to `path` (rank 0 writes; the other
  /// ranks write nothing), replacing the one being written, if any (which
  /// is closed). Horovod's start_timeline; HOROVOD_TIMELINE=DYNAMIC starts
  /// none at init. Every rank may call it; errors (an empty path, no
  /// timeline module in this build, a stopped runtime, a file that cannot
  /// be opened) come back as the status.
  Status StartTimeline(const std::string& path, bool mark_cycles = false);
  /// Stops and closes the timeline being written (OK when there is none).
  Status StopTimeline();

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
