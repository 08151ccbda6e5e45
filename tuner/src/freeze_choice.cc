#include "freeze_choice.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autotune_policy_state.h"

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

// The two-sided 95% normal quantile.
constexpr double kZ95 = 1.959964;

// This run's log scores of `config`.
std::vector<double> OwnLogs(const BayesianOptimizer& optimizer,
                            std::size_t own_begin, const Config& config) {
  std::vector<double> logs;
  const std::vector<Observation>& obs = optimizer.observations();
  for (std::size_t i = own_begin; i < obs.size(); ++i) {
    if (obs[i].config == config && obs[i].score > 0) {
      logs.push_back(std::log(obs[i].score));
    }
  }
  return logs;
}

double MeanOf(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

double SquaresAbout(const std::vector<double>& v, double mean) {
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return ss;
}

// One sample's noise as the model sees it, in log score (a relative sd):
// its noise variance carried through the output transform at `at` (model
// units).
double LogNoiseSd(const GaussianProcess& gp, double at) {
  const double h = 1e-4;
  const double slope =
      (gp.FromModelUnits(at + h) - gp.FromModelUnits(at - h)) / (2 * h);
  const double raw = gp.FromModelUnits(at);
  if (!(raw > 0)) return 0;
  return std::sqrt(std::max(gp.noise_variance(), 0.0)) * std::fabs(slope) / raw;
}

// The direct estimate of `config`'s log score from its own samples: their
// mean and its standard error with the model's noise (0 samples: NaN).
struct Direct {
  double log_mean = std::numeric_limits<double>::quiet_NaN();
  double log_se = std::numeric_limits<double>::quiet_NaN();
};
Direct DirectOf(const BayesianOptimizer& optimizer, std::size_t own_begin,
                const Config& config, double log_noise_sd) {
  const std::vector<double> logs = OwnLogs(optimizer, own_begin, config);
  Direct d;
  if (logs.empty()) return d;
  d.log_mean = MeanOf(logs);
  d.log_se = log_noise_sd / std::sqrt(static_cast<double>(logs.size()));
  return d;
}

}  // namespace

bool SamplesClearlyAhead(const BayesianOptimizer& optimizer,
                         std::size_t own_begin, const Config& a,
                         const Config& b) {
  const std::vector<double> la = OwnLogs(optimizer, own_begin, a);
  const std::vector<double> lb = OwnLogs(optimizer, own_begin, b);
  if (la.size() < 2 || lb.size() < 2) return false;
  const double ma = MeanOf(la), mb = MeanOf(lb);
  const double dof = static_cast<double>(la.size() + lb.size() - 2);
  const double pooled = (SquaresAbout(la, ma) + SquaresAbout(lb, mb)) / dof;
  const double se = std::sqrt(pooled * (1.0 / static_cast<double>(la.size()) +
                                        1.0 / static_cast<double>(lb.size())));
  return ma - mb > StudentT975(static_cast<int>(dof)) * se;
}

Estimate EstimateOf(const BayesianOptimizer& optimizer, std::size_t own_begin,
                    const Config& config) {
  Estimate e;
  e.samples = TimesMeasured(optimizer, own_begin, config);
  if (!HasModel(optimizer) || optimizer.model().num_points() == 0) {
    const std::vector<double> logs = OwnLogs(optimizer, own_begin, config);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (logs.empty()) return {nan, nan, nan, 0};
    const double m = MeanOf(logs);
    e.mean = std::exp(m);
    e.low = e.high = nan;
    if (logs.size() >= 2) {
      const int df = static_cast<int>(logs.size()) - 1;
      const double se = std::sqrt(SquaresAbout(logs, m) / df /
                                  static_cast<double>(logs.size()));
      e.low = std::exp(m - StudentT975(df) * se);
      e.high = std::exp(m + StudentT975(df) * se);
    }
    return e;
  }
  const GaussianProcess& gp = optimizer.model();
  double mean, var;
  gp.PredictStandardized(optimizer.space().ToUnit(config), &mean, &var);
  const double sd = std::sqrt(std::max(var, 0.0));
  // The output transform is monotone: the interval's ends map to its ends.
  e.mean = gp.FromModelUnits(mean);
  e.low = gp.FromModelUnits(mean - kZ95 * sd);
  e.high = gp.FromModelUnits(mean + kZ95 * sd);
  // The model pulls a configuration towards its neighbours; its own
  // samples alone say something else where that pull is wrong. The
  // interval spans both, so that neither the model's smoothing nor the
  // samples' noise makes it claim more than the data hold.
  const Direct d = DirectOf(optimizer, own_begin, config, LogNoiseSd(gp, mean));
  if (std::isfinite(d.log_se) && d.log_se > 0) {
    e.low = std::min(e.low, std::exp(d.log_mean - kZ95 * d.log_se));
    e.high = std::max(e.high, std::exp(d.log_mean + kZ95 * d.log_se));
  }
  return e;
}

Estimate GainOf(const BayesianOptimizer& optimizer, std::size_t own_begin,
                const Config& a, const Config& b) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (!HasModel(optimizer) || optimizer.model().num_points() == 0) {
    // No model yet (a budget smaller than the initial design): the ratio
    // of the two configurations' own mean log scores, with a t interval
    // where each has 2 samples or more.
    const std::vector<double> la = OwnLogs(optimizer, own_begin, a);
    const std::vector<double> lb = OwnLogs(optimizer, own_begin, b);
    if (la.empty() || lb.empty()) return {nan, nan, nan, 0};
    const double ma = MeanOf(la), mb = MeanOf(lb);
    Estimate g{std::expm1(ma - mb), nan, nan, 0};
    if (la.size() >= 2 && lb.size() >= 2) {
      const int dof = static_cast<int>(la.size() + lb.size()) - 2;
      const double pooled = (SquaresAbout(la, ma) + SquaresAbout(lb, mb)) / dof;
      const double se =
          std::sqrt(pooled * (1.0 / static_cast<double>(la.size()) +
                              1.0 / static_cast<double>(lb.size())));
      g.low = std::expm1(ma - mb - StudentT975(dof) * se);
      g.high = std::expm1(ma - mb + StudentT975(dof) * se);
    }
    return g;
  }
  const GaussianProcess& gp = optimizer.model();
  const SearchSpace& space = optimizer.space();
  double mb, vb, md, vd;
  gp.PredictStandardized(space.ToUnit(b), &mb, &vb);
  gp.PredictDifferenceStandardized(space.ToUnit(a), space.ToUnit(b), &md, &vd);
  // The difference's own uncertainty, which shared data makes much smaller
  // than either point's, carried through the output transform at b's mean.
  const double base = gp.FromModelUnits(mb);
  const double sd = std::sqrt(std::max(vd, 0.0));
  Estimate g;
  if (!(base > 0)) return {0, nan, nan, 0};
  g.mean = gp.FromModelUnits(mb + md) / base - 1;
  g.low = gp.FromModelUnits(mb + md - kZ95 * sd) / base - 1;
  g.high = gp.FromModelUnits(mb + md + kZ95 * sd) / base - 1;
  // As for one configuration: the interval also spans what the two
  // configurations' own samples say of the ratio.
  const double noise = LogNoiseSd(gp, mb);
  const Direct da = DirectOf(optimizer, own_begin, a, noise);
  const Direct db = DirectOf(optimizer, own_begin, b, noise);
  if (std::isfinite(da.log_se) && std::isfinite(db.log_se) && a != b) {
    const double diff = da.log_mean - db.log_mean;
    const double se = std::hypot(da.log_se, db.log_se);
    g.low = std::min(g.low, std::expm1(diff - kZ95 * se));
    g.high = std::max(g.high, std::expm1(diff + kZ95 * se));
  }
  return g;
}

Observation ChooseFrozenOrInitial(const BayesianOptimizer& optimizer,
                                  std::size_t own_begin, double confidence,
                                  double keep_confidence, bool* kept_initial) {
  const Observation chosen = ChooseFrozen(optimizer, own_begin, confidence);
  const Observation& initial = optimizer.observations()[own_begin];
  bool keep = false;
  if (chosen.config != initial.config) {
    // A change has to beat the configuration in force beyond noise, by the
    // model or by the samples themselves; a pick the model puts at or below
    // it (a stand-in for an unmeasured candidate, a lucky sample) never
    // wins.
    const bool model_says =
        !HasModel(optimizer) ||
        ClearlyAhead(optimizer, chosen.config, initial.config,
                     std::max(confidence, keep_confidence));
    keep = !model_says && !SamplesClearlyAhead(optimizer, own_begin,
                                               chosen.config, initial.config);
  }
  if (kept_initial) *kept_initial = keep || chosen.config == initial.config;
  return keep ? initial : chosen;
}

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
