#include "hvdtune/tuner/initial_design.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace hvdtune::tuner {

namespace {

// std::shuffle's algorithm is implementation-defined; Fisher–Yates with our
// own draws keeps designs identical across standard libraries.
template <typename T>
void Shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = rng() % i;
    std::swap(v[i - 1], v[j]);
  }
}

double Uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

double MinDistance(const std::vector<Eigen::VectorXd>& points, int num_cont) {
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < points.size(); ++i) {
    for (std::size_t j = i + 1; j < points.size(); ++j) {
      best = std::min(
          best,
          (points[i].head(num_cont) - points[j].head(num_cont)).squaredNorm());
    }
  }
  return best;
}

}  // namespace

std::vector<Eigen::VectorXd> LatinHypercube(
    int n, int num_continuous, const std::vector<int>& category_counts,
    std::mt19937_64& rng, int tries) {
  const int dim = num_continuous + static_cast<int>(category_counts.size());
  std::vector<Eigen::VectorXd> best;
  double best_score = -1;
  for (int t = 0; t < std::max(1, tries); ++t) {
    std::vector<Eigen::VectorXd> points(std::max(0, n), Eigen::VectorXd(dim));
    std::vector<int> strata(std::max(0, n));
    for (int d = 0; d < num_continuous; ++d) {
      std::iota(strata.begin(), strata.end(), 0);
      Shuffle(strata, rng);
      for (int i = 0; i < n; ++i) points[i][d] = (strata[i] + Uniform(rng)) / n;
    }
    for (std::size_t c = 0; c < category_counts.size(); ++c) {
      std::vector<int> levels(std::max(0, n));
      // Even spread, with a random rotation so no level is favoured.
      const int offset = static_cast<int>(rng() % category_counts[c]);
      for (int i = 0; i < n; ++i) levels[i] = (i + offset) % category_counts[c];
      Shuffle(levels, rng);
      for (int i = 0; i < n; ++i) points[i][num_continuous + c] = levels[i];
    }
    const double score =
        num_continuous > 0 ? MinDistance(points, num_continuous) : 0;
    if (score > best_score) {
      best_score = score;
      best = std::move(points);
    }
  }
  return best;
}

std::vector<Eigen::VectorXd> UniformRandom(
    int n, int num_continuous, const std::vector<int>& category_counts,
    std::mt19937_64& rng) {
  const int dim = num_continuous + static_cast<int>(category_counts.size());
  std::vector<Eigen::VectorXd> points(std::max(0, n), Eigen::VectorXd(dim));
  for (auto& p : points) {
    for (int d = 0; d < num_continuous; ++d) p[d] = Uniform(rng);
    for (std::size_t c = 0; c < category_counts.size(); ++c) {
      p[num_continuous + c] = static_cast<double>(rng() % category_counts[c]);
    }
  }
  return points;
}

}  // namespace hvdtune::tuner
