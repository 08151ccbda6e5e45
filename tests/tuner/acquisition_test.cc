#include "hvdtune/tuner/acquisition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace hvdtune::tuner {
namespace {

double DirectLogH(double z) {
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  return std::log(pdf + z * cdf);
}

TEST(AcquisitionTest, LogHMatchesDirectFormulaWhereThatIsAccurate) {
  for (double z = -8; z <= 5; z += 0.173) {
    EXPECT_NEAR(LogH(z), DirectLogH(z),
                1e-9 * std::max(1.0, std::abs(DirectLogH(z))))
        << "z=" << z;
  }
}

TEST(AcquisitionTest, LogHStableInTheFarTail) {
  double previous = LogH(-1.0);
  for (double z = -1.5; z > -1e9; z *= 1.5) {
    double d;
    const double v = LogH(z, &d);
    ASSERT_TRUE(std::isfinite(v)) << z;
    ASSERT_TRUE(std::isfinite(d)) << z;
    EXPECT_LT(v, previous);  // monotone increasing in z
    EXPECT_GT(d, 0);
    previous = v;
    // Asymptote -z^2/2 - log(2pi)/2 - 2 log|z|.
    if (z < -1e3) {
      EXPECT_NEAR(v, -0.5 * z * z - 0.5 * std::log(2 * M_PI) - 2 * std::log(-z),
                  1e-6 * std::abs(v));
    }
  }
  // The two tail branches agree where they meet.
  EXPECT_NEAR(LogH(-100.0 + 1e-12), LogH(-100.0 - 1e-12), 1e-9);
}

TEST(AcquisitionTest, LogHDerivativeMatchesFiniteDifferences) {
  for (double z :
       {-1e5, -300.0, -40.0, -7.0, -1.2, -1.0, -0.3, 0.0, 2.0, 6.0}) {
    double d;
    LogH(z, &d);
    const double h = 1e-6 * std::max(1.0, std::abs(z));
    const double fd = (LogH(z + h) - LogH(z - h)) / (2 * h);
    EXPECT_NEAR(d, fd, 1e-5 * std::max(1.0, std::abs(fd))) << "z=" << z;
  }
}

TEST(AcquisitionTest, ErfcxAgreesAcrossItsBranches) {
  // At the switch to the asymptotic series, both forms agree.
  const double direct = std::exp(625.0) * std::erfc(25.0);
  EXPECT_NEAR(Erfcx(25.0), direct, 1e-11 * direct);
  EXPECT_NEAR(Erfcx(0.0), 1.0, 1e-15);
}

TEST(AcquisitionTest, GradientsMatchFiniteDifferences) {
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(0, 1);
  const int n = 15;
  Eigen::MatrixXd x(4, n);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(0, i) = u(rng), x(1, i) = u(rng), x(2, i) = u(rng);
    x(3, i) = static_cast<double>(rng() % 3);
    y[i] = std::cos(5 * x(0, i)) - x(1, i) * x(1, i) + 0.3 * x(3, i);
  }
  GaussianProcess gp(3, {3});
  gp.SetData(x, y);
  gp.FitHyperparameters(rng);
  double best = -1e300;
  for (int i = 0; i < n; ++i) {
    double m, v;
    gp.PredictStandardized(x.col(i), &m, &v);
    best = std::max(best, m);
  }
  for (AcquisitionKind kind : {AcquisitionKind::kLogExpectedImprovement,
                               AcquisitionKind::kExpectedImprovement,
                               AcquisitionKind::kUpperConfidenceBound}) {
    AcquisitionSettings settings;
    settings.kind = kind;
    for (int t = 0; t < 8; ++t) {
      Eigen::VectorXd p(4);
      p << u(rng), u(rng), u(rng), double(t % 3);
      Eigen::VectorXd grad;
      EvaluateAcquisition(gp, settings, best, p, &grad);
      for (int d = 0; d < 3; ++d) {
        const double h = 1e-6;
        Eigen::VectorXd a = p, b = p;
        a[d] += h;
        b[d] -= h;
        const double fd =
            (EvaluateAcquisition(gp, settings, best, a, nullptr) -
             EvaluateAcquisition(gp, settings, best, b, nullptr)) /
            (2 * h);
        EXPECT_NEAR(grad[d], fd, 1e-4 * std::max(1.0, std::abs(fd)))
            << "kind " << static_cast<int>(kind) << " dim " << d;
      }
    }
  }
}

TEST(AcquisitionTest, LogEiFiniteFarFromDataAndAtData) {
  Eigen::MatrixXd x(1, 3);
  x << 0.1, 0.12, 0.14;
  Eigen::VectorXd y(3);
  y << 0, 1, 2;
  GaussianProcess gp(1, {});
  gp.SetData(x, y);
  AcquisitionSettings settings;
  for (double p : {0.12, 0.14, 0.9, 1.0}) {
    Eigen::VectorXd q(1), grad;
    q << p;
    const double v = EvaluateAcquisition(gp, settings, 100.0, q, &grad);
    EXPECT_TRUE(std::isfinite(v)) << p;
    EXPECT_TRUE(grad.allFinite()) << p;
  }
}

TEST(AcquisitionTest, NoiseMarginFollowsRealNoiseAndVanishesForMisfit) {
  AcquisitionSettings s;
  s.xi_noise = 1.0;
  s.xi_noise_half_variance = 3e-5;
  EXPECT_EQ(NoiseMargin(s, 0.0), 0.0);
  // Misfit of a noise-free function: far below the half-way variance.
  EXPECT_LT(NoiseMargin(s, 1e-7), 0.01 * std::sqrt(1e-7));
  // Half way, and real noise (a few percent of the signal's spread).
  EXPECT_NEAR(NoiseMargin(s, 3e-5), 0.5 * std::sqrt(3e-5), 1e-12);
  EXPECT_GT(NoiseMargin(s, 0.01), 0.99 * std::sqrt(0.01));
  // More noise never lowers the margin.
  double last = 0.0;
  for (double v = 1e-9; v < 10; v *= 3) {
    const double m = NoiseMargin(s, v);
    EXPECT_GE(m, last) << v;
    last = m;
  }
  s.xi_noise = 0.0;
  EXPECT_EQ(NoiseMargin(s, 0.01), 0.0);
}

}  // namespace
}  // namespace hvdtune::tuner
