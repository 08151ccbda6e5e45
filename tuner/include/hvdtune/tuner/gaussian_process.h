#pragma once

#include <Eigen/Core>
#include <random>
#include <vector>

namespace hvdtune::tuner {

/// Settings of the Gaussian-process surrogate. Inputs are unit vectors (see
/// SearchSpace); outputs are standardised internally (zero mean, unit
/// variance), so the priors below are in standardised units.
struct GpSettings {
  /// One length scale per continuous dimension (ARD); false shares one.
  bool ard = true;
  /// Weak log-normal priors on the hyperparameters (MAP instead of ML-II).
  bool use_priors = true;
  /// Yeo-Johnson power transform of the standardised outputs (exponent by
  /// maximum likelihood at each refit) before the final standardisation:
  /// tames skewed scores such as a few very poor configurations.
  bool warp_outputs = true;
  /// Observation-noise variance floor (standardised units): keeps the kernel
  /// matrix well conditioned with duplicate points and flat data.
  double noise_floor = 1e-8;
  /// Random restarts of the hyperparameter search, drawn from the prior, in
  /// addition to the warm start (current values) and the prior mode.
  int restarts = 1;
  /// NLopt evaluation budget per start.
  int max_evals_per_start = 60;
  /// log(length scale) ~ N(mean + 0.5 * log(num_continuous), sd).
  double log_lengthscale_prior_mean = -0.7;
  double log_lengthscale_prior_sd = 1.0;
  /// log(categorical mismatch weight) ~ N(mean, sd).
  double log_category_weight_prior_mean = 0.0;
  double log_category_weight_prior_sd = 1.0;
  /// log(signal variance) ~ N(mean, sd).
  double log_signal_prior_mean = 0.0;
  double log_signal_prior_sd = 1.0;
  /// log(noise variance above the floor) ~ N(mean, sd).
  double log_noise_prior_mean = -9.0;
  double log_noise_prior_sd = 3.0;
  /// Constant mean ~ N(0, sd).
  double mean_prior_sd = 1.0;
};

/// Gaussian-process regression over a mixed space.
///
/// Kernel: k(x, y) = s2 * Matern52(r) * exp(-sum_c w_c [x_c != y_c]), where
/// r is the ARD-scaled distance over the continuous coordinates and the
/// second factor is an exponentiated Hamming (overlap) kernel over the
/// categorical ones, so all categories share one model. Constant mean,
/// Gaussian noise with variance noise_floor + exp(eta).
///
/// Hyperparameter vector layout (see num_hyperparameters()):
/// [log length scales (num_continuous, or 1 without ARD, 0 if none),
///  log category weights (num_categorical), log s2, eta, mean].
class GaussianProcess {
 public:
  GaussianProcess() : GaussianProcess(0, {}) {}
  GaussianProcess(int num_continuous, std::vector<int> category_counts,
                  GpSettings settings = {});

  int num_continuous() const { return num_continuous_; }
  int num_categorical() const {
    return static_cast<int>(category_counts_.size());
  }
  int num_hyperparameters() const {
    return num_lengthscales_ + num_categorical() + 3;
  }
  int num_points() const { return static_cast<int>(y_raw_.size()); }
  const GpSettings& settings() const { return settings_; }

  /// The prior mode: where an unfitted model starts.
  Eigen::VectorXd DefaultHyperparameters() const;
  const Eigen::VectorXd& hyperparameters() const { return theta_; }
  /// Box the hyperparameter search stays in.
  void HyperparameterBounds(Eigen::VectorXd* lower,
                            Eigen::VectorXd* upper) const;
  /// Sets the hyperparameters (clamped to the bounds) and refactorises.
  void SetHyperparameters(const Eigen::VectorXd& theta);

  /// Replaces the data (columns of `x` are unit vectors) and factorises the
  /// kernel matrix with the current hyperparameters.
  void SetData(const Eigen::MatrixXd& x, const Eigen::VectorXd& y);
  /// Adds one observation with a rank-one extension of the Cholesky factor
  /// (O(n^2)); hyperparameters are kept.
  void AddPoint(const Eigen::VectorXd& x, double y);
  /// Maximises log marginal likelihood (+ log prior) over the
  /// hyperparameters with NLopt L-BFGS from several starts, then refactorises.
  /// Never throws on numerical trouble: keeps the best point seen.
  void FitHyperparameters(std::mt19937_64& rng);

  /// Log marginal likelihood of the current (standardised) data under
  /// `theta`, and its gradient when `grad` is non-null. No prior term.
  double LogMarginalLikelihood(const Eigen::VectorXd& theta,
                               Eigen::VectorXd* grad) const;
  /// Log prior density of `theta` (up to a constant) and its gradient.
  double LogPrior(const Eigen::VectorXd& theta, Eigen::VectorXd* grad) const;

  /// Posterior of the latent function at `x`, in standardised units. When
  /// non-null, `dmean`/`dvar` receive gradients with respect to the
  /// continuous coordinates of `x` (size num_continuous()).
  void PredictStandardized(const Eigen::VectorXd& x, double* mean, double* var,
                           Eigen::VectorXd* dmean = nullptr,
                           Eigen::VectorXd* dvar = nullptr) const;
  /// Posterior of f(a) - f(b), in standardised units: the difference of the
  /// means and the variance of the difference (the two points' posterior
  /// covariance counted, which shared data makes large).
  void PredictDifferenceStandardized(const Eigen::VectorXd& a,
                                     const Eigen::VectorXd& b, double* mean,
                                     double* var) const;
  /// Posterior mean and variance of the latent function in output units
  /// (through the inverse output transform; variance by the delta method).
  void Predict(const Eigen::VectorXd& x, double* mean, double* var) const;

  /// Maps a raw output to model units (standardise, warp, standardise)
  /// and back. Monotone increasing.
  double ToModelUnits(double raw) const;
  double FromModelUnits(double model) const;
  /// Yeo-Johnson exponent in use (1 is the identity).
  double warp_lambda() const { return warp_lambda_; }
  const Eigen::MatrixXd& inputs() const { return x_; }
  /// Observation-noise variance in use (standardised units).
  double noise_variance() const { return h_.noise; }

 private:
  struct Unpacked {
    Eigen::VectorXd inv_l2;  // per continuous dim: 1 / l^2
    Eigen::VectorXd cat_w;   // per categorical dim
    double s2 = 1, noise = 1e-6, mean = 0;
  };
  Unpacked Unpack(const Eigen::VectorXd& theta) const;
  // Matérn profile, its derivative factor and the categorical factor of
  // the pair (a, b).
  void PairTerms(const Unpacked& h, const double* a, const double* b,
                 double* m52, double* dfac, double* cat) const;
  double Kernel(const Unpacked& h, const double* a, const double* b) const;
  // Recomputes model-unit outputs; the warp exponent is refitted only when
  // asked (on SetData), so Cholesky updates keep the same transform.
  void Restandardize(bool refit_warp);
  void Refactorize();
  void UpdateAlpha();

  int num_continuous_ = 0;
  int num_lengthscales_ = 0;
  std::vector<int> category_counts_;
  GpSettings settings_;
  Eigen::VectorXd theta_;
  Unpacked h_;

  Eigen::MatrixXd x_;      // num_free x n, columns are points
  Eigen::VectorXd y_raw_;  // raw outputs
  Eigen::VectorXd y_;      // standardised outputs
  double y_offset_ = 0, y_scale_ = 1;
  double warp_lambda_ = 1, warp_offset_ = 0, warp_scale_ = 1;
  Eigen::MatrixXd chol_;   // lower Cholesky factor of K + noise I
  Eigen::VectorXd alpha_;  // (K + noise I)^-1 (y - mean)
};

/// Yeo-Johnson power transform and its inverse.
double YeoJohnson(double z, double lambda);
double InverseYeoJohnson(double psi, double lambda);

}  // namespace hvdtune::tuner
