#include "freeze_choice.h"

#include <cmath>
#include <limits>

namespace hvdtune::tuner::internal {
namespace {

// The model is up to date with every observation (Best() syncs it), or
// there is no model yet.
bool HasModel(const BayesianOptimizer& optimizer) {
  optimizer.Best();
  return optimizer.model().num_points() ==
         static_cast<int>(optimizer.observations().size());
}

double MeanAt(const BayesianOptimizer& optimizer, const Config& c) {
  double mean, var;
  optimizer.model().PredictStandardized(optimizer.space().ToUnit(c), &mean,
                                        &var);
  return mean;
}

// Whether the model puts f(a) - f(b) more than `confidence` posterior
// standard deviations of the difference above 0.
bool ClearlyAhead(const BayesianOptimizer& optimizer, const Config& a,
                  const Config& b, double confidence) {
  double mean, var;
  optimizer.model().PredictDifferenceStandardized(
      optimizer.space().ToUnit(a), optimizer.space().ToUnit(b), &mean, &var);
  return mean > confidence * std::sqrt(var);
}

}  // namespace

int TimesMeasured(const BayesianOptimizer& optimizer, std::size_t own_begin,
                  const Config& config) {
  const std::vector<Observation>& obs = optimizer.observations();
  int n = 0;
  for (std::size_t i = own_begin; i < obs.size(); ++i) {
    n += obs[i].config == config;
  }
  return n;
}

bool Measured(const BayesianOptimizer& optimizer, std::size_t own_begin,
              const Config& config) {
  return TimesMeasured(optimizer, own_begin, config) > 0;
}

FreezeContenders FreezeContendersOf(const BayesianOptimizer& optimizer,
                                    std::size_t own_begin, double confidence) {
  const std::vector<Observation>& obs = optimizer.observations();
  std::size_t pick = own_begin;
  if (!HasModel(optimizer)) {
    for (std::size_t i = own_begin + 1; i < obs.size(); ++i) {
      if (obs[i].score > obs[pick].score) pick = i;
    }
    return {obs[pick].config, obs[pick].config};
  }
  double best_mean = -std::numeric_limits<double>::infinity();
  for (std::size_t i = own_begin; i < obs.size(); ++i) {
    const double mean = MeanAt(optimizer, obs[i].config);
    if (mean > best_mean) {
      best_mean = mean;
      pick = i;
    }
  }
  // A change from the configuration in force has to earn its place: with
  // noisy samples, a knob that does not matter (or matters less than the
  // noise) otherwise lands on whichever value a lucky sample had.
  const Config& initial = obs[own_begin].config;
  Config chosen = obs[pick].config;
  for (std::size_t d = 0; d < chosen.size(); ++d) {
    if (chosen[d] == initial[d]) continue;
    Config reverted = chosen;
    reverted[d] = initial[d];
    if (!ClearlyAhead(optimizer, chosen, reverted, confidence)) {
      chosen = std::move(reverted);
    }
  }
  return {obs[pick].config, std::move(chosen)};
}

Observation ChooseFrozen(const BayesianOptimizer& optimizer,
                         std::size_t own_begin, double confidence) {
  const FreezeContenders c =
      FreezeContendersOf(optimizer, own_begin, confidence);
  const Config& target = c.candidate;
  const std::vector<Observation>& obs = optimizer.observations();
  const SearchSpace& space = optimizer.space();
  const bool model = HasModel(optimizer);
  const Eigen::VectorXd u = space.ToUnit(target);
  const int num_cont = space.num_continuous();
  std::size_t pick = own_begin;
  double best_distance = std::numeric_limits<double>::infinity();
  double best_mean = -std::numeric_limits<double>::infinity();
  for (std::size_t i = own_begin; i < obs.size(); ++i) {
    // The nearest stand-in for an unmeasured candidate, but never one the
    // model puts clearly behind the leader: nearness on the knobs' axes
    // says nothing of the score.
    if (model && obs[i].config != c.leader &&
        ClearlyAhead(optimizer, c.leader, obs[i].config, confidence)) {
      continue;
    }
    const Eigen::VectorXd v = space.ToUnit(obs[i].config);
    double distance = 0;
    for (int k = 0; k < v.size(); ++k) {
      distance += k < num_cont ? (v[k] - u[k]) * (v[k] - u[k])
                               : static_cast<double>(v[k] != u[k]);
    }
    const double mean = model ? MeanAt(optimizer, obs[i].config) : 0.0;
    if (distance < best_distance ||
        (distance == best_distance && mean > best_mean)) {
      best_distance = distance;
      best_mean = mean;
      pick = i;
    }
  }
  return obs[pick];
}

}  // namespace hvdtune::tuner::internal
