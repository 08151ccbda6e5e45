// The state behind AutotunePolicy: what the caller's thread and the
// optimizer's worker share, and the lifecycle steps both sides run
// (autotune_policy_state.cc). The public API is autotune_policy.cc.
#pragma once

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hvdtune/tuner/autotune_policy.h"

namespace hvdtune::tuner {
namespace internal {

// Events kept for a caller that does not take them; beyond this the oldest
// are dropped (and counted) rather than growing without bound.
constexpr std::size_t kMaxQueuedEvents = 10000;

/// t(0.975, dof), the two-sided 95% Student t quantile (dof >= 1).
double StudentT975(int dof);

/// The median of `v` (not empty).
double Median(std::vector<double> v);

/// ln(1 / (1 - retune_drop)): the smallest lasting change, in log score,
/// that re-tunes or fails a confirmation.
inline double RetuneDropLog(double retune_drop) {
  return std::log(1.0 / (1.0 - retune_drop));
}

// The drift detector of the frozen phase: two one-sided CUSUMs, of drops
// and of rises in log score, in units of the frozen samples' own spread.
// Frozen samples that only make the reference, before any test.
constexpr std::size_t kDriftBaseline = 5;
// The reference is the last this many samples outside an alarm.
constexpr std::size_t kDriftWindow = 64;
// The slow tail counts in the spread from this many reference samples on.
constexpr std::size_t kTailMinSamples = 10;
// A sample that moved z spreads from the reference's median adds
// (min(z, clip) - slack) / (clip - slack) to the CUSUM of its direction,
// with slack = max(kDriftSlack, ln(1 / (1 - retune_drop)) / spread) and
// clip = max(kDriftClip, slack + 1). The slack is the larger of one spread
// and retune_drop: a lasting change smaller than either never re-tunes,
// however long it lasts (a neighbour's steady load, a slow decline), and
// one of clip spreads or more counts 1 a sample. No single sample (a step
// that waited on something else) weighs more than that.
constexpr double kDriftClip = 4.0;
constexpr double kDriftSlack = 1.0;
// Re-tune once a CUSUM exceeds retune_windows - 1: a lasting change of clip
// spreads or more is detected at its `retune_windows`-th sample.
inline double DriftThreshold(int retune_windows) {
  return static_cast<double>(retune_windows - 1);
}
struct DriftReference {
  double location = 0;  // median log score
  double scale = 1;     // sd of the log scores below the median, floored
};
// The reference of `logs` (not empty): their median, and as the scale the
// largest of 1.4826 x their median absolute deviation widened by 1 + 2 / n,
// sqrt(2) x the root mean square of their distances below the median
// likewise widened (a slow tail of dips; from kTailMinSamples samples on),
// and ln(1 / (1 - retune_drop)) / 3.
DriftReference DriftReferenceOf(const std::vector<double>& logs,
                                double retune_drop);
// What a sample `z` spreads beyond the reference adds to a CUSUM (may be
// negative), for a reference of that scale.
double DriftIncrement(double z, const DriftReference& ref, double retune_drop);
struct DriftCusum {
  double drop = 0;  // evidence of a lasting fall
  double rise = 0;  // evidence of a lasting rise
  bool Quiet() const { return drop == 0 && rise == 0; }
};
// The CUSUMs after one more sample.
DriftCusum DriftStep(DriftCusum cusum, const DriftReference& ref,
                     double retune_drop, double log_score);
// A store confirmation: whether `confirmed`, the median of the
// confirmation samples `confirm_logs` (their log scores) of a stored
// configuration, says the conditions are those it was stored under. The
// stored reference is the median of the stored run's own log scores of it
// (`stored_logs`, when there are kConfirmMinSamples or more, or any and
// `stored_score` is not positive), else `stored_score` (the stored
// estimate). The test allows for the noise of
// both sides: the confirmation may move the larger of
// ln(1 / (1 - retune_drop)) and kConfirmSpreads x sqrt(stored^2 + new^2)
// from the reference, where `stored` is the standard error of the stored
// reference (the spread of its samples over sqrt(their number), or 0 for
// a bare score) and `new` the spread of one confirmation: the larger of
// the stored samples' spread (DriftReferenceOf) and that of the
// confirmation samples (a median of a few samples taken back to back
// varies from run to run as much as one sample does). `both_sides`: a
// confirmation far above the reference fails too.
constexpr std::size_t kConfirmMinSamples = 3;
constexpr double kConfirmSpreads = 3.0;
struct Confirmation {
  bool confirmed = false;
  // How far the confirmation moved from the reference, relative (-0.2: 20%
  // below), and the largest move in that direction the test took for
  // noise (relative, >= 0: 0.3 is a fall of 30% for a fall).
  double moved = 0;
  double tolerance = 0;
  // The confirmation's log standard deviation (for its interval).
  double log_sd = 0;
};
Confirmation Confirm(const std::vector<double>& stored_logs,
                     double stored_score,
                     const std::vector<double>& confirm_logs,
                     double retune_drop, bool both_sides);

}  // namespace internal

struct AutotunePolicy::State {
  // Work handed to the optimizer (the worker thread, or OnStep itself when
  // synchronous). Everything it needs is copied in: the worker reads no
  // other mutable state.
  struct Job {
    enum class Kind {
      kStart,    // new optimizer, priors, then `config` with `score`
      kObserve,  // `config` scored `score` in the current round
      kRetune,   // new optimizer seeded with `seed`, incumbent first
    };
    Kind kind = Kind::kObserve;
    Config config;
    double score = 0;
    double time = 0;
    std::uint64_t seed = 0;
    int round_samples = 0;  // samples of this round, this one included
    int budget = 0;         // samples the round may take
    // kRetune: the frozen samples' median score before the change (the
    // scale that the old observations are carried over by).
    double reference = 0;
    // The samples' own noise so far: the median over this run's samples of
    // the standard error of a sample's median log score (0: not measured).
    double noise = 0;
    // kStart: stored conditions' configurations tried before `config`,
    // with their confirmation scores (observed after the priors).
    std::vector<PriorSample> tried;
  };
  struct Result {
    enum class Kind { kSuggest, kFreeze, kError };
    Kind kind = Kind::kSuggest;
    Config config;
    double score = 0;
    double time = 0;
    std::string message;
    // kFreeze: the model's estimates (PolicyEvent::estimate, initial, gain).
    Estimate estimate, initial, gain;
    bool kept_initial = false;
  };

  State(SearchSpace s, PolicyStart st, AutotunePolicySettings se)
      : space(std::move(s)), start(std::move(st)), settings(se) {}

  // --- immutable after construction ---
  const SearchSpace space;
  const PolicyStart start;
  const AutotunePolicySettings settings;

  // --- worker-only (or OnStep when synchronous) ---
  std::unique_ptr<BayesianOptimizer> optimizer;
  // Observations before this index came from other runs (priors): the
  // model learns from them, but the policy freezes only on something it
  // measured itself, on this run's scale.
  std::size_t own_begin = 0;

  // --- shared, guarded by `mu` ---
  mutable std::mutex mu;
  std::condition_variable work_cv;  // a job was queued, or stop
  std::condition_variable idle_cv;  // the worker finished a job
  std::optional<Job> job;
  bool busy = false;
  bool stop = false;

  Phase phase = Phase::kWarmup;
  bool confirming = false;  // warm-up scores `start.known_best`
  // Confirming stored conditions (PolicyStart::conditions, two or more):
  // the one in force, and those that did not confirm, with their scores.
  bool walking_conditions = false;
  std::size_t condition = 0;
  std::vector<PriorSample> tried;
  bool never_retune = false;
  int warmup_left = 0;
  std::vector<double> confirm_scores;
  internal::Confirmation last_confirmation;
  std::vector<double> step_scores;
  double step_seconds = 0;  // of the steps in `step_scores`
  bool skip_next_step = false;
  std::optional<Config> pending;
  Config current;  // in force, or handed out and about to be
  int round_samples = 0;
  int frozen_windows = 0;
  // The drift detector (FinishSample, kFrozen): log scores of the frozen
  // samples that showed no drop (the reference), and the one-sided CUSUM
  // of their standardised drops.
  std::vector<double> frozen_logs;
  // The standard error of each exploring and warm-up sample's median log
  // score, from its own steps' spread (Job::noise is their median).
  std::vector<double> sample_log_se;
  double MeasuredNoise() const;
  std::vector<double> drift_pending;  // the current excursion's samples
  internal::DriftCusum drift_cusum;
  // The cost of tuning (PolicyStatus::exploration_*): their scores' sum.
  double exploration_score_sum = 0;
  int exploration_scored = 0;
  PolicyStatus status;
  std::deque<PolicyEvent> events;

  std::thread worker;

  /// Queues an event with the fields every event has (dropping the oldest
  /// when the queue is full) and returns it for the rest.
  PolicyEvent& Emit(PolicyEvent::Kind kind, Phase from, Phase to,
                    const Config& config, double score, double time) {
    if (events.size() >= internal::kMaxQueuedEvents) {
      events.pop_front();
      ++status.dropped_events;
    }
    PolicyEvent& e = events.emplace_back();
    e.kind = kind;
    e.previous_phase = from;
    e.phase = to;
    e.config = config;
    e.score = score;
    e.time = time;
    return e;
  }
  PolicyEvent& SetPhase(Phase to, const Config& config, double score,
                        double time) {
    const Phase from = phase;
    phase = to;
    status.phase = to;
    return Emit(PolicyEvent::Kind::kPhaseChange, from, to, config, score, time);
  }
  void Fail(const std::string& message, double time) {
    Emit(PolicyEvent::Kind::kError, phase, Phase::kOff, current, 0, time)
        .message = message;
    status.error = message;
    pending.reset();
    SetPhase(Phase::kOff, current, status.last_score, time);
  }
  void EnterFrozen() {
    frozen_windows = 0;
    frozen_logs.clear();
    drift_pending.clear();
    drift_cusum = {};
  }

  int RoundBudget() const {
    return phase == Phase::kRetuning ? std::max(4, settings.max_samples / 2)
                                     : settings.max_samples;
  }

  // Caller's side, under `mu`: books a finished sample; returns the
  // optimizer work it calls for, if any.
  // A finished sample: its score (the median of its steps) and what it
  // cost.
  struct SampleCost {
    int steps = 0;
    double seconds = 0;
    double precision = 0;
  };
  /// Adds a sample of the phase in force to the cost of tuning.
  void Account(double score, double seconds);
  std::optional<Job> FinishSample(double score, double now,
                                  const SampleCost& cost);
  // The optimizer work; no locking, no shared state but the optimizer.
  Result Run(const Job& job);
  // Caller's or worker's side, under `mu`: applies what the optimizer said.
  void Publish(const Result& result);
  void WorkerLoop();

  // Samples at the end of a round of `budget` spent refining (0: none).
  int ExploitTail(int budget) const {
    const int tail =
        static_cast<int>(std::lround(settings.exploit_share * budget));
    return tail > 0 && tail < budget ? tail : 0;
  }
  // `begin`: observations before the round's first (priors); `budget`:
  // the round's samples, that first one included.
  BayesOptSettings OptimizerSettings(std::uint64_t seed, std::size_t begin,
                                     int budget) const {
    BayesOptSettings bo = settings.optimizer;
    bo.seed = seed;
    const int tail = ExploitTail(budget);
    if (tail > 0) {
      bo.exploit_from = static_cast<int>(begin) + budget - tail;
    }
    bo.gp.noise_floor = std::pow(settings.gaussian_process_noise / 10, 2);
    return bo;
  }
  // The confirmation test of the stored configuration in force
  // (internal::Confirm against its stored condition or best).
  internal::Confirmation ConfirmCurrent(
      const std::vector<double>& confirm_logs) const;
  Result Decide(const Job& job);
};

}  // namespace hvdtune::tuner
