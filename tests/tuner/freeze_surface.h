// The runtime-shaped search space and throughput surface the freeze tests
// share: three knobs on log axes and an algorithm, with real gains of
// different sizes.
#pragma once

#include <algorithm>
#include <cmath>

#include "hvdtune/tuner/search_space.h"

namespace hvdtune::tuner::testing_freeze {

// Three knobs on log axes and an algorithm. "fusion" has a broad optimum
// worth 30% at unit 0.3, "cycle" a shallow one at 0.4; "segment" is worth
// 5% below unit 0.35 and nothing elsewhere (segments small enough to
// pipeline); algorithm 2 is 25-30% ahead of the others. Throughput in GB/s
// before noise.
inline SearchSpace Space() {
  return SearchSpace(
      {Dimension::Continuous("fusion", 1 << 20, 256 << 20, true),
       Dimension::Continuous("segment", 16 << 10, 16 << 20, true),
       Dimension::Continuous("cycle", 0.2, 20, true),
       Dimension::Categorical("algorithm", 3)});
}

inline double Throughput(const Config& c) {
  const Eigen::VectorXd u = Space().ToUnit(c);
  const double fusion = 1 - 0.3 * std::min(1.0, std::abs(u[0] - 0.3) / 0.7);
  const double segment = u[1] < 0.35 ? 1.05 : 1.0;
  const double cycle = 1 - 0.2 * std::abs(u[2] - 0.4);
  const double algorithm = c[3] == 2 ? 1.0 : (c[3] == 1 ? 0.75 : 0.7);
  return fusion * segment * cycle * algorithm;
}

// 128 MiB fusion, 1 MiB segments, 1 ms cycles, algorithm 0: the runtime's
// defaults on these axes.
inline Config Initial() { return {128.0 * (1 << 20), 1 << 20, 1.0, 0}; }

}  // namespace hvdtune::tuner::testing_freeze
