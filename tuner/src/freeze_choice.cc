#include "freeze_choice.h"

#include <cmath>
#include <limits>
#include <optional>

namespace hvdtune::tuner::internal {

Observation ChooseFrozen(const BayesianOptimizer& optimizer,
                         std::size_t own_begin, double confidence) {
  optimizer.Best();  // brings the model up to date with every observation
  const std::vector<Observation>& obs = optimizer.observations();
  const GaussianProcess& model = optimizer.model();
  const SearchSpace& space = optimizer.space();
  std::size_t pick = own_begin;
  if (model.num_points() != static_cast<int>(obs.size())) {
    for (std::size_t i = own_begin + 1; i < obs.size(); ++i) {
      if (obs[i].score > obs[pick].score) pick = i;
    }
    return obs[pick];
  }
  struct Posterior {
    double mean, var;
  };
  auto posterior = [&](const Config& c) {
    Posterior p{};
    model.PredictStandardized(space.ToUnit(c), &p.mean, &p.var);
    return p;
  };
  double best_mean = -std::numeric_limits<double>::infinity();
  for (std::size_t i = own_begin; i < obs.size(); ++i) {
    const double mean = posterior(obs[i].config).mean;
    if (mean > best_mean) {
      best_mean = mean;
      pick = i;
    }
  }
  // A change from the configuration in force has to earn its place: with
  // noisy samples, a knob that does not matter (or matters less than the
  // noise) otherwise lands on whichever value a lucky sample had. Knob by
  // knob, in the space's order.
  auto clearly_ahead = [&](const Config& a, const Config& b) {
    const Posterior pa = posterior(a), pb = posterior(b);
    return pa.mean - pb.mean > confidence * std::sqrt(pa.var + pb.var);
  };
  const Config& initial = obs[own_begin].config;
  Config chosen = obs[pick].config;
  for (std::size_t d = 0; d < space.size(); ++d) {
    if (chosen[d] == initial[d]) continue;
    Config reverted = chosen;
    reverted[d] = initial[d];
    if (!clearly_ahead(chosen, reverted)) chosen = std::move(reverted);
  }
  for (std::size_t i = own_begin; i < obs.size(); ++i) {
    if (obs[i].config == chosen) return obs[i];
  }
  double mean, var;
  model.Predict(space.ToUnit(chosen), &mean, &var);
  return {chosen, mean};
}

}  // namespace hvdtune::tuner::internal
