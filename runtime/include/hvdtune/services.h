// What a Runtime is built from besides its configuration: event sinks, the
// autotuner (rank 0) and a source of known configurations for warm starts.
// The runtime core sees them only through these interfaces.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hvdtune/config.h"
#include "hvdtune/events.h"
#include "hvdtune/knobs.h"

namespace hvdtune {

/// What the online autotuner (HOROVOD_AUTOTUNE=1) is doing; rank 0 tunes,
/// other ranks report kOff.
struct AutotuneStatus {
  AutotunePhase phase = AutotunePhase::kOff;
  /// Scored exploration samples so far (the initial configuration's counts
  /// as one).
  int samples = 0;
  /// Bytes reduced per second under the initial knobs (last warm-up sample).
  double default_score = 0;
  /// The best configuration's score: once frozen, the model's estimate of
  /// it (`best_estimate`), never a single sample.
  double best_score = 0;
  KnobSettings best;
  /// Names of the knobs tuned jointly.
  std::vector<std::string> tuned_knobs;
  /// Where the starting point came from: "fresh", "store" (a known best
  /// confirmed) or "transfer" (prior samples of similar jobs).
  std::string source = "fresh";
  /// The job's fingerprint in the config store ("hardware-model" hashes);
  /// empty without a store.
  std::string fingerprint;
  /// The cost of tuning, in seconds of scored steps, against
  /// `default_score`: how long exploring (and re-tuning) took, the training
  /// time it lost (the sum of seconds x (1 - score / default_score)), and
  /// its samples' mean score; how long the job has been frozen and the time
  /// the frozen configuration won back (seconds x (score / default_score -
  /// 1)); the frozen seconds until that covered the loss (-1: not yet).
  double exploration_seconds = 0;
  double exploration_loss_seconds = 0;
  double exploration_mean_score = 0;
  double frozen_seconds = 0;
  double frozen_gain_seconds = 0;
  double payback_seconds = -1;
  /// Once frozen: the model's estimates (PhaseChangeEvent::estimate,
  /// reference, gain, kept_initial) of the frozen configuration, of the
  /// initial one and of the gain; `best_score` is `best_estimate.mean`.
  ScoreEstimate best_estimate;
  ScoreEstimate default_estimate;
  ScoreEstimate gain;
  bool kept_initial = false;
};

/// One tensor of a training step, as the autotuner saw it (the model's
/// shape for fingerprints).
struct StepTensor {
  DataType dtype = DataType::kFloat32;
  std::int64_t bytes = 0;
};

/// Known configurations for a job (a store, a file, a test).
class ConfigSource {
 public:
  virtual ~ConfigSource() = default;

  struct Sample {
    KnobSettings values;
    double score = 0;
  };
  struct WarmStart {
    /// Scored configurations of this or similar jobs: prior observations.
    std::vector<Sample> priors;
    /// The best configuration known for exactly this job; confirmed over a
    /// few samples instead of exploring.
    std::optional<Sample> best;
    /// The conditions earlier runs of exactly this job froze under (a
    /// configuration and its frozen scores there, oldest first), newest
    /// first with `best`'s first. With two or more, the confirmation tells
    /// them apart (tuner::PolicyStart::conditions).
    struct Condition {
      KnobSettings values;
      std::vector<double> scores;
    };
    std::vector<Condition> conditions;
    /// Apply `best` without scoring or tuning at all.
    bool freeze = false;
    /// "store" or "transfer", for AutotuneStatus::source.
    std::string source = "fresh";
    /// For AutotuneStatus::fingerprint.
    std::string fingerprint;
    /// How the lookup went, published as a StoreLookupEvent; none for a
    /// source that is not a store.
    std::optional<StoreLookupEvent::Result> lookup;
  };
  /// Rank 0, once, when the first training step was measured. Must not
  /// throw for ordinary failures (return an empty WarmStart and warn).
  virtual WarmStart Lookup(const RuntimeInfo& info,
                           const std::vector<StepTensor>& step) = 0;
};

/// What rank 0's autotuner is made from.
struct TuningContext {
  RuntimeInfo info;
  /// Initial knob values and which ones the user pinned.
  KnobConfig knobs;
  AutotuneSettings settings;
  bool tune_num_groups = false;
  /// Rank 0 may raise a thread's priority (the cycle thread's boost is
  /// tuned on more than one node only then).
  bool priority_raisable = false;
  /// May be null.
  std::shared_ptr<ConfigSource> config_source;
};

/// Rank 0's online autotuner as the cycle loop sees it: an event sink (it
/// meters completed tensors) that now and then asks for new knob values.
class Autotuner : public EventSink {
 public:
  /// Application threads: a training step ended at `now` (runtime clock).
  virtual void MarkStep(double now) = 0;

  struct Output {
    std::optional<KnobSettings> update;
    std::vector<AutotuneSampleEvent> samples;
    std::vector<PhaseChangeEvent> phase_changes;
    std::vector<ErrorEvent> errors;
    std::vector<StoreLookupEvent> store_lookups;
  };
  /// Cycle thread, once per cycle after the cycle's events: knob values to
  /// put in force (validated by the runtime) and events to publish. Must be
  /// cheap: the optimizer runs on a thread of the autotuner's own.
  virtual Output Poll(double now) = 0;
  /// Any thread.
  virtual AutotuneStatus status() const = 0;
};

struct Services {
  /// Attached on every rank, in this order.
  std::vector<std::shared_ptr<EventSink>> sinks;
  /// Makes the autotuner; called on rank 0 only. Empty: no autotuning.
  std::function<std::unique_ptr<Autotuner>(const TuningContext&)>
      make_autotuner;
  std::shared_ptr<ConfigSource> config_source;
  /// Makes a timeline sink writing `path` (the timeline module); empty:
  /// no timeline (HOROVOD_TIMELINE and StartTimeline are refused).
  std::function<std::shared_ptr<EventSink>(const std::string& path,
                                           bool mark_cycles)>
      make_timeline;
  /// How a collective stuck inside the backend looks while it lasts (the
  /// data-phase watchdog, when stall handling is on). Called from the
  /// watchdog's thread, not the cycle thread, about every 0.25 s:
  /// `waited_seconds` is how long the collective now executing has been
  /// inside MPI or NCCL (0: none is executing); `unreachable_ranks` how
  /// many ranks did not answer when this rank last asked during that wait
  /// (0: not asked, or all answered). Must be thread-safe and quick.
  std::function<void(double waited_seconds, int unreachable_ranks)>
      report_backend_wait;
};

/// The wiring any application gets from the environment: the GP autotuner
/// when HOROVOD_AUTOTUNE=1, its CSV log (HOROVOD_AUTOTUNE_LOG) and the
/// stderr log.
Services DefaultServices(const RuntimeConfig& config);

/// The GP autotuner (tuner/) behind the Autotuner interface.
std::unique_ptr<Autotuner> MakeGpAutotuner(const TuningContext& context);

}  // namespace hvdtune
