#pragma once

// Bounded L-BFGS maximisation through NLopt's C API, shared by the
// hyperparameter fit and the acquisition maximiser. Internal to the tuner.

#include <Eigen/Core>
#include <functional>
#include <vector>

namespace hvdtune::tuner {

/// Objective to maximise: value at x, gradient into *grad when non-null.
using GradientObjective =
    std::function<double(const Eigen::VectorXd& x, Eigen::VectorXd* grad)>;

struct LbfgsResult {
  Eigen::VectorXd x;  ///< Best point evaluated (empty if none was finite).
  double value;       ///< Its value (-inf if none was finite).
};

/// Runs L-BFGS from each start (clamped into the box) with at most
/// `max_evals` evaluations per start and returns the best point any
/// evaluation reached. NLopt failure codes (roundoff-limited, invalid
/// start, ...) are not errors here: the best point seen stands. Non-finite
/// values are treated as very poor points. Never throws.
LbfgsResult MaximizeLbfgs(const GradientObjective& objective,
                          const Eigen::VectorXd& lower,
                          const Eigen::VectorXd& upper,
                          const std::vector<Eigen::VectorXd>& starts,
                          int max_evals, double xtol_rel);

}  // namespace hvdtune::tuner
