#include "hvdtune/tuner/acquisition.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hvdtune::tuner {

namespace {

constexpr double kHalfLog2Pi = 0.91893853320467274178;      // log(2 pi) / 2
constexpr double kHalfLogPiOver2 = 0.22579135264472743236;  // log(pi / 2) / 2
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrtPi = 0.56418958354775628695;
// Below this, 1 + zR (~1/z^2) is evaluated by its asymptotic series instead
// of by cancellation; the series' truncation error there is below 1e-16.
constexpr double kAsymptoticZ = -100.0;

// log(1 - exp(a)) for a < 0, accurate on both sides of -log 2.
double Log1mExp(double a) {
  return a > -0.6931471805599453 ? std::log(-std::expm1(a))
                                 : std::log1p(-std::exp(a));
}

}  // namespace

double Erfcx(double x) {
  if (x < 25.0) return std::exp(x * x) * std::erfc(x);
  // Asymptotic series 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k; its
  // terms fall below 1e-17 well before k = 10 for x >= 25.
  const double inv = 1.0 / (2.0 * x * x);
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 10; ++k) {
    term *= -(2.0 * k - 1.0) * inv;
    sum += term;
  }
  return kInvSqrtPi / x * sum;
}

double NoiseMargin(const AcquisitionSettings& settings, double noise_variance) {
  if (!(noise_variance > 0) || !(settings.xi_noise > 0)) return 0.0;
  const double half = std::max(settings.xi_noise_half_variance, 0.0);
  return settings.xi_noise * std::sqrt(noise_variance) * noise_variance /
         (noise_variance + half);
}

double LogH(double z, double* dlogh_dz) {
  if (z > -1.0) {
    const double cdf = 0.5 * std::erfc(-z * kInvSqrt2);
    const double pdf = std::exp(-0.5 * z * z - kHalfLog2Pi);
    const double h = pdf + z * cdf;
    if (dlogh_dz) *dlogh_dz = cdf / h;
    return std::log(h);
  }
  if (z > kAsymptoticZ) {
    // h = phi(z) (1 + z R), R = Phi/phi = sqrt(pi/2) erfcx(-z/sqrt2); for
    // z < 0, 1 + zR = 1 - exp(log(|z| erfcx) + log sqrt(pi/2)).
    const double ex = Erfcx(-z * kInvSqrt2);
    const double log_r = std::log(ex) + kHalfLogPiOver2;
    const double log_tail = Log1mExp(std::log(-z) + log_r);
    if (dlogh_dz) *dlogh_dz = std::exp(log_r - log_tail);  // R / (1 + zR)
    return -0.5 * z * z - kHalfLog2Pi + log_tail;
  }
  // 1 + zR = z^-2 S, S = 1 - 3/z^2 + 15/z^4 - 105/z^6 + 945/z^8.
  const double w = 1.0 / (z * z);
  const double series = 1 + w * (-3 + w * (15 + w * (-105 + w * 945)));
  if (dlogh_dz) {
    const double dseries = (w / z) * (6 + w * (-60 + w * (630 - w * 7560)));
    *dlogh_dz = -z - 2.0 / z + dseries / series;
  }
  return -0.5 * z * z - kHalfLog2Pi - 2.0 * std::log(-z) + std::log(series);
}

double EvaluateAcquisition(const GaussianProcess& gp,
                           const AcquisitionSettings& settings, double best,
                           const Eigen::VectorXd& x, Eigen::VectorXd* grad) {
  double mean, var;
  Eigen::VectorXd dmean, dvar;
  gp.PredictStandardized(x, &mean, &var, grad ? &dmean : nullptr,
                         grad ? &dvar : nullptr);
  const double sd = std::sqrt(var);
  switch (settings.kind) {
    case AcquisitionKind::kUpperConfidenceBound: {
      const double w = std::sqrt(settings.ucb_beta);
      if (grad) *grad = dmean + w * dvar / (2.0 * sd);
      return mean + w * sd;
    }
    case AcquisitionKind::kExpectedImprovement: {
      const double z = (mean - best - settings.xi) / sd;
      const double cdf = 0.5 * std::erfc(-z * kInvSqrt2);
      const double pdf = std::exp(-0.5 * z * z - kHalfLog2Pi);
      // dEI/dmean = Phi(z), dEI/dsd = phi(z).
      if (grad) *grad = cdf * dmean + pdf * dvar / (2.0 * sd);
      return sd * (pdf + z * cdf);
    }
    case AcquisitionKind::kLogExpectedImprovement:
      break;
  }
  const double z = (mean - best - settings.xi) / sd;
  double dlogh = 0;
  const double value = std::log(sd) + LogH(z, grad ? &dlogh : nullptr);
  if (grad) {
    const Eigen::VectorXd dsd = dvar / (2.0 * sd);
    *grad = dlogh * (dmean - z * dsd) / sd + dsd / sd;
  }
  return value;
}

}  // namespace hvdtune::tuner
