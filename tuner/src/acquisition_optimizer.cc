#include "hvdtune/tuner/acquisition_optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "lbfgs.h"

namespace hvdtune::tuner {

namespace {

class Maximizer {
 public:
  Maximizer(const GaussianProcess& gp, const AcquisitionSettings& acquisition,
            double best, const std::vector<int>& counts,
            const std::vector<int>& fixed,
            const AcquisitionOptimizerSettings& settings)
      : gp_(gp),
        acquisition_(acquisition),
        best_(best),
        counts_(counts),
        fixed_(fixed),
        settings_(settings),
        num_cont_(gp.num_continuous()) {}

  double Evaluate(const Eigen::VectorXd& x) const {
    const double v = EvaluateAcquisition(gp_, acquisition_, best_, x, nullptr);
    return std::isfinite(v) ? v : -1e300;
  }

  // L-BFGS over the continuous coordinates, categories held fixed.
  AcquisitionMaximum Refine(const Eigen::VectorXd& start) const {
    AcquisitionMaximum result{start, Evaluate(start)};
    if (num_cont_ == 0 || settings_.local_max_evals <= 0) return result;
    Eigen::VectorXd point = start;
    const GradientObjective objective = [&](const Eigen::VectorXd& x,
                                            Eigen::VectorXd* grad) {
      point.head(num_cont_) = x;
      return EvaluateAcquisition(gp_, acquisition_, best_, point, grad);
    };
    const LbfgsResult local =
        MaximizeLbfgs(objective, Eigen::VectorXd::Zero(num_cont_),
                      Eigen::VectorXd::Ones(num_cont_), {start.head(num_cont_)},
                      settings_.local_max_evals, 1e-6);
    if (local.x.size() > 0 && local.value > result.value) {
      result.x.head(num_cont_) = local.x;
      result.value = local.value;
    }
    return result;
  }

  // Tries every value of each free categorical coordinate in turn, then
  // refines the continuous part again if a category changed.
  AcquisitionMaximum Polish(AcquisitionMaximum m) const {
    for (int round = 0; round < 2; ++round) {
      bool changed = false;
      for (std::size_t c = 0; c < counts_.size(); ++c) {
        if (!fixed_.empty() && fixed_[c] >= 0) continue;
        const int idx = num_cont_ + static_cast<int>(c);
        Eigen::VectorXd trial = m.x;
        for (int level = 0; level < counts_[c]; ++level) {
          if (level == m.x[idx]) continue;
          trial[idx] = level;
          const double v = Evaluate(trial);
          if (v > m.value) {
            m = {trial, v};
            changed = true;
          }
        }
      }
      if (!changed) break;
      m = Refine(m.x);
    }
    return m;
  }

 private:
  const GaussianProcess& gp_;
  const AcquisitionSettings& acquisition_;
  double best_;
  const std::vector<int>& counts_;
  const std::vector<int>& fixed_;
  const AcquisitionOptimizerSettings& settings_;
  int num_cont_;
};

}  // namespace

AcquisitionMaximum MaximizeAcquisition(
    const GaussianProcess& gp, const AcquisitionSettings& acquisition,
    double best, const std::vector<int>& category_counts,
    const std::vector<Eigen::VectorXd>& anchors,
    const AcquisitionOptimizerSettings& settings, std::mt19937_64& rng,
    const std::vector<int>& fixed_categories) {
  const int num_cont = gp.num_continuous();
  const int dim = num_cont + static_cast<int>(category_counts.size());
  Maximizer maximizer(gp, acquisition, best, category_counts, fixed_categories,
                      settings);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, settings.perturbation_sd);

  std::vector<Eigen::VectorXd> candidates;
  double combinations = 1;
  for (int k : category_counts) combinations *= k;
  if (num_cont == 0 && combinations <= settings.max_enumerated_combinations) {
    for (int i = 0; i < static_cast<int>(combinations); ++i) {
      Eigen::VectorXd x(dim);
      int rest = i;
      for (std::size_t c = 0; c < category_counts.size(); ++c) {
        x[c] = rest % category_counts[c];
        rest /= category_counts[c];
      }
      candidates.push_back(x);
    }
  } else {
    for (int i = 0; i < settings.num_random_candidates; ++i) {
      Eigen::VectorXd x(dim);
      for (int d = 0; d < num_cont; ++d) x[d] = uniform(rng);
      for (std::size_t c = 0; c < category_counts.size(); ++c) {
        x[num_cont + c] =
            std::min<double>(category_counts[c] - 1,
                             std::floor(uniform(rng) * category_counts[c]));
      }
      candidates.push_back(x);
    }
    for (const Eigen::VectorXd& anchor : anchors) {
      for (int i = 0; i < settings.num_anchor_perturbations; ++i) {
        Eigen::VectorXd x = anchor;
        for (int d = 0; d < num_cont; ++d) {
          x[d] = std::clamp(x[d] + normal(rng), 0.0, 1.0);
        }
        for (std::size_t c = 0; c < category_counts.size(); ++c) {
          if (uniform(rng) < 0.2) {
            x[num_cont + c] = static_cast<double>(rng() % category_counts[c]);
          }
        }
        candidates.push_back(x);
      }
    }
  }
  if (candidates.empty()) return {Eigen::VectorXd::Zero(dim), 0.0};
  // Held categories are imposed after drawing, so the random stream (and
  // hence every unconstrained search) is the same either way.
  for (std::size_t c = 0; c < fixed_categories.size(); ++c) {
    if (fixed_categories[c] < 0) continue;
    for (Eigen::VectorXd& x : candidates) x[num_cont + c] = fixed_categories[c];
  }

  std::vector<double> values(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    values[i] = maximizer.Evaluate(candidates[i]);
  }
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t starts = std::min<std::size_t>(
      std::max(1, settings.num_local_starts), order.size());
  // Stable ordering keeps ties deterministic across platforms' sorts.
  std::partial_sort(order.begin(), order.begin() + starts, order.end(),
                    [&](std::size_t a, std::size_t b) {
                      return values[a] > values[b] ||
                             (values[a] == values[b] && a < b);
                    });
  // Also refine the best candidate of every category combination (when
  // there are few), so categories compete on refined continuous settings.
  std::vector<std::size_t> start_ids(order.begin(), order.begin() + starts);
  if (num_cont > 0 && !category_counts.empty() && combinations <= 16) {
    std::vector<std::pair<double, std::size_t>> per_combo(
        static_cast<std::size_t>(combinations),
        {-std::numeric_limits<double>::infinity(), 0});
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      std::size_t key = 0, stride = 1;
      for (std::size_t c = 0; c < category_counts.size(); ++c) {
        key += static_cast<std::size_t>(candidates[i][num_cont + c]) * stride;
        stride *= category_counts[c];
      }
      if (values[i] > per_combo[key].first) per_combo[key] = {values[i], i};
    }
    for (const auto& [value, id] : per_combo) {
      if (std::isfinite(value) && std::find(start_ids.begin(), start_ids.end(),
                                            id) == start_ids.end()) {
        start_ids.push_back(id);
      }
    }
  }
  AcquisitionMaximum best_found{candidates[order[0]], values[order[0]]};
  for (std::size_t id : start_ids) {
    AcquisitionMaximum m = maximizer.Refine(candidates[id]);
    m = maximizer.Polish(m);
    if (m.value > best_found.value) best_found = m;
  }
  return best_found;
}

}  // namespace hvdtune::tuner
