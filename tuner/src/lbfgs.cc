#include "lbfgs.h"

#include <nlopt.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace hvdtune::tuner {

namespace {

struct Context {
  const GradientObjective* objective;
  LbfgsResult best;
};

double Trampoline(unsigned n, const double* x, double* grad, void* data) {
  auto* ctx = static_cast<Context*>(data);
  const Eigen::Map<const Eigen::VectorXd> point(x, n);
  Eigen::VectorXd g;
  double value = -std::numeric_limits<double>::infinity();
  try {
    value = (*ctx->objective)(point, grad ? &g : nullptr);
  } catch (...) {
    value = -std::numeric_limits<double>::infinity();  // never unwind into C
  }
  if (!std::isfinite(value) || (grad && !g.allFinite())) {
    if (grad) std::fill(grad, grad + n, 0.0);
    return -1e300;
  }
  if (grad) Eigen::Map<Eigen::VectorXd>(grad, n) = g;
  if (value > ctx->best.value) ctx->best = {point, value};
  return value;
}

}  // namespace

LbfgsResult MaximizeLbfgs(const GradientObjective& objective,
                          const Eigen::VectorXd& lower,
                          const Eigen::VectorXd& upper,
                          const std::vector<Eigen::VectorXd>& starts,
                          int max_evals, double xtol_rel) {
  Context ctx{&objective,
              {Eigen::VectorXd(), -std::numeric_limits<double>::infinity()}};
  const auto n = static_cast<unsigned>(lower.size());
  if (n == 0 || max_evals <= 0) return ctx.best;
  nlopt_opt opt = nlopt_create(NLOPT_LD_LBFGS, n);
  if (opt == nullptr) return ctx.best;
  nlopt_set_lower_bounds(opt, lower.data());
  nlopt_set_upper_bounds(opt, upper.data());
  nlopt_set_max_objective(opt, Trampoline, &ctx);
  nlopt_set_maxeval(opt, max_evals);
  nlopt_set_xtol_rel(opt, xtol_rel);
  nlopt_set_ftol_rel(opt, 1e-9);
  for (const Eigen::VectorXd& start : starts) {
    Eigen::VectorXd x = start.cwiseMax(lower).cwiseMin(upper);
    double value = 0;
    nlopt_optimize(opt, x.data(), &value);
  }
  nlopt_destroy(opt);
  return ctx.best;
}

}  // namespace hvdtune::tuner
