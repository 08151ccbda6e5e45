// Tuner at scale: optimizers tuning the simulated cluster, simple regret
// over seeds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hvdtune/tuner/autotune_policy.h"
#include "hvdtune/tuner/search_space.h"
#include "sim_model.h"

namespace hvdtune::sim {

struct Scenario {
  std::string name;
  std::string preset;
  Cluster cluster;
  std::string workload;
  double noise = 0.05;  // standard deviation of the step time's factor
};

/// The built-in scenarios (world 8 to 4,096 x preset x workload).
std::vector<Scenario> DefaultScenarios();

/// A scenario made ready to run: the workload, the search space the
/// runtime would tune (KnobSpace over the knob table, nothing pinned), the
/// default configuration and the noiseless optimum.
class Problem {
 public:
  Problem(const Scenario& s, const std::string& shapes_dir);
  const Scenario& scenario() const { return scenario_; }
  const tuner::SearchSpace& space() const;
  tuner::Config default_config() const;
  /// Noiseless score (gradient bytes per second) of a configuration.
  double Score(const tuner::Config& c) const;
  KnobSettings Knobs(const tuner::Config& c) const;
  const Workload& workload() const { return workload_; }
  const Preset& preset() const { return preset_; }
  /// Grid over every categorical combination, refined by coordinate search.
  tuner::Config SearchOptimum() const;
  /// Fraction of uniformly random configurations within `within` of `best`.
  double GoodFraction(double best, double within, int samples) const;
  /// Model options of hvdtune's GP for this problem's runs (names of
  /// ModelOptionNames(); empty: the runtime's model).
  void set_model_options(std::vector<std::string> options);
  const std::vector<std::string>& model_options() const {
    return model_options_;
  }
  /// Steps one sample of every optimizer takes at least (1: one step):
  /// a baseline's sample is the median of their scores, hvdtune's the
  /// policy's own (AutotunePolicySettings::steps_per_sample).
  void set_steps_per_sample(int steps);
  int steps_per_sample() const { return steps_per_sample_; }
  /// With `precision` > 0 a sample takes more steps, as the runtime's
  /// (AutotunePolicySettings::sample_precision, with the runtime's default
  /// caps: 10 x steps_per_sample steps or 3 simulated seconds), until the
  /// 95% half-width of its median log score is at most ln(1 + precision);
  /// every optimizer's samples the same way. 0: fixed-length samples.
  void set_sample_precision(double precision);
  double sample_precision() const { return sample_precision_; }

 private:
  struct Impl;
  Scenario scenario_;
  Preset preset_;
  Workload workload_;
  std::shared_ptr<const Impl> impl_;
  std::vector<std::string> model_options_;
  int steps_per_sample_ = 1;
  double sample_precision_ = 0;
};

/// The GP model options a run may turn on (GpSettings): "effects"
/// (category_effects), "scales" (category_scales), "log" (log_outputs).
const std::vector<std::string>& ModelOptionNames();
/// Turns the named options on in `gp`; throws std::invalid_argument naming
/// an unknown one.
void ApplyModelOptions(const std::vector<std::string>& options,
                       tuner::GpSettings* gp);

inline constexpr int kCheckpoints[] = {10, 20, 40};

/// The budget whose run the cost of tuning is reported for (the "@20"
/// column).
inline constexpr int kCostBudget = 20;

/// One sample an hvdtune run scored while exploring (the samples
/// PolicyStatus's exploration figures add up: not the warm-up sample of
/// the initial configuration, which the policy counts as the round's first).
struct ExploredSample {
  tuner::Config config;
  /// As the policy measured it: the noisy score and the seconds its steps
  /// took.
  double score = 0;
  double seconds = 0;
  int steps = 0;
  /// Noiseless: the configuration's score and its steps' seconds.
  double true_score = 0;
  double true_seconds = 0;
};

/// What one hvdtune run explored before it froze.
struct Exploration {
  std::vector<ExploredSample> samples;
  /// The policy's status at the freeze.
  tuner::PolicyStatus status;
  /// Noiseless scores of the default and of the frozen configuration.
  double default_score = 0;
  double frozen_score = 0;
};

/// The cost of tuning of one run on the noiseless surface, `best` = f*.
struct TuningCost {
  /// Mean over the exploration samples of (f* - f(sample)) / f*.
  double explore_cost = 0;
  /// f(frozen) / f(default).
  double gain = 1;
  /// Sum over the exploration samples of seconds x (1 - f(sample) /
  /// f(default)): training time lost against the default.
  double loss_seconds = 0;
  /// Seconds of training under the frozen configuration that win the loss
  /// back: loss / (gain - 1); 0 when nothing was lost, +inf ("never") when
  /// the frozen configuration is no faster than the default.
  double payback_seconds = 0;
};
TuningCost CostOf(const Exploration& e, double best);

/// Incumbent configuration after 10, 20 and 40 samples of one seed.
using Incumbents = std::vector<tuner::Config>;
/// `at_cost_budget`, if given, receives what the kCostBudget run explored.
Incumbents RunHvdtune(const Problem& p, std::uint64_t seed,
                      Exploration* at_cost_budget = nullptr);
Incumbents RunRandom(const Problem& p, std::uint64_t seed);
Incumbents RunHorovodStyle(const Problem& p, std::uint64_t seed);
Incumbents RunDefault(const Problem& p, std::uint64_t seed);
const std::vector<std::string>& OptimizerNames();
/// `exploration`: filled for "hvdtune" (RunHvdtune), left alone otherwise.
Incumbents RunOptimizer(const std::string& name, const Problem& p,
                        std::uint64_t seed, Exploration* exploration = nullptr);

/// Transfer, as the config store does it for a job with a similar
/// fingerprint: one autotuned run of `source` (`budget` samples, the
/// runtime's AutotunePolicy) and the samples it scored, to be handed to
/// another job as prior observations.
std::vector<tuner::PriorSample> SourceSamples(const Problem& source,
                                              std::uint64_t seed, int budget);
/// One autotuned run of `target` with `priors` (none: a fresh start): the
/// 1-based index of the first sample (warm-up included) whose noiseless
/// score reaches `goal`, or 0 if none did before the policy froze.
int SamplesToReach(const Problem& target, std::uint64_t seed, int budget,
                   const std::vector<tuner::PriorSample>& priors, double goal);

}  // namespace hvdtune::sim
