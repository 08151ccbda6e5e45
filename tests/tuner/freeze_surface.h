// The runtime-shaped search space and throughput surface the freeze tests
// share: three knobs on log axes and an algorithm, with real gains of
// different sizes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "hvdtune/tuner/autotune_policy.h"
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

// Drives one policy from Initial() (2 warm-up samples, then 20 of 5 steps
// of 0.1 s each, fixed length) until it freezes or 5,000 steps pass. A
// step's bytes are step_bytes(config in force, lognormal noise factor of
// `step_noise` drawn from `rng`); every event goes to on_event. Returns
// the policy's phase and best configuration at the end.
template <typename StepBytes, typename OnEvent>
PolicyStatus RunUntilFrozen(std::uint64_t seed, std::mt19937_64 rng,
                            double step_noise, StepBytes step_bytes,
                            OnEvent on_event) {
  AutotunePolicySettings s;
  s.warmup_samples = 2;
  s.steps_per_sample = 5;
  s.sample_precision = 0;  // fixed-length samples: a known noise per sample
  s.max_samples = 20;
  s.seed = seed;
  s.asynchronous = false;
  PolicyStart start;
  start.initial = Initial();
  AutotunePolicy policy(Space(), start, s);
  std::normal_distribution<double> noise(0.0, step_noise);
  Config in_force = Initial();
  double now = 0;
  for (int i = 0; i < 5000 && policy.status().phase != Phase::kFrozen; ++i) {
    if (auto next = policy.TakeConfig()) in_force = *next;
    now += 0.1;
    policy.OnStep(step_bytes(in_force, std::exp(noise(rng))), 0.1, now);
    for (const PolicyEvent& e : policy.TakeEvents()) on_event(e);
  }
  return policy.status();
}

}  // namespace hvdtune::tuner::testing_freeze
