// Online autotuning on rank 0: turns measured step throughput into knob
// decisions with the Bayesian optimizer, through warm-up, exploration,
// freezing and re-tuning. Pure: no MPI, no clock of its own, no I/O except
// the optional CSV log.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hvdtune/knobs.h"
#include "hvdtune/runtime.h"

namespace hvdtune::tuner {
class BayesianOptimizer;
class SearchSpace;
}  // namespace hvdtune::tuner

namespace hvdtune::internal {

/// HOROVOD_AUTOTUNE_* settings (Horovod's names and defaults) plus ours.
struct AutotuneSettings {
  bool enabled = false;       // HOROVOD_AUTOTUNE
  std::string log_path;       // HOROVOD_AUTOTUNE_LOG
  int warmup_samples = 3;     // HOROVOD_AUTOTUNE_WARMUP_SAMPLES
  int steps_per_sample = 10;  // HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE
  int max_samples = 20;       // HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES
  double gaussian_process_noise =
      0.8;  // HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE
  /// HVDTUNE_AUTOTUNE_RETUNE_DROP: relative score drop after freezing that
  /// counts as degraded (0 disables re-tuning).
  double retune_drop = 0.15;
  /// HVDTUNE_AUTOTUNE_RETUNE_WINDOWS: consecutive degraded samples that
  /// re-open tuning.
  int retune_windows = 3;
  /// HVDTUNE_AUTOTUNE_SEED: the optimizer's seed.
  std::uint64_t seed = 1;
};

/// Parses the settings above; throws ConfigError naming a bad variable.
AutotuneSettings ParseAutotuneSettings(const EnvLookup& env);

/// Which knobs the tuner may change, beyond the table's tunable flag.
struct TuningScope {
  std::array<bool, kNumKnobs> pinned{};
  /// The layout has more than one node (hierarchical allgather matters).
  bool multi_node = false;
  /// The application splits its gradients into knob num_groups groups.
  bool tune_num_groups = false;
};

class ParameterManager {
 public:
  ParameterManager(const AutotuneSettings& settings, const TuningScope& scope,
                   const KnobSettings& initial);
  ~ParameterManager();

  /// Feeds one completed step measured under the knobs in force. Returns
  /// knob values to switch to, if the manager decided on new ones.
  std::optional<KnobSettings> OnStep(double bytes, double seconds, double now);

  AutotuneStatus status() const;
  /// The knobs tuned jointly (names), for logs and tests.
  std::vector<std::string> tuned_knobs() const;

 private:
  struct Sample;
  std::optional<KnobSettings> FinishSample(double score, double now);
  std::optional<KnobSettings> StartExploring(double now);
  std::optional<KnobSettings> Freeze(double now);
  KnobSettings FromConfig(const std::vector<double>& config) const;
  std::vector<double> ToConfig(const KnobSettings& k) const;
  void Log(double score, double now);

  AutotuneSettings settings_;
  TuningScope scope_;
  KnobSettings initial_;
  KnobSettings current_;
  /// Knob ids behind each dimension of the search space.
  std::vector<KnobId> dims_;
  std::unique_ptr<tuner::SearchSpace> space_;
  std::unique_ptr<tuner::BayesianOptimizer> optimizer_;

  AutotunePhase phase_ = AutotunePhase::kWarmup;
  int warmup_left_ = 0;
  bool skip_next_step_ = false;
  std::vector<double> step_scores_;
  int samples_ = 0;        // scored samples in exploration (all rounds)
  int round_samples_ = 0;  // in the current exploration round
  double default_score_ = 0;
  double best_score_ = 0;
  KnobSettings best_;
  double frozen_reference_ = 0;
  int degraded_windows_ = 0;
  int frozen_windows_ = 0;
  std::ofstream log_;
  double start_time_ = -1;
};

}  // namespace hvdtune::internal
