// The runtime's event stream: what the cycle thread did, as plain records,
// delivered to every attached EventSink. The throughput meter, the autotune
// log, the stderr log (and metrics, the store, the timeline) are sinks.
//
// Every event is delivered on the runtime's cycle thread, in the order it
// happened. A sink must be cheap there (update a counter, push to a queue):
// anything slow belongs on a thread of the sink's own. An exception thrown
// by a sink detaches that sink (one warning); the job goes on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hvdtune/knobs.h"
#include "hvdtune/status.h"
#include "hvdtune/types.h"

namespace hvdtune {

/// Seconds on the runtime's monotonic clock (the clock of every event).
double RuntimeClock();

enum class AutotunePhase { kOff, kWarmup, kExploring, kFrozen, kRetuning };
/// "off", "warmup", "exploring", "frozen", "retuning".
std::string_view AutotunePhaseName(AutotunePhase phase);

/// An elastic job's world as its rank sees it (docs/elastic.md).
struct ElasticInfo {
  /// The world's version (0, 1, ...); -1 when the job is not elastic.
  int world = -1;
  /// This process's resets so far, by cause ("rank_lost",
  /// "host_unreachable", "hosts_added", "hosts_removed", "hosts_changed").
  std::vector<std::pair<std::string, int>> resets;
  /// The cause of the reset into this world; empty in the process's first.
  std::string last_reset;
};

/// The causes of an elastic reset, in the order of their metric children.
inline constexpr std::string_view kElasticResetCauses[] = {
    "rank_lost", "host_unreachable", "hosts_added", "hosts_removed",
    "hosts_changed"};

/// Who and where this runtime is; given to every sink before the first
/// event.
struct RuntimeInfo {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int cross_rank = 0, cross_size = 1;
  /// The knob values in force at start.
  KnobSettings knobs;
  /// The MPI library, "Open MPI v4.1.4" (MpiLibraryVersion()); empty when
  /// MPI cannot say. On the Gloo engine, Gloo's version ("Gloo 0.5.0").
  std::string mpi_version;
  /// The engine the runtime runs on.
  EngineKind engine = EngineKind::kMpi;
  /// In an elastic job: the world and this process's resets.
  ElasticInfo elastic;
};

/// One cycle of the background thread (idle cycles included).
struct CycleEvent {
  std::uint64_t cycle = 0;
  /// Seconds on the runtime's monotonic clock.
  double start = 0;
  double seconds = 0;
  /// Of `seconds`: agreeing on ready tensors (cache bits and negotiation).
  double negotiation_seconds = 0;
  /// Tensors run (or failed) this cycle.
  int tensors = 0;
  /// Backend calls made and the bytes they carried.
  int collectives = 0;
  std::int64_t bytes = 0;
  /// Allreduce bytes that went through the fusion buffer, and the fusion
  /// threshold in force (fill ratio = fused_bytes / fusion threshold).
  std::int64_t fused_bytes = 0;
  std::int64_t fusion_threshold = 0;
  int cache_hits = 0;
  int cache_misses = 0;
};

/// One backend call (a fused buffer counts once).
struct CollectiveEvent {
  CollectiveType op = CollectiveType::kAllreduce;
  /// "native", "ring", "hierarchical" for allreduce; "native" or
  /// "hierarchical" for allgather; "native" for broadcast.
  std::string_view algorithm;
  /// "mpi" or "nccl".
  std::string_view backend;
  DataType dtype = DataType::kFloat32;
  std::int64_t bytes = 0;
  int tensors = 0;
  double start = 0;
  double seconds = 0;
  bool ok = true;
};

/// One tensor finished (successfully or not). Times on the runtime's
/// monotonic clock: enqueued by the application, agreed on by all ranks,
/// its collective started and ended.
struct TensorEvent {
  std::string_view name;
  CollectiveType op = CollectiveType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  std::int64_t bytes = 0;
  double enqueued = 0;
  double negotiated = 0;
  double started = 0;
  double finished = 0;
  /// The reduction inside [started, finished]: before it, copying into the
  /// fusion buffer; after it, copying out (with chunked pipelining, the
  /// first chunk's copy-in and the last chunk's copy-out). Equal to
  /// started / finished when nothing was copied.
  double collective_started = 0;
  double collective_finished = 0;
  /// The fused buffer it travelled in had this many tensors (1 = alone).
  int fused_with = 1;
  StatusCode status = StatusCode::kOk;
};

/// Every rank applied new knob values at the same cycle.
struct KnobsAppliedEvent {
  std::uint64_t version = 0;
  std::uint64_t cycle = 0;
  KnobSettings previous;
  KnobSettings values;
  double time = 0;
};

/// A score the autotuner estimates rather than measures once: the model's
/// posterior mean from every sample of the run, with a 95% interval
/// [low, high] (NaN bounds where none can be given) and how many samples
/// measured the configuration itself. For a gain, f(frozen) /
/// f(initial) - 1 likewise (0.05: 5% faster), `samples` 0. `mean` NaN:
/// no estimate (e.g. the initial configuration of a job confirmed from the
/// store was never measured).
struct ScoreEstimate {
  double mean = 0;
  double low = 0;
  double high = 0;
  int samples = 0;
};

/// Rank 0's autotuner scored a sample.
struct AutotuneSampleEvent {
  /// 1-based over the run, warm-up samples included.
  int index = 0;
  AutotunePhase phase = AutotunePhase::kWarmup;
  KnobSettings values;
  /// Bytes reduced per second (median of the sample's steps).
  double score = 0;
  double best_score = 0;
  double time = 0;
  /// What the sample cost: its steps, the seconds they took, and the 95%
  /// confidence half-width of `score` as a fraction of it (NaN for one
  /// step).
  int steps = 0;
  double seconds = 0;
  double precision = 0;
};

/// The autotuner changed phase (rank 0).
struct PhaseChangeEvent {
  AutotunePhase from = AutotunePhase::kOff;
  AutotunePhase to = AutotunePhase::kOff;
  /// Samples scored in exploration so far.
  int samples = 0;
  /// Entering kFrozen: the configuration frozen on and its score, beside
  /// the initial one. Entering kRetuning: the degraded score and the frozen
  /// reference.
  KnobSettings values;
  double score = 0;
  double reference_score = 0;
  /// Entering kFrozen: how long exploring took so far (seconds of scored
  /// steps) and the training time it lost against the initial score
  /// (AutotuneStatus::exploration_loss_seconds).
  double exploration_seconds = 0;
  double exploration_loss_seconds = 0;
  /// Entering kFrozen: `score` is `estimate.mean`, the model's estimate of
  /// the frozen configuration; `reference` that of the initial one (its
  /// mean is `reference_score` after exploring); `gain` the estimated gain.
  /// `kept_initial`: no change beat the initial configuration beyond noise,
  /// so it was kept. After a confirmation of a stored best, `estimate` is
  /// the confirmation's and `reference`, `gain` have NaN means.
  ScoreEstimate estimate;
  ScoreEstimate reference;
  ScoreEstimate gain;
  bool kept_initial = false;
  /// Ending a confirmation of a stored best (entering kFrozen, or kExploring
  /// when it failed): how far it moved from the stored score (relative:
  /// -0.2 is 20% below), and the largest move in that direction taken for
  /// noise (0.3: a 30% fall, for a fall), from the stored and the new
  /// samples' spread together and at least HVDTUNE_AUTOTUNE_RETUNE_DROP.
  /// `confirmed_store` says a confirmation ended here.
  bool confirmed_store = false;
  double confirm_moved = 0;
  double confirm_tolerance = 0;
  double time = 0;
};

struct ErrorEvent {
  enum class Kind {
    /// Ranks disagree on a tensor (shape, dtype, op, root, ...).
    kMismatch,
    /// A backend call failed.
    kBackend,
    /// Negotiation itself failed; the runtime stops.
    kNegotiation,
    /// The autotuner failed and was switched off.
    kAutotune,
    /// A sink failed and was detached.
    kSink,
    /// Tensors failed after waiting past the stall shutdown time.
    kStallShutdown,
  };
  Kind kind = Kind::kBackend;
  /// Empty when no tensor is concerned.
  std::string tensor;
  std::string message;
  double time = 0;
};
/// "mismatch", "backend", "negotiation", "autotune", "sink",
/// "stall_shutdown".
std::string_view ErrorKindName(ErrorEvent::Kind kind);

/// Rank 0: a tensor some ranks submitted and others did not, for longer
/// than HOROVOD_STALL_CHECK_TIME_SECONDS. Any rank, with an empty `tensor`
/// and no missing ranks: the negotiation itself waited that long for ranks
/// that stopped calling into hvdtune (stopped, hung or dead processes);
/// published when the wait ends, warned on stderr as it happens.
struct StallEvent {
  std::string tensor;
  /// Ranks that have not submitted it.
  std::vector<int> missing_ranks;
  double waited_seconds = 0;
  /// It is failed now (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS passed).
  bool shutdown = false;
  double time = 0;
};

/// Rank 0: the configuration store looked up this job's fingerprint (once,
/// after the first step, when autotuning with a store).
struct StoreLookupEvent {
  enum class Result {
    /// The exact fingerprint has a best configuration.
    kHit,
    /// Nothing for this job, but similar jobs' samples serve as priors.
    kNear,
    /// Nothing usable: tuning starts fresh.
    kMiss,
    /// The store could not be read (corrupt, locked, newer schema, ...).
    kError,
  };
  Result result = Result::kMiss;
  std::string fingerprint;
  double time = 0;
};
std::string_view StoreLookupResultName(StoreLookupEvent::Result r);

/// The kinds of event, for EventSink::interests().
enum class EventKind : unsigned {
  kCycle,
  kCollective,
  kTensor,
  kKnobsApplied,
  kAutotuneSample,
  kPhaseChange,
  kError,
  kStall,
  kStoreLookup,
  kCount,
};
using EventMask = unsigned;
constexpr EventMask EventBit(EventKind k) {
  return 1u << static_cast<unsigned>(k);
}
inline constexpr EventMask kAllEvents =
    (1u << static_cast<unsigned>(EventKind::kCount)) - 1;

/// Receives the event stream. Every method has an empty default, so a sink
/// overrides what it needs.
class EventSink {
 public:
  virtual ~EventSink() = default;
  /// The kinds this sink wants, read once when it is attached. Events no
  /// sink wants are never built (a sink that only logs stalls costs the
  /// per-tensor path nothing).
  virtual EventMask interests() const { return kAllEvents; }
  /// Once, before the cycle thread starts.
  virtual void OnStart(const RuntimeInfo& info) { (void)info; }
  virtual void OnCycle(const CycleEvent& e) { (void)e; }
  virtual void OnCollective(const CollectiveEvent& e) { (void)e; }
  virtual void OnTensor(const TensorEvent& e) { (void)e; }
  virtual void OnKnobsApplied(const KnobsAppliedEvent& e) { (void)e; }
  virtual void OnAutotuneSample(const AutotuneSampleEvent& e) { (void)e; }
  virtual void OnPhaseChange(const PhaseChangeEvent& e) { (void)e; }
  virtual void OnError(const ErrorEvent& e) { (void)e; }
  virtual void OnStall(const StallEvent& e) { (void)e; }
  virtual void OnStoreLookup(const StoreLookupEvent& e) { (void)e; }
  /// Once, after the cycle thread stopped (flush files here).
  virtual void OnStop() {}
};

}  // namespace hvdtune
