#include "hvdtune/tuner/gaussian_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace hvdtune::tuner {
namespace {

double Matern52(double r) {
  return (1 + std::sqrt(5.0) * r + 5.0 / 3.0 * r * r) *
         std::exp(-std::sqrt(5.0) * r);
}

// Random mixed data: 3 continuous coordinates, categorical with 3 and 2.
void MixedData(int n, std::uint64_t seed, Eigen::MatrixXd* x,
               Eigen::VectorXd* y) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  x->resize(5, n);
  y->resize(n);
  for (int i = 0; i < n; ++i) {
    for (int d = 0; d < 3; ++d) (*x)(d, i) = u(rng);
    (*x)(3, i) = static_cast<double>(rng() % 3);
    (*x)(4, i) = static_cast<double>(rng() % 2);
    (*y)[i] = std::sin(6 * (*x)(0, i)) + (*x)(1, i) * (*x)(3, i) + 0.1 * u(rng);
  }
}

void ExpectGradientMatchesFiniteDifference(const GaussianProcess& gp,
                                           const Eigen::VectorXd& theta) {
  Eigen::VectorXd grad;
  gp.LogMarginalLikelihood(theta, &grad);
  Eigen::VectorXd pgrad;
  gp.LogPrior(theta, &pgrad);
  for (int i = 0; i < theta.size(); ++i) {
    const double h = 1e-5;
    Eigen::VectorXd a = theta, b = theta;
    a[i] += h;
    b[i] -= h;
    const double fd = (gp.LogMarginalLikelihood(a, nullptr) -
                       gp.LogMarginalLikelihood(b, nullptr)) /
                      (2 * h);
    EXPECT_NEAR(grad[i], fd, 1e-5 * std::max(1.0, std::abs(fd)))
        << "parameter " << i;
    const double pfd =
        (gp.LogPrior(a, nullptr) - gp.LogPrior(b, nullptr)) / (2 * h);
    EXPECT_NEAR(pgrad[i], pfd, 1e-6 * std::max(1.0, std::abs(pfd)))
        << "prior " << i;
  }
}

TEST(GaussianProcessTest, MarginalLikelihoodGradientMatchesFiniteDifferences) {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
  MixedData(25, 3, &x, &y);
  for (bool ard : {true, false}) {
    GpSettings settings;
    settings.ard = ard;
    GaussianProcess gp(3, {3, 2}, settings);
    gp.SetData(x, y);
    std::mt19937_64 rng(11);
    std::normal_distribution<double> normal(0, 0.5);
    for (int trial = 0; trial < 3; ++trial) {
      Eigen::VectorXd theta = gp.DefaultHyperparameters();
      for (int i = 0; i < theta.size(); ++i) theta[i] += normal(rng);
      theta[theta.size() - 2] = std::log(1e-2);  // noise well above the floor
      ExpectGradientMatchesFiniteDifference(gp, theta);
    }
  }
}

// The same check with the per-category terms (main effects, scales per
// value) on, alone and together, and with log outputs; the incremental
// Cholesky update must agree with a full factorisation under them too.
TEST(GaussianProcessTest, CategoryTermsGradientMatchesFiniteDifferences) {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
  MixedData(25, 5, &x, &y);
  y = y.array().exp();  // positive, as throughputs
  for (int variant = 1; variant < 8; ++variant) {
    GpSettings settings;
    settings.category_effects = (variant & 1) != 0;
    settings.category_scales = (variant & 2) != 0;
    settings.log_outputs = (variant & 4) != 0;
    GaussianProcess gp(3, {3, 2}, settings);
    EXPECT_EQ(gp.num_hyperparameters(),
              3 + 2 + (settings.category_effects ? 2 : 0) +
                  (settings.category_scales ? 5 : 0) + 3);
    gp.SetData(x, y);
    std::mt19937_64 rng(17 + variant);
    std::normal_distribution<double> normal(0, 0.5);
    for (int trial = 0; trial < 2; ++trial) {
      Eigen::VectorXd theta = gp.DefaultHyperparameters();
      for (int i = 0; i < theta.size(); ++i) theta[i] += normal(rng);
      theta[theta.size() - 2] = std::log(1e-2);
      SCOPED_TRACE("variant " + std::to_string(variant));
      ExpectGradientMatchesFiniteDifference(gp, theta);
    }
    GaussianProcess grown(3, {3, 2}, settings);
    grown.SetHyperparameters(gp.DefaultHyperparameters());
    grown.SetData(x.leftCols(20), y.head(20));
    for (int i = 20; i < 25; ++i) grown.AddPoint(x.col(i), y[i]);
    GaussianProcess full(3, {3, 2}, settings);
    full.SetHyperparameters(gp.DefaultHyperparameters());
    full.SetData(x.leftCols(20), y.head(20));  // same output transform
    for (int i = 20; i < 25; ++i) full.AddPoint(x.col(i), y[i]);
    double m1, v1, m2, v2;
    full.SetHyperparameters(gp.DefaultHyperparameters());  // refactorises
    grown.PredictStandardized(x.col(3), &m1, &v1);
    full.PredictStandardized(x.col(3), &m2, &v2);
    EXPECT_NEAR(m1, m2, 1e-8);
    EXPECT_NEAR(v1, v2, 1e-8);
  }
}

// A category under which the continuous coordinate does nothing and one
// under which it moves the output a lot: with a scale per value, the fit
// gives the second the larger scale, and predicts the flat category flat
// beyond its samples.
TEST(GaussianProcessTest, CategoryScalesSeparateAFlatCategoryFromASteepOne) {
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(0, 1);
  const int n = 24;
  Eigen::MatrixXd x(2, n);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(1, i) = i % 2;
    // The flat category is measured only on [0, 0.5].
    x(0, i) = x(1, i) == 0 ? 0.5 * u(rng) : u(rng);
    y[i] = x(1, i) == 0 ? 5.0 : 5.0 + 4.0 * std::sin(6 * x(0, i));
    y[i] += 0.01 * (u(rng) - 0.5);
  }
  GpSettings settings;
  settings.category_scales = true;
  GaussianProcess gp(1, {2}, settings);
  gp.SetData(x, y);
  std::mt19937_64 fit_rng(3);
  gp.FitHyperparameters(fit_rng);
  // Layout: [log l, log w, u_0, u_1, log s2, eta, mean].
  const Eigen::VectorXd& theta = gp.hyperparameters();
  EXPECT_GT(theta[3], theta[2] + 0.5);
  Eigen::VectorXd far(2);
  far << 0.95, 0;
  double mean, var;
  gp.Predict(far, &mean, &var);
  EXPECT_NEAR(mean, 5.0, 0.5);
}

// Log outputs: a model of log(y) recovers an exponential trend through its
// own samples; with an output <= 0 it falls back to the warped model.
TEST(GaussianProcessTest, LogOutputsModelPositiveDataOnALogScale) {
  Eigen::MatrixXd x(1, 8);
  Eigen::VectorXd y(8);
  for (int i = 0; i < 8; ++i) {
    x(0, i) = i / 7.0;
    y[i] = std::exp(4 * x(0, i));
  }
  GpSettings settings;
  settings.log_outputs = true;
  GaussianProcess gp(1, {}, settings);
  gp.SetData(x, y);
  std::mt19937_64 rng(2);
  gp.FitHyperparameters(rng);
  for (int i = 0; i < 8; ++i) {
    double mean, var;
    gp.Predict(x.col(i), &mean, &var);
    EXPECT_NEAR(mean / y[i], 1.0, 0.02) << i;
    EXPECT_NEAR(gp.ToModelUnits(gp.FromModelUnits(0.3)), 0.3, 1e-9);
  }
  y[0] = -1;
  gp.SetData(x, y);
  gp.FitHyperparameters(rng);
  double mean, var;
  gp.Predict(x.col(4), &mean, &var);
  EXPECT_TRUE(std::isfinite(mean) && std::isfinite(var));
  EXPECT_NEAR(mean, y[4], 0.1 * y[4]);
}

// One continuous coordinate, fixed hyperparameters (log l = log 0.5,
// s2 = 1, noise = floor 1e-9 + 1e-12, mean 0), y = 1 at 0.2 and 3 at 0.6
// (standardised: -1/sqrt2, +1/sqrt2; offset 2, scale sqrt2).
GaussianProcess TwoPointModel() {
  GpSettings settings;
  settings.warp_outputs = false;
  settings.noise_floor = 1e-9;
  GaussianProcess gp(1, {}, settings);
  Eigen::VectorXd theta(4);
  theta << std::log(0.5), 0.0, std::log(1e-12), 0.0;
  gp.SetHyperparameters(theta);
  Eigen::MatrixXd x(1, 2);
  x << 0.2, 0.6;
  Eigen::VectorXd y(2);
  y << 1.0, 3.0;
  gp.SetData(x, y);
  return gp;
}

TEST(GaussianProcessTest, PosteriorMatchesHandComputation) {
  const GaussianProcess gp = TwoPointModel();
  const double noise = 1e-9 + 1e-12;
  const double k12 = Matern52(0.4 / 0.5);

  // Midpoint: by symmetry the standardised mean is 0 (raw 2); variance
  // 1 - k*^T K^-1 k* with k* = (m, m), K = [[1+s, k12], [k12, 1+s]].
  double mean, var;
  Eigen::VectorXd mid(1);
  mid << 0.4;
  gp.Predict(mid, &mean, &var);
  const double m = Matern52(0.2 / 0.5);
  const double std_var = 1 - 2 * m * m / (1 + noise + k12);
  EXPECT_NEAR(mean, 2.0, 1e-9);
  EXPECT_NEAR(var, std_var * 2.0, 1e-9);  // scale^2 = 2

  // Off-centre point, hand-inverted 2x2 system.
  Eigen::VectorXd p(1);
  p << 0.3;
  const double a = Matern52(0.1 / 0.5), b = Matern52(0.3 / 0.5);
  const double d = 1 + noise, det = d * d - k12 * k12;
  const double ys1 = -1 / std::sqrt(2.0), ys2 = 1 / std::sqrt(2.0);
  const double alpha1 = (d * ys1 - k12 * ys2) / det;
  const double alpha2 = (-k12 * ys1 + d * ys2) / det;
  const double mean_std = a * alpha1 + b * alpha2;
  const double quad = (d * a * a - 2 * k12 * a * b + d * b * b) / det;
  gp.Predict(p, &mean, &var);
  EXPECT_NEAR(mean, 2.0 + std::sqrt(2.0) * mean_std, 1e-9);
  EXPECT_NEAR(var, 2.0 * (1 - quad), 1e-9);

  // At a data point the posterior interpolates the observation.
  Eigen::VectorXd at(1);
  at << 0.2;
  gp.Predict(at, &mean, &var);
  EXPECT_NEAR(mean, 1.0, 1e-6);
  EXPECT_LT(var, 1e-6);
}

TEST(GaussianProcessTest, DifferenceCountsTheCovariance) {
  const GaussianProcess gp = TwoPointModel();
  const double d = 1 + 1e-9 + 1e-12, k12 = Matern52(0.4 / 0.5);
  const double det = d * d - k12 * k12;
  // Posterior covariance of a and b: k(a, b) - k_a^T K^-1 k_b.
  auto k = [](double u, double v) { return Matern52(std::abs(u - v) / 0.5); };
  auto post_cov = [&](double a, double b) {
    const double a1 = k(a, 0.2), a2 = k(a, 0.6), b1 = k(b, 0.2), b2 = k(b, 0.6);
    return k(a, b) -
           (d * a1 * b1 - k12 * (a1 * b2 + a2 * b1) + d * a2 * b2) / det;
  };
  Eigen::VectorXd a(1), b(1);
  a << 0.3;
  b << 0.45;
  double mean, var, ma, va, mb, vb;
  gp.PredictDifferenceStandardized(a, b, &mean, &var);
  gp.PredictStandardized(a, &ma, &va);
  gp.PredictStandardized(b, &mb, &vb);
  EXPECT_NEAR(mean, ma - mb, 1e-9);
  const double expected =
      post_cov(0.3, 0.3) + post_cov(0.45, 0.45) - 2 * post_cov(0.3, 0.45);
  EXPECT_NEAR(var, expected, 1e-9);
  // Nearby points are strongly correlated: far less than va + vb.
  EXPECT_LT(var, 0.5 * (va + vb));
  gp.PredictDifferenceStandardized(a, a, &mean, &var);
  EXPECT_NEAR(mean, 0, 1e-12);
  EXPECT_LT(var, 1e-9);

  // Mixed data, fitted: between (sd_a - sd_b)^2 and (sd_a + sd_b)^2.
  Eigen::MatrixXd mx;
  Eigen::VectorXd my;
  MixedData(25, 5, &mx, &my);
  GaussianProcess mixed(3, {3, 2});
  mixed.SetData(mx, my);
  std::mt19937_64 rng(2);
  mixed.FitHyperparameters(rng);
  for (int i = 0; i < 10; ++i) {
    Eigen::VectorXd p = mx.col(i), q = mx.col(i + 10);
    q[4] = 1 - p[4];
    mixed.PredictDifferenceStandardized(p, q, &mean, &var);
    mixed.PredictStandardized(p, &ma, &va);
    mixed.PredictStandardized(q, &mb, &vb);
    EXPECT_NEAR(mean, ma - mb, 1e-9);
    const double sa = std::sqrt(va), sb = std::sqrt(vb);
    EXPECT_GE(var, (sa - sb) * (sa - sb) - 1e-9);
    EXPECT_LE(var, (sa + sb) * (sa + sb) + 1e-9);
  }
}

TEST(GaussianProcessTest, IncrementalCholeskyMatchesFullFactorisation) {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
  MixedData(20, 5, &x, &y);
  GpSettings settings;
  settings.warp_outputs = false;  // the warp is refitted only by SetData
  GaussianProcess full(3, {3, 2}, settings), incremental(3, {3, 2}, settings);
  incremental.SetData(x.leftCols(12), y.head(12));
  for (int i = 12; i < 20; ++i) incremental.AddPoint(x.col(i), y[i]);
  full.SetData(x, y);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  for (int t = 0; t < 10; ++t) {
    Eigen::VectorXd p(5);
    p << u(rng), u(rng), u(rng), double(t % 3), double(t % 2);
    double m1, v1, m2, v2;
    full.Predict(p, &m1, &v1);
    incremental.Predict(p, &m2, &v2);
    EXPECT_NEAR(m1, m2, 1e-9);
    EXPECT_NEAR(v1, v2, 1e-9);
  }
}

TEST(GaussianProcessTest, DuplicatesAndFlatDataStayFinite) {
  std::mt19937_64 rng(2);
  Eigen::MatrixXd x(2, 12);
  Eigen::VectorXd y(12);
  for (int i = 0; i < 12; ++i) {
    x(0, i) = 0.5;  // every point identical
    x(1, i) = 0.25;
    y[i] = 7.0;  // flat
  }
  GaussianProcess gp(2, {});
  gp.SetData(x, y);
  gp.FitHyperparameters(rng);
  EXPECT_TRUE(gp.hyperparameters().allFinite());
  Eigen::VectorXd p(2);
  p << 0.1, 0.9;
  double mean, var;
  gp.Predict(p, &mean, &var);
  EXPECT_TRUE(std::isfinite(mean));
  EXPECT_TRUE(std::isfinite(var));
  EXPECT_NEAR(mean, 7.0, 1e-6);
  // Duplicates with different values, and incremental duplicates.
  for (int i = 0; i < 12; ++i) y[i] = (i % 2) ? 1.0 : 2.0;
  gp.SetData(x, y);
  gp.FitHyperparameters(rng);
  for (int i = 0; i < 5; ++i) gp.AddPoint(x.col(0), 1.5);
  gp.Predict(x.col(0), &mean, &var);
  EXPECT_TRUE(std::isfinite(mean));
  EXPECT_TRUE(std::isfinite(var));
  EXPECT_GE(var, 0.0);
}

TEST(GaussianProcessTest, FitRecoversShortLengthScaleForWigglyDimension) {
  // y depends strongly on x0 and not on x1: ARD should say so.
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> u(0, 1);
  Eigen::MatrixXd x(2, 30);
  Eigen::VectorXd y(30);
  for (int i = 0; i < 30; ++i) {
    x(0, i) = u(rng);
    x(1, i) = u(rng);
    y[i] = std::sin(8 * x(0, i));
  }
  GaussianProcess gp(2, {});
  gp.SetData(x, y);
  gp.FitHyperparameters(rng);
  EXPECT_LT(gp.hyperparameters()[0] + 1.0, gp.hyperparameters()[1]);
}

TEST(GaussianProcessTest, YeoJohnsonInverts) {
  for (double lambda : {-1.0, 0.0, 0.5, 1.0, 2.0, 3.0}) {
    for (double z : {-3.0, -0.5, 0.0, 0.7, 4.0}) {
      EXPECT_NEAR(InverseYeoJohnson(YeoJohnson(z, lambda), lambda), z, 1e-9);
    }
  }
}

}  // namespace
}  // namespace hvdtune::tuner

namespace hvdtune::tuner {
namespace {

// Scores that differ by noise alone (a 5% spread about 1000): the largest
// posterior difference between two measured points, in posterior standard
// deviations of that difference.
double LargestClaimedDifference(const GaussianProcess& gp) {
  double largest = 0;
  for (int i = 0; i < gp.num_points(); ++i) {
    for (int j = 0; j < gp.num_points(); ++j) {
      double mean, var;
      gp.PredictDifferenceStandardized(gp.inputs().col(i), gp.inputs().col(j),
                                       &mean, &var);
      if (i != j) largest = std::max(largest, mean / std::sqrt(var));
    }
  }
  return largest;
}

TEST(GaussianProcessTest, MeasuredNoiseIsAFloorOfTheModelsNoise) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> n01(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  Eigen::MatrixXd x(3, 20);
  Eigen::VectorXd y(20);
  for (int i = 0; i < 20; ++i) {
    for (int d = 0; d < 3; ++d) x(d, i) = u(rng);
    y[i] = 1000 * std::exp(0.05 * n01(rng));
  }
  GpSettings s;
  s.log_noise_prior_mean = -9;  // a prior that favours explaining noise
  GaussianProcess free(3, {}, s);
  s.relative_noise_floor = 0.05;
  GaussianProcess floored(3, {}, s);
  for (GaussianProcess* gp : {&free, &floored}) {
    gp->SetData(x, y);
    std::mt19937_64 fit_rng(3);
    gp->FitHyperparameters(fit_rng);
  }
  EXPECT_EQ(free.noise_variance_floor(), s.noise_floor);
  // The floor is the measured spread in model units, at the scores' mean.
  const double at = std::exp(y.array().log().mean());
  const double sd = 0.5 * (floored.ToModelUnits(at * std::exp(0.05)) -
                           floored.ToModelUnits(at * std::exp(-0.05)));
  EXPECT_NEAR(floored.noise_variance_floor(), sd * sd, 1e-12);
  EXPECT_GT(floored.noise_variance_floor(), 0.1);
  EXPECT_GE(floored.noise_variance(), floored.noise_variance_floor());
  // Knowing the noise, the model claims no difference beyond it between
  // any two of the points; set later (set_relative_noise_floor), the floor
  // counts from the next SetData on.
  EXPECT_LT(LargestClaimedDifference(floored), 2.0);
  GaussianProcess late(3, {}, GpSettings{});
  late.set_relative_noise_floor(0.05);
  EXPECT_EQ(late.noise_variance_floor(), GpSettings{}.noise_floor);
  late.SetData(x, y);
  EXPECT_NEAR(late.noise_variance_floor(), floored.noise_variance_floor(),
              1e-12);
  // Without it, the same fit explains the noise as signal (243 standard
  // deviations on these data): what the floor is there to prevent.
  EXPECT_GT(LargestClaimedDifference(free), 2.0);
}

}  // namespace
}  // namespace hvdtune::tuner
