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

 private:
  struct Impl;
  Scenario scenario_;
  Preset preset_;
  Workload workload_;
  std::shared_ptr<const Impl> impl_;
};

inline constexpr int kCheckpoints[] = {10, 20, 40};

/// Incumbent configuration after 10, 20 and 40 samples of one seed.
using Incumbents = std::vector<tuner::Config>;
Incumbents RunHvdtune(const Problem& p, std::uint64_t seed);
Incumbents RunRandom(const Problem& p, std::uint64_t seed);
Incumbents RunHorovodStyle(const Problem& p, std::uint64_t seed);
Incumbents RunDefault(const Problem& p, std::uint64_t seed);
const std::vector<std::string>& OptimizerNames();
Incumbents RunOptimizer(const std::string& name, const Problem& p,
                        std::uint64_t seed);

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
