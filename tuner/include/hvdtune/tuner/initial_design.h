#pragma once

#include <Eigen/Core>
#include <random>
#include <vector>

namespace hvdtune::tuner {

/// A maximin Latin hypercube of `n` unit points: each continuous coordinate
/// has exactly one point per 1/n stratum, each categorical coordinate spreads
/// its levels evenly; the best of `tries` random hypercubes by minimum
/// pairwise (continuous) distance is kept. Layout as SearchSpace unit
/// vectors: `num_continuous` values in [0,1], then one category index per
/// entry of `category_counts`.
std::vector<Eigen::VectorXd> LatinHypercube(
    int n, int num_continuous, const std::vector<int>& category_counts,
    std::mt19937_64& rng, int tries = 10);

/// `n` independent uniform random unit points (same layout).
std::vector<Eigen::VectorXd> UniformRandom(
    int n, int num_continuous, const std::vector<int>& category_counts,
    std::mt19937_64& rng);

}  // namespace hvdtune::tuner
