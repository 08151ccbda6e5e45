// The online autotune lifecycle, generic over the tuner's configuration
// type: warm-up -> exploring -> frozen -> (re-tuning -> frozen)*, driven by
// measured steps. Knows nothing of the runtime: a configuration is a point
// of a SearchSpace and a score is any number to maximise (bytes per second).
//
// The optimizer never runs on the caller's thread when `asynchronous` is
// set: a finished sample is handed to a worker thread that observes it and
// computes the next suggestion, while the caller keeps running (and
// measuring nothing) under the configuration in force. The caller polls
// TakeConfig() once per cycle.
//
// One sample is the median of its step scores (bytes per second): at least
// `steps_per_sample` steps, then, with `sample_precision` > 0, more steps
// until the score is precise enough or a cap is reached
// (AutotunePolicySettings::sample_precision). Samples are numbered 1, 2, 3 ...
// over the whole run, and each emits a kSample event with its step count and
// seconds. The lifecycle:
//  - warm-up: `warmup_samples` samples under the initial configuration (0
//    behaves as 1: the initial configuration's score is needed); the last
//    one is the initial score.
//  - exploring: a BayesianOptimizer (seed `seed`) observes the priors, in
//    the order given, then the initial configuration with its score (that
//    observation counts as the round's first sample, as in Horovod); each
//    following sample observes the suggested configuration. After
//    `max_samples` samples, or when the optimizer says ShouldStop(), the
//    policy freezes on the incumbent, always a configuration measured in
//    this run: the one with the highest posterior mean (with no priors and
//    `freeze_confidence` 0, exactly BayesianOptimizer::Best()), kept to the
//    round's initial configuration where the model cannot tell them apart:
//    each knob that differs from it goes back to its initial value unless
//    the change is more than `freeze_confidence` posterior standard
//    deviations of the difference ahead. The last `exploit_share` of a round's
//    samples refine the best region; the first of them measures that candidate
//    if no sample has (if it moved since, the freeze takes the measured
//    configuration nearest to it), and while it differs from the measured
//    configuration with the highest posterior mean, the rest measure the two
//    in turn, the less measured first, so that repeated samples of both
//    settle a difference smaller than one sample's noise. The choice then
//    replaces the round's initial configuration only if the model puts it
//    more than `keep_initial_confidence` standard deviations of the
//    difference ahead, or its own samples are clearly ahead of the initial
//    ones; else the round freezes on the initial configuration
//    (kept_initial). The freeze event carries the model's estimates of the
//    frozen and the initial configuration and of the gain, with 95%
//    intervals (Estimate); its score is the frozen estimate, never a
//    single sample. Priors
//    shape the model but are never frozen on unmeasured, since their scores
//    may be on another scale. The frozen configuration is handed out by
//    TakeConfig() like any other.
//  - frozen: the first 5 frozen samples make a reference (median and robust
//    spread of the log scores, the spread at least ln(1/(1 - retune_drop))
//    / 3); every later sample's drop below it, in spreads, feeds a one-sided
//    CUSUM whose alarm re-opens tuning: a drop of 4 spreads or more is
//    detected at its `retune_windows`-th sample (autotune_policy_state.h).
//  - re-tuning: a fresh optimizer (seed `seed` + exploration samples so
//    far) observes the configuration in force with the score that triggered
//    the re-tune, then explores for max(4, max_samples / 2) samples (the
//    incumbent counts as the first) and freezes again.
// Every phase change emits kPhaseChange; the first event, at construction,
// is the change from kOff to the starting phase (time 0).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hvdtune/tuner/bayes_optimizer.h"
#include "hvdtune/tuner/search_space.h"

namespace hvdtune::tuner {

enum class Phase { kOff, kWarmup, kExploring, kFrozen, kRetuning };
/// "off", "warmup", "exploring", "frozen", "retuning".
const char* PhaseName(Phase phase);

/// BayesOptSettings' defaults, but with the GP's noise prior centred on a
/// noisy objective (log noise variance ~ N(-3, 3) in standardised units
/// instead of N(-9, 3)): steps measured on a running job are noisy, and a
/// model that explains that noise as signal freezes on lucky samples.
inline BayesOptSettings DefaultPolicyOptimizerSettings() {
  BayesOptSettings s;
  s.gp.log_noise_prior_mean = -3.0;
  return s;
}

struct AutotunePolicySettings {
  /// Samples scored under the initial configuration before exploring; the
  /// last one is the initial configuration's score.
  int warmup_samples = 3;
  /// Steps per sample (the least, with `sample_precision` > 0); a sample's
  /// score is the median of its steps' scores.
  int steps_per_sample = 10;
  /// Noise-adaptive sample length: after `steps_per_sample` steps a sample
  /// takes more until the 95% confidence half-width of its median log step
  /// score is at most ln(1 + this) (the spread of the steps' log scores
  /// taken as 1.4826 x their median absolute deviation, so that a rare slow
  /// step does not widen it), or until a cap below is reached. 0: every
  /// sample is exactly `steps_per_sample` steps.
  double sample_precision = 0.1;
  /// Caps of an adaptive sample: past `steps_per_sample` steps it closes
  /// once its steps took this many seconds (0: no time cap) or once it has
  /// this many steps (0: 10 x `steps_per_sample`), whichever comes first,
  /// however imprecise. (A sample needs 2 steps for a spread: with
  /// `steps_per_sample` 1 an adaptive sample takes at least 2 unless a cap
  /// says otherwise.)
  double max_sample_seconds = 3.0;
  int max_steps_per_sample = 0;
  /// With `sample_precision` > 0: a sample that watches rather than
  /// explores (frozen, or confirming a known best) lasts at least this many
  /// seconds, whatever the caps, so that a drop shorter than about half of
  /// it (a neighbour's burst of load) cannot move its median; a change that
  /// lasts moves every step. 0: such samples are sized like the others.
  double watch_sample_seconds = 0;
  /// Samples of one exploration round (re-tuning rounds: half, at least 4).
  int max_samples = 20;
  /// Horovod's HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE; the GP noise floor
  /// is (noise / 10)^2.
  double gaussian_process_noise = 0.8;
  /// The smallest relative drop worth re-tuning for: the frozen phase's
  /// spread is taken as at least a third of it (0: never re-tune).
  double retune_drop = 0.15;
  /// Samples after which a lasting drop of 4 spreads re-opens tuning.
  int retune_windows = 3;
  /// What a round freezes on may differ from the configuration in force
  /// when the round began only where the model puts the change more than
  /// this many posterior standard deviations of the difference ahead (knob
  /// by knob, the two configurations' covariance counted); 0 takes the
  /// highest posterior mean.
  double freeze_confidence = 0.75;
  /// The round's choice replaces the configuration in force when it began
  /// only if the model puts it more than max(this, `freeze_confidence`)
  /// posterior standard deviations of the difference ahead (or its own
  /// samples are clearly ahead of the initial ones: a t test at 95%);
  /// otherwise the round keeps the initial configuration and says so
  /// (PolicyEvent::kept_initial). Larger keeps the initial configuration
  /// more often where knobs matter little, at the price of small real
  /// gains left unused (docs/benchmarks.md has both sides measured).
  double keep_initial_confidence = 1.3;
  /// Share of a round's budget, at its end, spent refining the best region
  /// (BayesOptSettings::exploit_from) instead of exploring; 0: none.
  double exploit_share = 0.25;
  std::uint64_t seed = 1;
  /// Run Observe()/Suggest() on a worker thread (the runtime); false runs
  /// them inside OnStep() (deterministic unit tests). Either way the same
  /// steps give the same configurations, provided the caller, when
  /// asynchronous, waits (WaitIdle()) before reporting the next step.
  bool asynchronous = true;
  /// Settings of every optimizer the policy builds, except `seed`,
  /// `gp.noise_floor` and `exploit_from`, which come from the fields above;
  /// by default BayesOptSettings' own with a noise prior for measured steps
  /// (DefaultPolicyOptimizerSettings()). The optimizer
  /// checks them when exploration starts: a bad one turns the policy off
  /// with a kError event. `stop_ei_threshold` > 0 lets a round end before
  /// its budget (ShouldStop()); `max_evaluations` counts priors too.
  BayesOptSettings optimizer = DefaultPolicyOptimizerSettings();
};

/// A centre and a spread of `values` that a rare outlier (a step three
/// times slower) does not move: their median, and 1.4826 x their median
/// absolute deviation from it (the standard deviation, for normal noise).
struct RobustSpread {
  double median = 0;
  double spread = 0;
};
/// The RobustSpread of `values` (not empty).
RobustSpread RobustSpreadOf(const std::vector<double>& values);

/// The 95% confidence half-width, in log units, of the median of the log
/// step scores `logs`: t(0.975, n - 1) x 1.2533 x 1.4826 x MAD / sqrt(n)
/// (the median's standard error under normal noise). Infinite for fewer
/// than 2 steps.
double MedianLogHalfWidth(const std::vector<double>& logs);

/// Whether an adaptive sample of `steps` steps (at least
/// `s.steps_per_sample`) that took `seconds` and whose median has the
/// half-width `half_width` (MedianLogHalfWidth) may close: with
/// `s.sample_precision` 0 always; else once the half-width is within
/// ln(1 + sample_precision) or a cap is reached (max_steps_per_sample, or
/// 10 x steps_per_sample; max_sample_seconds).
bool SampleMayClose(const AutotunePolicySettings& s, long long steps,
                    double seconds, double half_width);

/// A score as the policy estimates it, never a single sample: for a
/// configuration, the model's posterior mean of its score given every
/// sample of the run (its own and its neighbours', all measured the same
/// way) with a 95% credible interval [low, high] and the samples that
/// measured it; for a gain, f(frozen) / f(initial) - 1 likewise (the two
/// configurations' posterior covariance counted), `samples` 0. A bound
/// that cannot be known (one sample and no model) is NaN.
struct Estimate {
  double mean = 0;
  double low = 0;
  double high = 0;
  int samples = 0;
  /// Whether both bounds are finite.
  bool has_interval() const;
};

/// A scored configuration known before this run (from a store).
struct PriorSample {
  Config config;
  double score = 0;
};

/// A condition an earlier run froze under (a link speed, a load): the
/// configuration it froze on and that configuration's frozen scores there,
/// oldest first.
struct KnownCondition {
  Config config;
  std::vector<double> scores;
};

/// How the policy starts.
struct PolicyStart {
  /// The configuration in force at start.
  Config initial;
  /// Observations fed to the optimizer before exploring (transfer from
  /// similar runs). Scores from other runs may be on another scale; they
  /// still shape the model.
  std::vector<PriorSample> priors;
  /// A configuration known to be best for this job: it is applied at once
  /// (TakeConfig() returns it right after construction) and scored over
  /// `confirm_samples` samples instead of the warm-up; their median is the
  /// confirmation score (reported as the initial score: the initial
  /// configuration is not measured). The samples carry phase kWarmup. The
  /// confirmation test counts the noise of both sides: the stored
  /// reference is the median of the priors' samples of `known_best` where
  /// there are 3 or more, else `known_best_score` (the stored estimate),
  /// and the confirmation may fall below it by the larger of retune_drop
  /// and 3 standard deviations of the difference (the reference's standard
  /// error and one confirmation's spread, the larger of the stored
  /// samples' and the confirmation samples' own). If it holds, the policy
  /// freezes on it with zero exploration samples; otherwise it explores
  /// with the priors, then `known_best` with the confirmation score (the
  /// round's first sample), as observations. Either way the phase change
  /// says how far the confirmation moved and what the test allowed
  /// (PolicyEvent::confirm_moved, confirm_tolerance).
  std::optional<Config> known_best;
  double known_best_score = 0;
  int confirm_samples = 2;
  /// Apply `known_best` and freeze without scoring anything (best score:
  /// `known_best_score`). Frozen samples are still scored and reported,
  /// but this mode never re-tunes: the configuration was chosen for it.
  bool freeze_on_known_best = false;
  /// The conditions earlier runs froze under, newest (the stored best's)
  /// first. With two or more (and not `freeze_on_known_best`) they replace
  /// `known_best`'s confirmation: the policy applies the first one's
  /// configuration and scores it over `confirm_samples` samples; the
  /// condition is confirmed if their median lies within the larger of
  /// ln(1 / (1 - retune_drop)) and 3 standard deviations of the difference
  /// (as for `known_best`, the condition's scores as the stored samples) of
  /// the median of the condition's log scores, in either direction: a score far
  /// above the stored ones says the conditions differ as much as one far below.
  /// If it is not, the next condition's configuration is applied and confirmed
  /// against its own scores, and so on. The first that confirms is frozen on
  /// with zero exploration samples (every confirmation sample carries phase
  /// kWarmup). If none does, the policy explores with the priors, then every
  /// configuration tried with its confirmation score (the stored best's
  /// first), as observations; each counts as one of the round's samples,
  /// and the first one's confirmation score is the initial score. With
  /// fewer than two the confirmation is `known_best`'s, as above. Each needs
  /// a positive finite score; configurations are clamped into the space.
  std::vector<KnownCondition> conditions;
};

/// Something the policy did, oldest first (for logs, metrics, the store).
struct PolicyEvent {
  enum class Kind { kSample, kPhaseChange, kError };
  Kind kind = Kind::kSample;
  /// kSample: 1-based index over the whole run (warm-up samples included),
  /// so numbers never skip.
  int index = 0;
  /// The phase the sample was taken in / the new phase.
  Phase phase = Phase::kWarmup;
  Phase previous_phase = Phase::kWarmup;
  /// kSample: the configuration scored; kPhaseChange to kFrozen: the
  /// configuration frozen on.
  Config config;
  double score = 0;
  /// kPhaseChange to kRetuning: the frozen samples' median score, which
  /// `score` (the sample that decided) fell or rose from.
  double reference = 0;
  /// kPhaseChange to kFrozen after exploring: `score` is `estimate.mean`,
  /// the model's estimate of the frozen configuration; `initial` that of
  /// the round's initial configuration (the one in force when it began);
  /// `gain` the estimated gain of the one over the other. `kept_initial`:
  /// nothing beat the initial configuration beyond noise, so the round
  /// froze on it. After a confirmation: `estimate` is the confirmation
  /// samples' (their median, with the interval their spread and the stored
  /// spread give); `initial` and `gain` have NaN means.
  Estimate estimate;
  Estimate initial;
  Estimate gain;
  bool kept_initial = false;
  /// kPhaseChange ending a confirmation of a stored best (to kFrozen, or to
  /// kExploring when it failed): `confirmation` is set, with how far the
  /// last configuration confirmed moved from its stored score, relative
  /// (-0.2: 20% below), and the largest move in that direction the test
  /// took for noise (relative, >= 0: 0.3 allows a fall of 30% for a fall).
  bool confirmation = false;
  double confirm_moved = 0;
  double confirm_tolerance = 0;
  /// kPhaseChange to kFrozen that ends a confirmation of a stored best:
  /// which of `conditions` (1-based, in PolicyStart::conditions' order)
  /// was confirmed, of how many (1 of 1 for `known_best` alone); 0 for
  /// any other freeze.
  int condition = 0;
  int conditions = 0;
  /// `now` of the step that finished the sample / caused the change.
  double time = 0;
  /// kSample: the steps scored, the seconds they took (their sum), and the
  /// 95% confidence half-width of the score as a relative figure (NaN for
  /// a sample of one step).
  int steps = 0;
  double seconds = 0;
  double precision = 0;
  /// kError: what failed (the policy is off afterwards: a kPhaseChange to
  /// kOff follows, and no more configurations come).
  std::string message;
};

struct PolicyStatus {
  Phase phase = Phase::kOff;
  /// Samples scored in exploration and re-tuning (the initial
  /// configuration's counts as one), as Horovod counts them.
  int exploration_samples = 0;
  /// All samples scored, warm-up and frozen ones included.
  int total_samples = 0;
  /// The initial configuration's warm-up score (the confirmation score for
  /// a job from the store): what the cost of tuning below is counted
  /// against. The model's estimate of it is `initial_estimate`.
  double initial_score = 0;
  /// The frozen configuration's estimate (`best_estimate.mean`) once
  /// frozen; before, the best sample so far.
  double best_score = 0;
  double last_score = 0;
  Config best;
  /// As in the last kFrozen event (PolicyEvent::estimate, initial, gain,
  /// kept_initial); zeros before the first freeze.
  Estimate best_estimate;
  Estimate initial_estimate;
  Estimate gain;
  bool kept_initial = false;
  int retunes = 0;
  /// What tuning cost and what it won, in seconds of scored steps, against
  /// the initial configuration's score (the confirmation score for a job
  /// from the store). Exploration: the samples scored while exploring or
  /// re-tuning, how long their steps took, and the sum over them of
  /// seconds x (1 - score / initial score): the training time lost to
  /// trying configurations (negative where they were faster on the whole).
  double exploration_seconds = 0;
  double exploration_loss_seconds = 0;
  /// The mean score of those samples (0: none).
  double exploration_mean_score = 0;
  /// Frozen samples likewise, and the sum of seconds x (score / initial
  /// score - 1): the time the frozen configuration won back.
  double frozen_seconds = 0;
  double frozen_gain_seconds = 0;
  /// Frozen seconds until the gain covered the loss; -1 while it has not
  /// (0 when nothing was lost).
  double payback_seconds = -1;
  /// The message of the kError event that turned the policy off.
  std::string error;
  /// Events dropped because the caller did not take them (the oldest go
  /// first beyond 10000 queued).
  int dropped_events = 0;
};

class AutotunePolicy {
 public:
  /// An empty space (every knob pinned) freezes at once on the initial
  /// configuration and never re-tunes. Throws std::invalid_argument on bad
  /// settings or a start outside the space (`initial` and `known_best` must
  /// be valid points; priors need the right size and finite values and are
  /// clamped into the space, as other runs may have had other bounds).
  AutotunePolicy(SearchSpace space, PolicyStart start,
                 AutotunePolicySettings settings);
  /// Joins the worker thread (an unfinished suggestion is abandoned once the
  /// optimizer call in progress returns).
  ~AutotunePolicy();
  AutotunePolicy(const AutotunePolicy&) = delete;
  AutotunePolicy& operator=(const AutotunePolicy&) = delete;

  /// One completed step under the configuration in force: `bytes` reduced
  /// in `seconds`, ending at `now`. Cheap when asynchronous. Steps that end
  /// while a suggestion is being computed or waits to be taken, and the
  /// first step after a new configuration was taken (it straddles the
  /// switch), are not scored; nor is a step whose bytes / seconds is not a
  /// finite positive number. Never throws: a failure becomes a kError event.
  void OnStep(double bytes, double seconds, double now);

  /// The next configuration to put in force, once; the caller applies it
  /// before the next step it reports.
  std::optional<Config> TakeConfig();

  /// Events since the last call.
  std::vector<PolicyEvent> TakeEvents();

  PolicyStatus status() const;
  const SearchSpace& space() const;

  /// True while the worker computes a suggestion (steps are ignored).
  bool computing() const;

  /// Blocks until no suggestion is being computed (tests, shutdown).
  void WaitIdle();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hvdtune::tuner
