#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hvdtune/tuner/acquisition.h"
#include "hvdtune/tuner/acquisition_optimizer.h"
#include "hvdtune/tuner/gaussian_process.h"
#include "hvdtune/tuner/search_space.h"

namespace hvdtune::tuner {

/// One evaluated configuration. Scores are maximised (e.g. throughput).
struct Observation {
  Config config;
  double score = 0;
};

/// Everything that shapes the optimizer's behaviour. All of it is part of
/// the serialised state.
struct BayesOptSettings {
  /// Seeds the only random source (std::mt19937_64); same seed, same
  /// observations => same suggestions.
  std::uint64_t seed = 0;
  /// Size of the initial space-filling design (seeded points count towards
  /// it); 0 means max(4, free dimensions + 1).
  int initial_design_size = 0;
  /// Initial design: maximin Latin hypercube (true) or uniform random.
  bool latin_hypercube = true;
  /// Stop after this many observations (0: no budget).
  int max_evaluations = 0;
  /// Stop once expected improvement, relative to the score spread, stays
  /// below this for `stop_patience` consecutive suggestions (0: never).
  double stop_ei_threshold = 0.0;
  int stop_patience = 3;
  /// Hyperparameters are refitted on every observation up to this many
  /// observations, then whenever the data grew by `refit_growth` (fraction)
  /// since the last fit; in between, points enter by Cholesky update.
  int refit_every_until = 20;
  double refit_growth = 0.1;
  /// How many of the best observed points anchor local acquisition search.
  int num_anchors = 3;
  /// Category probes. A few unlucky design points can make a whole value
  /// of a categorical knob look poor, and log EI then never returns to it;
  /// the shared kernel cannot tell that a knob matters only for one value.
  /// So once `category_probe_period` + 1 model-guided suggestions have been
  /// made, every `category_probe_period`-th one goes to the least-observed
  /// categorical value whose observation count is below
  /// `category_probe_share` times that of its dimension's most-observed
  /// value: the acquisition is maximised with that value held, against the
  /// best posterior mean within it. At most one suggestion in
  /// `category_probe_period` is spent this way; 0 disables.
  int category_probe_period = 3;
  double category_probe_share = 0.5;
  /// From this many observations on (0: never), suggestions maximise the
  /// upper confidence bound mean + sqrt(exploit_ucb_beta) sd, with no
  /// category probes: the last samples of a known budget refine the best
  /// region rather than explore (the autotune policy sets it per round).
  int exploit_from = 0;
  double exploit_ucb_beta = 1.0;
  AcquisitionSettings acquisition;
  AcquisitionOptimizerSettings acquisition_optimizer;
  GpSettings gp;
};

/// Push-style Bayesian optimizer over a SearchSpace: ask with Suggest(),
/// report with Observe(), read the incumbent with Best(). Pure and
/// deterministic: no clock, no I/O, no global state; not thread-safe.
///
/// \code
///   SearchSpace space({Dimension::Continuous("fusion_bytes", 1 << 20,
///                                            256 << 20, /*log_scale=*/true),
///                      Dimension::Categorical("algorithm", 3)});
///   BayesianOptimizer opt(space, {.seed = 7, .max_evaluations = 40});
///   while (!opt.ShouldStop()) {
///     Config c = opt.Suggest();
///     opt.Observe(c, MeasureThroughput(c));
///   }
///   Config best = opt.Best()->config;
/// \endcode
class BayesianOptimizer {
 public:
  /// Throws std::invalid_argument on an empty space or bad settings.
  explicit BayesianOptimizer(SearchSpace space, BayesOptSettings settings = {});

  /// Queues configurations (defaults, warm starts from a store) to be
  /// suggested first, ahead of the space-filling design. Made valid.
  void SeedDesign(const std::vector<Config>& configs);

  /// Next configuration to evaluate: seeded points, then the initial
  /// design, then the acquisition maximiser (now and then within an
  /// under-sampled category value, see category_probe_period). Always valid for
  /// the space (bounds, integer rounding, pinned values).
  Config Suggest();

  /// Records the score of a configuration (need not have been suggested:
  /// prior observations can be fed here). Throws std::invalid_argument on a
  /// wrong-sized or non-finite configuration or a non-finite score.
  void Observe(const Config& config, double score);

  /// One observation's measured relative noise (GpSettings::
  /// relative_noise_floor); the model uses it from its next refit on (the
  /// state keeps both the value of the last refit and this one).
  void SetRelativeNoiseFloor(double relative_sd);

  /// The incumbent: among observed configurations, the one with the highest
  /// posterior mean (the observed score before a model exists). Its
  /// `score` is the observed one. Empty before any observation.
  std::optional<Observation> Best() const;

  /// True when the evaluation budget is spent or expected improvement stayed
  /// below the threshold for the configured number of rounds.
  bool ShouldStop() const;

  /// Acquisition value of the last model-based suggestion (log EI in
  /// standardised units for log EI), NaN before the first one.
  double last_acquisition_value() const { return last_acquisition_; }

  const std::vector<Observation>& observations() const { return observations_; }
  const SearchSpace& space() const { return space_; }
  const BayesOptSettings& settings() const { return settings_; }
  /// The surrogate as of the last Suggest()/Best() call.
  const GaussianProcess& model() const { return gp_; }

  /// Complete state (space, settings, observations, queued design, RNG state,
  /// fitted hyperparameters) as JSON. A restored optimizer makes the same
  /// next suggestion as this one.
  std::string ToJson() const;
  /// Inverse of ToJson(); throws std::invalid_argument on malformed state.
  static BayesianOptimizer FromJson(const std::string& json);
  /// ToJson() as bytes, for blob storage.
  std::vector<std::uint8_t> Serialize() const;
  static BayesianOptimizer Deserialize(const std::vector<std::uint8_t>& bytes);

 private:
  int InitialDesignSize() const;
  bool RefitDue() const;
  // Brings the model up to date with the observations: a hyperparameter
  // refit (drawing restarts from `rng`) when `rng` is given and one is due,
  // Cholesky updates otherwise.
  void SyncModel(std::mt19937_64* rng) const;
  Eigen::MatrixXd UnitMatrix(int count) const;
  Config RandomConfig();
  // Categorical coordinate values to hold for the next suggestion (-1: free),
  // or empty when this suggestion is not a category probe.
  std::vector<int> CategoryToProbe() const;

  SearchSpace space_;
  BayesOptSettings settings_;
  std::mt19937_64 rng_;
  std::vector<Observation> observations_;
  std::deque<Config> design_queue_;
  bool design_generated_ = false;
  int low_ei_rounds_ = 0;
  double last_acquisition_;

  // The model is a cache of (observations, hyperparameters fitted at
  // last_fit_points_): rebuilt identically on restore.
  mutable GaussianProcess gp_;
  mutable int model_points_ = 0;
  mutable int last_fit_points_ = 0;
};

}  // namespace hvdtune::tuner
