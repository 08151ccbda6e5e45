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
  /// Model log(y) when every output is positive (throughputs, whose noise
  /// is a factor): replaces the warp above for such data.
  bool log_outputs = false;
  /// Observation-noise variance floor (standardised units): keeps the kernel
  /// matrix well conditioned with duplicate points and flat data.
  double noise_floor = 1e-8;
  /// One observation's measured noise, as a relative standard deviation
  /// (a sample's spread over its score; 0: not measured). The noise
  /// variance is then at least that spread carried into model units at the
  /// outputs' mean, set when the data are (SetData): a model may not
  /// explain as signal a difference the samples' own spread covers.
  double relative_noise_floor = 0;
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
  /// A main effect per categorical coordinate: the kernel gains
  /// s2 * sum_c b_c [x_c == y_c], an offset shared by every point of one
  /// category whatever its continuous coordinates, so that all samples of
  /// a category inform how it compares with another (the product term
  /// alone forgets it between distant points).
  bool category_effects = false;
  /// log(b_c) ~ N(mean, sd).
  double log_category_effect_prior_mean = -1.5;
  double log_category_effect_prior_sd = 1.5;
  /// A scale per value of each categorical coordinate: the product term
  /// becomes s(x) s(y) s2 Matern52(r) exp(-...), with s(x) the product
  /// over the categorical coordinates of exp(u_{c, x_c}), so that the
  /// continuous coordinates may move the output a lot under one category
  /// (a cliff at small ring segments) and hardly at all under another.
  bool category_scales = false;
  /// u_{c, v} ~ N(0, sd).
  double log_category_scale_prior_sd = 0.7;
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
/// Gaussian noise with variance noise_floor + exp(eta). Optional terms
/// (GpSettings, off by default): a scale per categorical value,
/// s(x) s(y) multiplying the product term, and a main effect per
/// categorical coordinate, + s2 * sum_c b_c [x_c == y_c]:
///   k(x, y) = s2 * (s(x) s(y) Matern52(r) exp(-...) + sum_c b_c [..]).
///
/// Hyperparameter vector layout (see num_hyperparameters()):
/// [log length scales (num_continuous, or 1 without ARD, 0 if none),
///  log category weights (num_categorical),
///  log main effects b_c (num_category_effects()),
///  log scales u_{c,v}, values of each categorical coordinate in turn
///  (num_category_scales()), log s2, eta, mean].
class GaussianProcess {
 public:
  GaussianProcess() : GaussianProcess(0, {}) {}
  GaussianProcess(int num_continuous, std::vector<int> category_counts,
                  GpSettings settings = {});

  int num_continuous() const { return num_continuous_; }
  int num_categorical() const {
    return static_cast<int>(category_counts_.size());
  }
  int num_category_effects() const {
    return settings_.category_effects ? num_categorical() : 0;
  }
  int num_category_scales() const {
    int n = 0;
    if (settings_.category_scales)
      for (int k : category_counts_) n += k;
    return n;
  }
  int num_hyperparameters() const {
    return num_lengthscales_ + num_categorical() + num_category_effects() +
           num_category_scales() + 3;
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
  /// Its floor: noise_floor, or the measured noise in model units where
  /// that is larger (GpSettings::relative_noise_floor).
  double noise_variance_floor() const { return floor_; }
  /// Sets GpSettings::relative_noise_floor; it takes effect at the next
  /// SetData.
  void set_relative_noise_floor(double relative_sd) {
    settings_.relative_noise_floor = relative_sd;
  }
  double relative_noise_floor() const { return settings_.relative_noise_floor; }

 private:
  struct Unpacked {
    Eigen::VectorXd inv_l2;  // per continuous dim: 1 / l^2
    Eigen::VectorXd cat_w;   // per categorical dim
    Eigen::VectorXd cat_b;   // per categorical dim with a main effect
    Eigen::VectorXd cat_u;   // per categorical value: log scale
    double s2 = 1, noise = 1e-6, mean = 0;
    double prior_var = 1;  // k(x, x)
  };
  Unpacked Unpack(const Eigen::VectorXd& theta) const;
  // Matérn profile, its derivative factor and the categorical factor of
  // the pair (a, b).
  void PairTerms(const Unpacked& h, const double* a, const double* b,
                 double* m52, double* dfac, double* cat) const;
  // The value of categorical coordinate `c` of `a`, as an index.
  int CategoryIndex(const double* a, int c) const;
  // Sum of the main-effect weights of the categories `a` and `b` share.
  double SharedEffects(const Unpacked& h, const double* a,
                       const double* b) const;
  double Kernel(const Unpacked& h, const double* a, const double* b) const;
  // Recomputes model-unit outputs; the warp exponent is refitted only when
  // asked (on SetData), so Cholesky updates keep the same transform.
  void Restandardize(bool refit_warp);
  // The noise variance floor in model units (GpSettings: noise_floor and
  // relative_noise_floor) under the current output transform.
  double NoiseFloor() const;
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
  bool log_outputs_ = false;  // log(y) modelled (settings and data allow)
  double floor_ = 0;          // noise variance floor (NoiseFloor())
  Eigen::MatrixXd chol_;      // lower Cholesky factor of K + noise I
  Eigen::VectorXd alpha_;     // (K + noise I)^-1 (y - mean)
};

/// Yeo-Johnson power transform and its inverse.
double YeoJohnson(double z, double lambda);
double InverseYeoJohnson(double psi, double lambda);

}  // namespace hvdtune::tuner
