#include "hvdtune/tuner/bayes_optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "hvdtune/tuner/initial_design.h"

namespace hvdtune::tuner {
BayesianOptimizer::BayesianOptimizer(SearchSpace space,
                                     BayesOptSettings settings)
    : space_(std::move(space)),
      settings_(settings),
      rng_(settings.seed),
      last_acquisition_(std::numeric_limits<double>::quiet_NaN()),
      gp_(space_.num_continuous(), space_.CategoryCounts(), settings.gp) {
  if (space_.size() == 0) {
    throw std::invalid_argument("BayesianOptimizer: empty search space");
  }
  if (settings_.initial_design_size < 0 || settings_.max_evaluations < 0 ||
      settings_.stop_patience < 1 || !(settings_.refit_growth >= 0) ||
      settings_.category_probe_period < 0 ||
      !(settings_.category_probe_share >= 0) ||
      !(settings_.gp.noise_floor > 0)) {
    throw std::invalid_argument("BayesianOptimizer: invalid settings");
  }
}

int BayesianOptimizer::InitialDesignSize() const {
  if (settings_.initial_design_size > 0) return settings_.initial_design_size;
  return std::max(4, space_.num_free() + 1);
}

void BayesianOptimizer::SeedDesign(const std::vector<Config>& configs) {
  for (const Config& c : configs) design_queue_.push_back(space_.MakeValid(c));
}

Config BayesianOptimizer::RandomConfig() {
  return space_.FromUnit(UniformRandom(1, space_.num_continuous(),
                                       space_.CategoryCounts(), rng_)[0]);
}

Config BayesianOptimizer::Suggest() {
  if (!design_generated_) {
    design_generated_ = true;
    const int missing =
        InitialDesignSize() -
        static_cast<int>(observations_.size() + design_queue_.size());
    if (missing > 0 && space_.num_free() > 0) {
      const auto points = settings_.latin_hypercube
                              ? LatinHypercube(missing, space_.num_continuous(),
                                               space_.CategoryCounts(), rng_)
                              : UniformRandom(missing, space_.num_continuous(),
                                              space_.CategoryCounts(), rng_);
      for (const auto& u : points) design_queue_.push_back(space_.FromUnit(u));
    }
  }
  if (!design_queue_.empty()) {
    Config next = design_queue_.front();
    design_queue_.pop_front();
    return next;
  }
  if (space_.num_free() == 0) return space_.Center();
  if (observations_.size() < 2) return RandomConfig();

  SyncModel(&rng_);
  // Incumbent and anchors by posterior mean, robust to noisy lucky samples.
  const int n = model_points_;
  std::vector<std::pair<double, int>> ranked(n);
  for (int i = 0; i < n; ++i) {
    double mean, var;
    gp_.PredictStandardized(gp_.inputs().col(i), &mean, &var);
    ranked[i] = {mean, i};
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  std::vector<Eigen::VectorXd> anchors;
  for (int i = 0; i < std::min(n, settings_.num_anchors); ++i) {
    anchors.push_back(gp_.inputs().col(ranked[i].second));
  }
  // A category probe improves on the best of its own category, so it
  // searches within that category rather than only for its uncertainty.
  const bool exploit =
      settings_.exploit_from > 0 &&
      static_cast<int>(observations_.size()) >= settings_.exploit_from;
  const std::vector<int> held =
      exploit ? std::vector<int>{} : CategoryToProbe();
  double incumbent = ranked[0].first;
  if (!held.empty()) {
    const int num_cont = space_.num_continuous();
    for (const auto& [mean, i] : ranked) {
      bool match = true;
      for (std::size_t c = 0; c < held.size(); ++c) {
        match &= held[c] < 0 || gp_.inputs()(num_cont + c, i) == held[c];
      }
      if (match) {
        incumbent = mean;
        break;
      }
    }
  }
  AcquisitionSettings acquisition = settings_.acquisition;
  acquisition.xi += NoiseMargin(acquisition, gp_.noise_variance());
  if (exploit) {
    acquisition.kind = AcquisitionKind::kUpperConfidenceBound;
    acquisition.ucb_beta = settings_.exploit_ucb_beta;
  }
  const AcquisitionMaximum best =
      MaximizeAcquisition(gp_, acquisition, incumbent, space_.CategoryCounts(),
                          anchors, settings_.acquisition_optimizer, rng_, held);
  last_acquisition_ = best.value;

  if (settings_.stop_ei_threshold > 0) {
    double ei = best.value;
    if (acquisition.kind == AcquisitionKind::kLogExpectedImprovement) {
      ei = std::exp(best.value);
    } else if (acquisition.kind == AcquisitionKind::kUpperConfidenceBound) {
      ei = std::numeric_limits<double>::infinity();  // UCB has no EI to test
    }
    low_ei_rounds_ = ei < settings_.stop_ei_threshold ? low_ei_rounds_ + 1 : 0;
  }
  return space_.FromUnit(best.x);
}

std::vector<int> BayesianOptimizer::CategoryToProbe() const {
  const int period = settings_.category_probe_period;
  // Model-guided suggestions so far; the first probe comes after `period`
  // + 1 of them, so the model has seen the leading category's shape.
  const int guided =
      static_cast<int>(observations_.size()) - InitialDesignSize();
  if (period <= 0 || guided <= period || (guided - period - 1) % period != 0) {
    return {};
  }
  const std::vector<int> counts = space_.CategoryCounts();
  const std::vector<std::size_t>& index = space_.categorical_indices();
  // The least-observed (dimension, value) below its share of the most
  // observed value of the same dimension; ties go to the first in order.
  int fewest = std::numeric_limits<int>::max();
  std::vector<int> held;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    std::vector<int> seen(counts[c], 0);
    for (const Observation& o : observations_) {
      ++seen[static_cast<int>(o.config[index[c]])];
    }
    const int most = *std::max_element(seen.begin(), seen.end());
    for (int level = 0; level < counts[c]; ++level) {
      if (seen[level] < settings_.category_probe_share * most &&
          seen[level] < fewest) {
        fewest = seen[level];
        held.assign(counts.size(), -1);
        held[c] = level;
      }
    }
  }
  return held;
}

void BayesianOptimizer::Observe(const Config& config, double score) {
  if (!std::isfinite(score)) {
    throw std::invalid_argument(
        "BayesianOptimizer::Observe: score is not finite");
  }
  observations_.push_back({space_.MakeValid(config), score});
}

Eigen::MatrixXd BayesianOptimizer::UnitMatrix(int count) const {
  Eigen::MatrixXd x(space_.num_free(), count);
  for (int i = 0; i < count; ++i)
    x.col(i) = space_.ToUnit(observations_[i].config);
  return x;
}

void BayesianOptimizer::SetRelativeNoiseFloor(double relative_sd) {
  if (!(relative_sd >= 0) || !std::isfinite(relative_sd)) {
    throw std::invalid_argument("relative noise floor must be finite and >= 0");
  }
  settings_.gp.relative_noise_floor = relative_sd;
}

bool BayesianOptimizer::RefitDue() const {
  const int n = static_cast<int>(observations_.size());
  if (n <= last_fit_points_) return false;
  if (last_fit_points_ == 0 || n <= settings_.refit_every_until) return true;
  const double growth = std::max(1.0, std::floor(settings_.refit_growth * n));
  return n - last_fit_points_ >= growth;
}

void BayesianOptimizer::SyncModel(std::mt19937_64* rng) const {
  const int n = static_cast<int>(observations_.size());
  if (rng != nullptr && RefitDue()) {
    Eigen::VectorXd y(n);
    for (int i = 0; i < n; ++i) y[i] = observations_[i].score;
    gp_.set_relative_noise_floor(settings_.gp.relative_noise_floor);
    gp_.SetData(UnitMatrix(n), y);
    gp_.FitHyperparameters(*rng);
    last_fit_points_ = n;
    model_points_ = n;
    return;
  }
  if (last_fit_points_ == 0) return;  // no model yet
  for (; model_points_ < n; ++model_points_) {
    gp_.AddPoint(space_.ToUnit(observations_[model_points_].config),
                 observations_[model_points_].score);
  }
}

std::optional<Observation> BayesianOptimizer::Best() const {
  if (observations_.empty()) return std::nullopt;
  SyncModel(nullptr);
  int best = 0;
  if (last_fit_points_ == 0) {
    for (std::size_t i = 1; i < observations_.size(); ++i) {
      if (observations_[i].score > observations_[best].score)
        best = static_cast<int>(i);
    }
    return observations_[best];
  }
  double best_mean = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < model_points_; ++i) {
    double mean, var;
    gp_.PredictStandardized(gp_.inputs().col(i), &mean, &var);
    if (mean > best_mean) {
      best_mean = mean;
      best = i;
    }
  }
  return observations_[best];
}

bool BayesianOptimizer::ShouldStop() const {
  if (settings_.max_evaluations > 0 &&
      static_cast<int>(observations_.size()) >= settings_.max_evaluations) {
    return true;
  }
  return settings_.stop_ei_threshold > 0 &&
         low_ei_rounds_ >= settings_.stop_patience;
}

}  // namespace hvdtune::tuner
