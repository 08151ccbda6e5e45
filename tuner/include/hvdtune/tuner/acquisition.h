#pragma once

#include <Eigen/Core>

#include "hvdtune/tuner/gaussian_process.h"

namespace hvdtune::tuner {

/// Which acquisition function scores candidate points (all maximised).
enum class AcquisitionKind {
  /// log of expected improvement, stable far into the tail (default).
  kLogExpectedImprovement,
  /// Plain expected improvement (underflows to 0 away from the data; kept
  /// for baselines).
  kExpectedImprovement,
  /// Upper confidence bound mean + sqrt(beta) * sd.
  kUpperConfidenceBound,
};

/// Parameters of the acquisition function (standardised output units).
struct AcquisitionSettings {
  AcquisitionKind kind = AcquisitionKind::kLogExpectedImprovement;
  double xi = 0.0;  ///< EI improvement margin over the incumbent.
  /// Added to xi by the optimizer: this many times the model's noise
  /// standard deviation, so that a noisy objective does not chase
  /// improvements smaller than its noise; see NoiseMargin.
  double xi_noise = 1.0;
  /// The fitted noise variance (standardised units) at which the margin is
  /// half of xi_noise sd. Far below it the margin vanishes: on a noise-free
  /// function the fitted noise is the model's misfit, about 1e-7, and a
  /// margin of its size would stop the refinement of the optimum.
  double xi_noise_half_variance = 3e-5;
  double ucb_beta = 4.0;  ///< UCB exploration weight.
};

/// The margin added to xi for a model whose fitted noise variance is
/// `noise_variance`: xi_noise * sd * v / (v + xi_noise_half_variance), about
/// xi_noise * sd where the noise is real, and 0 where it is only misfit.
double NoiseMargin(const AcquisitionSettings& settings, double noise_variance);

/// log h(z) with h(z) = phi(z) + z Phi(z), so EI = sigma * h(z). Accurate for
/// any finite z: direct for z > -1, erfcx with log1mexp down to z = -100
/// (as in Ament et al., "Unexpected improvements to expected improvement",
/// 2023), and below that the asymptotic expansion
/// -z^2/2 - log(2 pi)/2 - 2 log|z| + log(1 - 3/z^2 + 15/z^4 - ...).
/// When `dlogh_dz` is non-null it receives d log h / dz.
double LogH(double z, double* dlogh_dz = nullptr);

/// Scaled complementary error function exp(x^2) erfc(x), for x >= 0.
double Erfcx(double x);

/// Value of the acquisition at unit point `x` given the incumbent value
/// `best` (standardised units). When `grad` is non-null it receives the
/// gradient with respect to the continuous coordinates of `x`.
double EvaluateAcquisition(const GaussianProcess& gp,
                           const AcquisitionSettings& settings, double best,
                           const Eigen::VectorXd& x, Eigen::VectorXd* grad);

}  // namespace hvdtune::tuner
