#include "hvdtune/tuner/gaussian_process.h"

#include <Eigen/Cholesky>
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "lbfgs.h"

namespace hvdtune::tuner {

namespace {

constexpr double kSqrt5 = 2.23606797749978969640;
constexpr double kLog2Pi = 1.83787706640934548356;
constexpr int kMaxJitterTries = 6;

// Matérn-5/2 profile and the factor shared by its derivatives:
// k(r) = (1 + s r + 5/3 r^2) e^{-s r}, dk/d(r^2) = -5/6 (1 + s r) e^{-s r}.
inline void Matern52(double r2, double* value, double* deriv_factor) {
  const double r = std::sqrt(r2);
  const double e = std::exp(-kSqrt5 * r);
  *value = (1.0 + kSqrt5 * r + 5.0 / 3.0 * r2) * e;
  *deriv_factor = 5.0 / 3.0 * (1.0 + kSqrt5 * r) * e;
}

// Cholesky of `k`, adding growing jitter to the diagonal when it is not
// numerically positive definite. Returns false only if every try failed.
bool RobustCholesky(Eigen::MatrixXd k, double scale, Eigen::MatrixXd* lower) {
  double jitter = 0;
  for (int attempt = 0; attempt < kMaxJitterTries; ++attempt) {
    if (jitter > 0) k.diagonal().array() += jitter;
    Eigen::LLT<Eigen::MatrixXd> llt(k);
    if (llt.info() == Eigen::Success && llt.matrixLLT().allFinite()) {
      *lower = llt.matrixL();
      return true;
    }
    jitter = jitter == 0 ? 1e-10 * scale : jitter * 100;
  }
  return false;
}

}  // namespace

GaussianProcess::GaussianProcess(int num_continuous,
                                 std::vector<int> category_counts,
                                 GpSettings settings)
    : num_continuous_(num_continuous),
      num_lengthscales_(num_continuous == 0 ? 0
                        : settings.ard      ? num_continuous
                                            : 1),
      category_counts_(std::move(category_counts)),
      settings_(settings),
      floor_(settings.noise_floor) {
  theta_ = DefaultHyperparameters();
  h_ = Unpack(theta_);
  x_.resize(num_continuous_ + num_categorical(), 0);
}

Eigen::VectorXd GaussianProcess::DefaultHyperparameters() const {
  Eigen::VectorXd theta(num_hyperparameters());
  const double ll = settings_.log_lengthscale_prior_mean +
                    0.5 * std::log(std::max(1, num_continuous_));
  int k = 0;
  for (int i = 0; i < num_lengthscales_; ++i) theta[k++] = ll;
  for (int i = 0; i < num_categorical(); ++i) {
    theta[k++] = settings_.log_category_weight_prior_mean;
  }
  for (int i = 0; i < num_category_effects(); ++i) {
    theta[k++] = settings_.log_category_effect_prior_mean;
  }
  for (int i = 0; i < num_category_scales(); ++i) theta[k++] = 0.0;
  theta[k++] = settings_.log_signal_prior_mean;
  theta[k++] = settings_.log_noise_prior_mean;
  theta[k++] = 0.0;
  return theta;
}

void GaussianProcess::HyperparameterBounds(Eigen::VectorXd* lower,
                                           Eigen::VectorXd* upper) const {
  lower->resize(num_hyperparameters());
  upper->resize(num_hyperparameters());
  int k = 0;
  for (int i = 0; i < num_lengthscales_; ++i, ++k) {
    (*lower)[k] = std::log(0.01);
    (*upper)[k] = std::log(30.0);
  }
  for (int i = 0; i < num_categorical(); ++i, ++k) {
    (*lower)[k] = std::log(0.01);
    (*upper)[k] = std::log(30.0);
  }
  for (int i = 0; i < num_category_effects(); ++i, ++k) {
    (*lower)[k] = std::log(1e-4);
    (*upper)[k] = std::log(10.0);
  }
  for (int i = 0; i < num_category_scales(); ++i, ++k) {
    (*lower)[k] = -3.0;
    (*upper)[k] = 3.0;
  }
  (*lower)[k] = std::log(0.01);  // signal variance
  (*upper)[k++] = std::log(100.0);
  (*lower)[k] = std::log(1e-12);  // noise above the floor
  (*upper)[k++] = std::log(10.0);
  (*lower)[k] = -5.0;  // constant mean
  (*upper)[k++] = 5.0;
}

GaussianProcess::Unpacked GaussianProcess::Unpack(
    const Eigen::VectorXd& theta) const {
  Unpacked h;
  h.inv_l2.resize(num_continuous_);
  int k = 0;
  for (int i = 0; i < num_continuous_; ++i) {
    h.inv_l2[i] = std::exp(-2.0 * theta[settings_.ard ? i : 0]);
  }
  k += num_lengthscales_;
  h.cat_w.resize(num_categorical());
  for (int i = 0; i < num_categorical(); ++i) h.cat_w[i] = std::exp(theta[k++]);
  h.cat_b.resize(num_category_effects());
  double effects = 0;
  for (int i = 0; i < num_category_effects(); ++i) {
    h.cat_b[i] = std::exp(theta[k++]);
    effects += h.cat_b[i];
  }
  h.cat_u.resize(num_category_scales());
  for (int i = 0; i < num_category_scales(); ++i) h.cat_u[i] = theta[k++];
  h.s2 = std::exp(theta[k++]);
  h.prior_var = h.s2 * (1.0 + effects);
  h.noise = floor_ + std::exp(theta[k++]);
  h.mean = theta[k++];
  return h;
}

void GaussianProcess::PairTerms(const Unpacked& h, const double* a,
                                const double* b, double* m52, double* dfac,
                                double* cat) const {
  double r2 = 0;
  for (int d = 0; d < num_continuous_; ++d) {
    const double diff = a[d] - b[d];
    r2 += diff * diff * h.inv_l2[d];
  }
  double mismatch = 0;
  for (int c = 0; c < num_categorical(); ++c) {
    if (a[num_continuous_ + c] != b[num_continuous_ + c]) {
      mismatch += h.cat_w[c];
    }
  }
  if (num_category_scales() > 0) {
    int offset = 0;
    for (int c = 0; c < num_categorical(); ++c) {
      mismatch -= h.cat_u[offset + CategoryIndex(a, c)] +
                  h.cat_u[offset + CategoryIndex(b, c)];
      offset += category_counts_[c];
    }
  }
  Matern52(r2, m52, dfac);
  *cat = std::exp(-mismatch);
}

int GaussianProcess::CategoryIndex(const double* a, int c) const {
  const int v = static_cast<int>(std::lround(a[num_continuous_ + c]));
  return std::clamp(v, 0, category_counts_[c] - 1);
}

double GaussianProcess::SharedEffects(const Unpacked& h, const double* a,
                                      const double* b) const {
  double sum = 0;
  for (int c = 0; c < num_category_effects(); ++c) {
    if (a[num_continuous_ + c] == b[num_continuous_ + c]) sum += h.cat_b[c];
  }
  return sum;
}

double GaussianProcess::Kernel(const Unpacked& h, const double* a,
                               const double* b) const {
  double m52, dfac, cat;
  PairTerms(h, a, b, &m52, &dfac, &cat);
  // s2 * m52 * cat in this order: without effects the bits of the shared
  // model alone.
  return h.s2 * m52 * cat + h.s2 * SharedEffects(h, a, b);
}

void GaussianProcess::SetHyperparameters(const Eigen::VectorXd& theta) {
  Eigen::VectorXd lower, upper;
  HyperparameterBounds(&lower, &upper);
  theta_ = theta.cwiseMax(lower).cwiseMin(upper);
  h_ = Unpack(theta_);
  Refactorize();
}

void GaussianProcess::SetData(const Eigen::MatrixXd& x,
                              const Eigen::VectorXd& y) {
  x_ = x;
  y_raw_ = y;
  Restandardize(/*refit_warp=*/true);
  floor_ = NoiseFloor();
  h_ = Unpack(theta_);
  Refactorize();
}

double YeoJohnson(double z, double lambda) {
  if (z >= 0) {
    return std::abs(lambda) < 1e-9 ? std::log1p(z)
                                   : (std::pow(z + 1, lambda) - 1) / lambda;
  }
  const double l2 = 2 - lambda;
  return std::abs(l2) < 1e-9 ? -std::log1p(-z)
                             : -(std::pow(1 - z, l2) - 1) / l2;
}

double InverseYeoJohnson(double psi, double lambda) {
  if (psi >= 0) {
    if (std::abs(lambda) < 1e-9) return std::expm1(psi);
    return std::pow(std::max(lambda * psi + 1, 1e-300), 1 / lambda) - 1;
  }
  const double l2 = 2 - lambda;
  if (std::abs(l2) < 1e-9) return -std::expm1(-psi);
  return 1 - std::pow(std::max(1 - l2 * psi, 1e-300), 1 / l2);
}

namespace {

// Mean and sample standard deviation (1 when degenerate).
void MeanAndScale(const Eigen::VectorXd& v, double* mean, double* scale) {
  const int n = static_cast<int>(v.size());
  *mean = n > 0 ? v.mean() : 0.0;
  double var = 0;
  if (n > 1) var = (v.array() - *mean).square().sum() / (n - 1);
  const double tiny = 1e-12 * std::max(1.0, std::abs(*mean));
  *scale = std::sqrt(var) > tiny ? std::sqrt(var) : 1.0;
}

// Yeo-Johnson exponent maximising the Gaussian profile likelihood of the
// transformed data, on a grid (robust, and cheap for BO-sized data).
double FitYeoJohnson(const Eigen::VectorXd& z) {
  const int n = static_cast<int>(z.size());
  if (n < 3) return 1.0;
  double jacobian_base = 0;
  for (int i = 0; i < n; ++i) {
    jacobian_base += (z[i] >= 0 ? 1 : -1) * std::log1p(std::abs(z[i]));
  }
  double best_lambda = 1.0, best_ll = -std::numeric_limits<double>::infinity();
  Eigen::VectorXd psi(n);
  for (int step = 0; step <= 40; ++step) {
    const double lambda = 0.05 * step;
    for (int i = 0; i < n; ++i) psi[i] = YeoJohnson(z[i], lambda);
    const double var = (psi.array() - psi.mean()).square().mean();
    if (!(var > 0) || !std::isfinite(var)) continue;
    const double ll = -0.5 * n * std::log(var) + (lambda - 1) * jacobian_base;
    if (ll > best_ll) best_ll = ll, best_lambda = lambda;
  }
  return best_lambda;
}

}  // namespace

void GaussianProcess::Restandardize(bool refit_warp) {
  if (refit_warp) {
    log_outputs_ = settings_.log_outputs && y_raw_.size() > 0 &&
                   (y_raw_.array() > 0).all();
  }
  Eigen::VectorXd pre = y_raw_;
  if (log_outputs_) pre = pre.array().max(1e-300).log().matrix();
  MeanAndScale(pre, &y_offset_, &y_scale_);
  Eigen::VectorXd z = (pre.array() - y_offset_) / y_scale_;
  if (settings_.warp_outputs && !log_outputs_) {
    if (refit_warp) warp_lambda_ = FitYeoJohnson(z);
    for (int i = 0; i < z.size(); ++i) z[i] = YeoJohnson(z[i], warp_lambda_);
  }
  MeanAndScale(z, &warp_offset_, &warp_scale_);
  y_ = (z.array() - warp_offset_) / warp_scale_;
}

double GaussianProcess::NoiseFloor() const {
  const double rel = settings_.relative_noise_floor;
  const int n = num_points();
  if (!(rel > 0) || n < 2 || !(y_raw_.array() > 0).all()) {
    return settings_.noise_floor;
  }
  // The spread of a score at the outputs' mean, a factor exp(+-rel) about
  // it, in model units: the transform is monotone and smooth.
  const double at = std::exp(y_raw_.array().log().mean());
  const double sd = 0.5 * (ToModelUnits(at * std::exp(rel)) -
                           ToModelUnits(at * std::exp(-rel)));
  if (!std::isfinite(sd)) return settings_.noise_floor;
  return std::max(settings_.noise_floor, sd * sd);
}

double GaussianProcess::ToModelUnits(double raw) const {
  if (log_outputs_) raw = std::log(std::max(raw, 1e-300));
  double z = (raw - y_offset_) / y_scale_;
  if (settings_.warp_outputs && !log_outputs_) z = YeoJohnson(z, warp_lambda_);
  return (z - warp_offset_) / warp_scale_;
}

double GaussianProcess::FromModelUnits(double model) const {
  double z = warp_offset_ + warp_scale_ * model;
  if (settings_.warp_outputs && !log_outputs_) {
    z = InverseYeoJohnson(z, warp_lambda_);
  }
  if (log_outputs_) return std::exp(y_offset_ + y_scale_ * z);
  return y_offset_ + y_scale_ * z;
}

void GaussianProcess::Refactorize() {
  const int n = num_points();
  Eigen::MatrixXd k(n, n);
  for (int j = 0; j < n; ++j) {
    for (int i = j; i < n; ++i) {
      k(i, j) = k(j, i) = Kernel(h_, x_.col(i).data(), x_.col(j).data());
    }
    k(j, j) += h_.noise;
  }
  if (!RobustCholesky(k, h_.s2, &chol_)) {
    // Unreachable in practice (the noise floor keeps K positive definite);
    // a diagonal factor keeps predictions finite rather than throwing.
    chol_ = k.diagonal().cwiseMax(h_.noise).cwiseSqrt().asDiagonal();
  }
  UpdateAlpha();
}

void GaussianProcess::UpdateAlpha() {
  const int n = num_points();
  alpha_ = (y_.array() - h_.mean).matrix();
  if (n == 0) return;
  const auto lower =
      std::as_const(chol_).topLeftCorner(n, n).triangularView<Eigen::Lower>();
  lower.solveInPlace(alpha_);
  lower.transpose().solveInPlace(alpha_);
}

void GaussianProcess::AddPoint(const Eigen::VectorXd& x, double y) {
  const int n = num_points();
  const double prior_var = Kernel(h_, x.data(), x.data());
  x_.conservativeResize(Eigen::NoChange, n + 1);
  x_.col(n) = x;
  y_raw_.conservativeResize(n + 1);
  y_raw_[n] = y;
  Restandardize(/*refit_warp=*/false);

  Eigen::VectorXd kx(n);
  for (int i = 0; i < n; ++i) kx[i] = Kernel(h_, x_.col(i).data(), x.data());
  if (n > 0)
    std::as_const(chol_)
        .topLeftCorner(n, n)
        .triangularView<Eigen::Lower>()
        .solveInPlace(kx);
  const double d2 = prior_var + h_.noise - kx.squaredNorm();
  if (!(d2 > 1e-3 * h_.noise)) {
    // Lost positive definiteness to rounding: refactorise from scratch.
    Refactorize();
    return;
  }
  Eigen::MatrixXd grown = Eigen::MatrixXd::Zero(n + 1, n + 1);
  grown.topLeftCorner(n, n) = chol_.topLeftCorner(n, n);
  grown.block(n, 0, 1, n) = kx.transpose();
  grown(n, n) = std::sqrt(d2);
  chol_.swap(grown);
  UpdateAlpha();
}

double GaussianProcess::LogMarginalLikelihood(const Eigen::VectorXd& theta,
                                              Eigen::VectorXd* grad) const {
  const int n = num_points();
  const Unpacked h = Unpack(theta);
  if (grad) grad->setZero(num_hyperparameters());
  if (n == 0) return 0.0;
  Eigen::MatrixXd k(n, n);
  for (int j = 0; j < n; ++j) {
    for (int i = j; i < n; ++i) {
      k(i, j) = k(j, i) = Kernel(h, x_.col(i).data(), x_.col(j).data());
    }
    k(j, j) += h.noise;
  }
  Eigen::MatrixXd lower;
  if (!RobustCholesky(k, h.s2, &lower)) {
    return -std::numeric_limits<double>::infinity();
  }
  const auto tri = std::as_const(lower).triangularView<Eigen::Lower>();
  Eigen::VectorXd alpha = (y_.array() - h.mean).matrix();
  const Eigen::VectorXd resid = alpha;
  tri.solveInPlace(alpha);
  tri.transpose().solveInPlace(alpha);
  const double lml = -0.5 * resid.dot(alpha) -
                     lower.diagonal().array().log().sum() - 0.5 * n * kLog2Pi;
  if (!grad) return lml;

  // d lml / d theta_p = 1/2 tr((alpha alpha^T - K^-1) dK/dtheta_p).
  Eigen::MatrixXd g = Eigen::MatrixXd::Identity(n, n);
  tri.solveInPlace(g);
  tri.transpose().solveInPlace(g);
  g = alpha * alpha.transpose() - g;

  const int cat0 = num_lengthscales_;
  const int eff0 = cat0 + num_categorical();
  const int scl0 = eff0 + num_category_effects();
  const int s2_idx = scl0 + num_category_scales();
  Eigen::VectorXd& out = *grad;
  for (int j = 0; j < n; ++j) {
    const double* b = x_.col(j).data();
    for (int i = j + 1; i < n; ++i) {
      const double* a = x_.col(i).data();
      double m52, dfac, cat;
      PairTerms(h, a, b, &m52, &dfac, &cat);
      const double kshared = h.s2 * m52 * cat;
      const double kij = kshared + h.s2 * SharedEffects(h, a, b);
      const double gij = g(i, j);  // pair counted twice, times 1/2
      const double lfac = gij * h.s2 * cat * dfac;
      for (int d = 0; d < num_continuous_; ++d) {
        const double diff = a[d] - b[d];
        out[settings_.ard ? d : 0] += lfac * diff * diff * h.inv_l2[d];
      }
      for (int c = 0; c < num_categorical(); ++c) {
        if (a[num_continuous_ + c] != b[num_continuous_ + c]) {
          out[cat0 + c] -= gij * kshared * h.cat_w[c];
        }
      }
      for (int c = 0; c < num_category_effects(); ++c) {
        if (a[num_continuous_ + c] == b[num_continuous_ + c]) {
          out[eff0 + c] += gij * h.s2 * h.cat_b[c];
        }
      }
      if (num_category_scales() > 0) {
        int offset = scl0;
        for (int c = 0; c < num_categorical(); ++c) {
          out[offset + CategoryIndex(a, c)] += gij * kshared;
          out[offset + CategoryIndex(b, c)] += gij * kshared;
          offset += category_counts_[c];
        }
      }
      out[s2_idx] += gij * kij;
    }
  }
  const double trace = g.diagonal().sum();
  // The diagonal: k(x, x) = s2 (scale(x)^2 + sum of the effects), the same
  // for every point without scales.
  for (int c = 0; c < num_category_effects(); ++c) {
    out[eff0 + c] += 0.5 * trace * h.s2 * h.cat_b[c];
  }
  if (num_category_scales() == 0) {
    out[s2_idx] += 0.5 * trace * h.prior_var;
  } else {
    for (int j = 0; j < n; ++j) {
      const double* a = x_.col(j).data();
      const double gjj = 0.5 * g(j, j);
      out[s2_idx] += gjj * Kernel(h, a, a);
      double m52, dfac, cat;
      PairTerms(h, a, a, &m52, &dfac, &cat);
      int offset = scl0;
      for (int c = 0; c < num_categorical(); ++c) {
        out[offset + CategoryIndex(a, c)] += gjj * 2 * h.s2 * cat;
        offset += category_counts_[c];
      }
    }
  }
  out[s2_idx + 1] = 0.5 * trace * (h.noise - floor_);
  out[s2_idx + 2] = alpha.sum();
  return lml;
}

double GaussianProcess::LogPrior(const Eigen::VectorXd& theta,
                                 Eigen::VectorXd* grad) const {
  if (grad) grad->setZero(num_hyperparameters());
  if (!settings_.use_priors) return 0.0;
  double lp = 0;
  auto normal = [&](int idx, double mean, double sd) {
    const double z = (theta[idx] - mean) / sd;
    lp -= 0.5 * z * z;
    if (grad) (*grad)[idx] = -z / sd;
  };
  const Eigen::VectorXd mode = DefaultHyperparameters();
  int k = 0;
  for (int i = 0; i < num_lengthscales_; ++i, ++k) {
    normal(k, mode[k], settings_.log_lengthscale_prior_sd);
  }
  for (int i = 0; i < num_categorical(); ++i, ++k) {
    normal(k, mode[k], settings_.log_category_weight_prior_sd);
  }
  for (int i = 0; i < num_category_effects(); ++i, ++k) {
    normal(k, mode[k], settings_.log_category_effect_prior_sd);
  }
  for (int i = 0; i < num_category_scales(); ++i, ++k) {
    normal(k, mode[k], settings_.log_category_scale_prior_sd);
  }
  normal(k, mode[k], settings_.log_signal_prior_sd);
  ++k;
  normal(k, mode[k], settings_.log_noise_prior_sd);
  ++k;
  normal(k, 0.0, settings_.mean_prior_sd);
  return lp;
}

void GaussianProcess::FitHyperparameters(std::mt19937_64& rng) {
  if (num_points() == 0) return;
  const int p = num_hyperparameters();
  Eigen::VectorXd lower, upper;
  HyperparameterBounds(&lower, &upper);

  std::vector<Eigen::VectorXd> starts = {theta_, DefaultHyperparameters()};
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int r = 0; r < settings_.restarts; ++r) {
    Eigen::VectorXd s = DefaultHyperparameters();
    for (int i = 0; i < p; ++i) s[i] += normal(rng);
    starts.push_back(s);
  }

  const GradientObjective objective = [this](const Eigen::VectorXd& theta,
                                             Eigen::VectorXd* grad) {
    Eigen::VectorXd g_prior;
    double value = LogMarginalLikelihood(theta, grad);
    value += LogPrior(theta, grad ? &g_prior : nullptr);
    if (grad) *grad += g_prior;
    return value;
  };
  LbfgsResult best = MaximizeLbfgs(objective, lower, upper, starts,
                                   settings_.max_evals_per_start, 1e-5);
  if (best.x.size() == 0) best.x = DefaultHyperparameters();
  SetHyperparameters(best.x);
}

void GaussianProcess::PredictDifferenceStandardized(const Eigen::VectorXd& a,
                                                    const Eigen::VectorXd& b,
                                                    double* mean,
                                                    double* var) const {
  const int n = num_points();
  const double prior = Kernel(h_, a.data(), a.data()) +
                       Kernel(h_, b.data(), b.data()) -
                       2 * Kernel(h_, a.data(), b.data());
  if (n == 0) {
    *mean = 0;
    *var = std::max(prior, 0.0);
    return;
  }
  Eigen::VectorXd kd(n);
  for (int i = 0; i < n; ++i) {
    kd[i] = Kernel(h_, x_.col(i).data(), a.data()) -
            Kernel(h_, x_.col(i).data(), b.data());
  }
  *mean = kd.dot(alpha_);
  chol_.topLeftCorner(n, n).triangularView<Eigen::Lower>().solveInPlace(kd);
  *var = std::max(prior - kd.squaredNorm(), 1e-12 * h_.s2);
}

void GaussianProcess::PredictStandardized(const Eigen::VectorXd& x,
                                          double* mean, double* var,
                                          Eigen::VectorXd* dmean,
                                          Eigen::VectorXd* dvar) const {
  const int n = num_points();
  const bool want_grad = dmean != nullptr || dvar != nullptr;
  if (dmean) dmean->setZero(num_continuous_);
  if (dvar) dvar->setZero(num_continuous_);
  if (n == 0) {
    *mean = h_.mean;
    *var = Kernel(h_, x.data(), x.data());
    return;
  }
  Eigen::VectorXd kx(n);
  for (int i = 0; i < n; ++i) kx[i] = Kernel(h_, x_.col(i).data(), x.data());
  *mean = h_.mean + kx.dot(alpha_);
  const auto tri = chol_.topLeftCorner(n, n).triangularView<Eigen::Lower>();
  Eigen::VectorXd v = kx;
  tri.solveInPlace(v);
  const double raw_var = Kernel(h_, x.data(), x.data()) - v.squaredNorm();
  const double min_var = 1e-12 * h_.s2;
  const bool clamped = !(raw_var > min_var);
  *var = clamped ? min_var : raw_var;
  if (!want_grad) return;

  // dk_i/dx = -s2 * cat_i * 5/3 (1 + sqrt5 r) e^{-sqrt5 r} * (x - x_i) / l^2.
  Eigen::VectorXd w = v;
  tri.transpose().solveInPlace(w);
  for (int i = 0; i < n; ++i) {
    const double* a = x_.col(i).data();
    double m52, dfac, cat;
    PairTerms(h_, x.data(), a, &m52, &dfac, &cat);
    const double base = -h_.s2 * cat * dfac;
    const double cm = dmean ? alpha_[i] * base : 0.0;
    const double cv = (dvar && !clamped) ? -2.0 * w[i] * base : 0.0;
    for (int d = 0; d < num_continuous_; ++d) {
      const double dk = (x[d] - a[d]) * h_.inv_l2[d];
      if (dmean) (*dmean)[d] += cm * dk;
      if (dvar) (*dvar)[d] += cv * dk;
    }
  }
}

void GaussianProcess::Predict(const Eigen::VectorXd& x, double* mean,
                              double* var) const {
  double m, v;
  PredictStandardized(x, &m, &v);
  *mean = FromModelUnits(m);
  // Delta method through the (monotone) output transform.
  const double h = 1e-4;
  const double slope =
      (FromModelUnits(m + h) - FromModelUnits(m - h)) / (2 * h);
  *var = v * slope * slope;
}

}  // namespace hvdtune::tuner
