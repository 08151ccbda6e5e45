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

struct AutotunePolicySettings {
  /// Samples scored under the initial configuration before exploring; the
  /// last one is the initial configuration's score.
  int warmup_samples = 3;
  /// Steps per sample; a sample's score is the median of its steps' scores.
  int steps_per_sample = 10;
  /// Samples of one exploration round (re-tuning rounds: half, at least 4).
  int max_samples = 20;
  /// Horovod's HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE; the GP noise floor
  /// is (noise / 10)^2.
  double gaussian_process_noise = 0.8;
  /// Relative score drop after freezing that counts as degraded (0: never
  /// re-tune).
  double retune_drop = 0.15;
  /// Consecutive degraded samples that re-open tuning.
  int retune_windows = 3;
  std::uint64_t seed = 1;
  /// Run Observe()/Suggest() on a worker thread (the runtime); false runs
  /// them inside OnStep() (deterministic unit tests).
  bool asynchronous = true;
};

/// A scored configuration known before this run (from a store).
struct PriorSample {
  Config config;
  double score = 0;
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
  /// and scored over `confirm_samples` samples instead of exploring. If its
  /// score is at least (1 - retune_drop) x `known_best_score`, the policy
  /// freezes on it with zero exploration samples; otherwise it explores
  /// with the priors (and the confirmation) as prior observations.
  std::optional<Config> known_best;
  double known_best_score = 0;
  int confirm_samples = 2;
  /// Apply `known_best` and freeze without scoring anything.
  bool freeze_on_known_best = false;
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
  /// `now` of the step that finished the sample / caused the change.
  double time = 0;
  /// kError: what failed (the policy is off afterwards).
  std::string message;
};

struct PolicyStatus {
  Phase phase = Phase::kOff;
  /// Samples scored in exploration and re-tuning (the initial
  /// configuration's counts as one), as Horovod counts them.
  int exploration_samples = 0;
  /// All samples scored, warm-up and frozen ones included.
  int total_samples = 0;
  double initial_score = 0;
  double best_score = 0;
  double last_score = 0;
  Config best;
  int retunes = 0;
};

class AutotunePolicy {
 public:
  /// An empty space (every knob pinned) freezes at once. Throws
  /// std::invalid_argument on bad settings or a start outside the space.
  AutotunePolicy(SearchSpace space, PolicyStart start,
                 AutotunePolicySettings settings);
  /// Joins the worker thread (an unfinished suggestion is abandoned).
  ~AutotunePolicy();
  AutotunePolicy(const AutotunePolicy&) = delete;
  AutotunePolicy& operator=(const AutotunePolicy&) = delete;

  /// One completed step under the configuration in force: `bytes` reduced
  /// in `seconds`, ending at `now`. Cheap when asynchronous. Steps that end
  /// while a suggestion is being computed, and the first step after a new
  /// configuration was taken (it straddles the switch), are not scored.
  void OnStep(double bytes, double seconds, double now);

  /// The next configuration to put in force, once; the caller applies it
  /// before the next step it reports.
  std::optional<Config> TakeConfig();

  /// Events since the last call.
  std::vector<PolicyEvent> TakeEvents();

  PolicyStatus status() const;
  const SearchSpace& space() const;

  /// Blocks until no suggestion is being computed (tests, shutdown).
  void WaitIdle();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hvdtune::tuner
