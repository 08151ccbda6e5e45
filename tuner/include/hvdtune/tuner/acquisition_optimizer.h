#pragma once

#include <Eigen/Core>
#include <random>
#include <vector>

#include "hvdtune/tuner/acquisition.h"
#include "hvdtune/tuner/gaussian_process.h"

namespace hvdtune::tuner {

/// Budget of the acquisition maximiser: a global stage that scores random
/// points and perturbations of the best observed points, then L-BFGS
/// (NLopt) refinement of the best few over the continuous coordinates with
/// a sweep over each categorical dimension's values in between.
struct AcquisitionOptimizerSettings {
  int num_random_candidates = 1024;   ///< Uniform random unit points.
  int num_anchor_perturbations = 32;  ///< Gaussian perturbations per anchor.
  double perturbation_sd = 0.05;      ///< In unit coordinates.
  int num_local_starts = 6;           ///< Best candidates refined locally.
  int local_max_evals = 80;           ///< NLopt evaluations per refinement.
  /// Spaces with no continuous dimension and at most this many category
  /// combinations are enumerated instead of sampled.
  int max_enumerated_combinations = 4096;
};

/// The point found and its acquisition value.
struct AcquisitionMaximum {
  Eigen::VectorXd x;
  double value = 0;
};

/// Maximises the acquisition over the unit representation of a space with
/// `gp.num_continuous()` continuous coordinates and categorical coordinates
/// of the given `category_counts`. `anchors` (e.g. the best observed unit
/// points) seed local perturbations. NLopt failures fall back to the best
/// point evaluated; never throws on numerical trouble.
///
/// `fixed_categories`, when non-empty, has one entry per categorical
/// coordinate: a category index holds that coordinate at that value (the
/// maximum is then taken over the rest of the space), -1 leaves it free.
AcquisitionMaximum MaximizeAcquisition(
    const GaussianProcess& gp, const AcquisitionSettings& acquisition,
    double best, const std::vector<int>& category_counts,
    const std::vector<Eigen::VectorXd>& anchors,
    const AcquisitionOptimizerSettings& settings, std::mt19937_64& rng,
    const std::vector<int>& fixed_categories = {});

}  // namespace hvdtune::tuner
